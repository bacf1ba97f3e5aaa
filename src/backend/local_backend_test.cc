// LocalBackend against a fake runtime (placement, the never-two-copies rule, exactly one
// kExited, Stop, Recover, probes, cleanup) and, as root, against the real ShimRuntime and
// tarn-shim. Tests wait for events on a condition variable with a generous deadline; none
// sleeps to let something happen.
#include "backend/local_backend.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/file.h"
#include "runtime/shim_runtime.h"
#include "spec/parser.h"

namespace tarn::backend {
namespace {

using namespace std::chrono_literals;
using runtime::ContainerState;
using service::BackendEvent;
using service::InstanceRef;
using Kind = BackendEvent::Kind;

std::string ReadAll(const std::string& path) { return ReadFileToString(path).value_or(""); }
bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Containers in memory, named by shim directory like the real runtime. Like the real one it
// writes spec.json (the record of which start a directory holds) and a log file. Thread-safe.
class FakeRuntime final : public runtime::ContainerRuntime {
 public:
  StatusOr<ContainerState> Start(const runtime::ContainerSpec& spec) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++starts_;
    if (!start_error_.ok()) return start_error_;
    RETURN_IF_ERROR(MakeDirectories(spec.shim_dir, 0700));
    RETURN_IF_ERROR(MakeDirectories(spec.work_dir, 0750));
    RETURN_IF_ERROR(
        runtime::WriteFileAtomically(spec.shim_dir + "/spec.json", ToJson(spec).dump(), false));
    // "run N": the N-th start in this directory (instances start in parallel, so a global
    // count would depend on the order the pool ran them in).
    const int run = ++runs_[spec.shim_dir];
    RETURN_IF_ERROR(runtime::WriteFileAtomically(spec.shim_dir + "/stdout.log",
                                                 "run " + std::to_string(run) + "\n", false));
    ContainerState st;
    st.shim_pid = 1000 + starts_;
    containers_[spec.shim_dir] = st;
    specs_.push_back(spec);
    return st;
  }
  StatusOr<ContainerState> State(const std::string& shim_dir) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = containers_.find(shim_dir);
    if (it == containers_.end()) return NotFoundError(shim_dir + ": no container");
    return it->second;
  }
  Status Stop(const std::string& shim_dir) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++stops_;
    auto it = containers_.find(shim_dir);
    if (it != containers_.end() && it->second.phase == ContainerState::Phase::kRunning) {
      SetExited(it->second, 0, SIGTERM);
    }
    return OkStatus();
  }
  StatusOr<ContainerState> Wait(const std::string& shim_dir, std::chrono::milliseconds) override {
    return State(shim_dir);
  }
  Status Remove(const std::string& shim_dir) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = containers_.find(shim_dir);
    if (it == containers_.end()) return NotFoundError(shim_dir + ": no container");
    if (it->second.phase == ContainerState::Phase::kRunning) {
      return FailedPreconditionError(shim_dir + ": still running");
    }
    containers_.erase(it);
    std::filesystem::remove_all(shim_dir);
    return OkStatus();
  }

  // What the workload or the kernel does.
  void Exit(const std::string& shim_dir, int code) {
    std::lock_guard<std::mutex> lock(mu_);
    ContainerState& st = containers_.at(shim_dir);
    SetExited(st, code, 0);
    if (Exists(shim_dir)) {
      EXPECT_TRUE(runtime::WriteFileAtomically(shim_dir + "/exit.json",
                                               runtime::ToJson(st.exit).dump(), false)
                      .ok());
    }
  }
  void Put(const std::string& shim_dir, ContainerState st) {
    std::lock_guard<std::mutex> lock(mu_);
    containers_[shim_dir] = std::move(st);
  }
  void FailStarts(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    start_error_ = std::move(s);
  }
  int starts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return starts_;
  }
  int stops() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stops_;
  }
  runtime::ContainerSpec last_spec() const {
    std::lock_guard<std::mutex> lock(mu_);
    return specs_.back();
  }

 private:
  static void SetExited(ContainerState& st, int code, int signal) {
    st.phase = ContainerState::Phase::kExited;
    st.exit.exit_code = signal ? -1 : code;
    st.exit.signal = signal;
    st.exit.diagnostics = runtime::DescribeExit(st.exit);
    st.diagnostics = st.exit.diagnostics;
  }

  mutable std::mutex mu_;
  std::map<std::string, ContainerState> containers_;
  std::vector<runtime::ContainerSpec> specs_;
  Status start_error_;
  std::map<std::string, int> runs_;  // starts per shim directory
  int starts_ = 0;
  int stops_ = 0;
};

// Collects the backend's events; waits for one with a deadline.
class EventLog {
 public:
  service::EventSink Sink() {
    return [this](BackendEvent e) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
      cv_.notify_all();
    };
  }
  // The first event of `kind` about `container_id`; a kStartFailed with kind kStarted
  // (and the other way round) fails the test at once with its detail.
  // With `nth`, the nth such event.
  BackendEvent Await(Kind kind, const std::string& container_id,
                     std::chrono::milliseconds timeout = 10s, int nth = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    const BackendEvent* found = nullptr;
    cv_.wait_for(lock, timeout, [&] { return (found = Find(kind, container_id, nth)) != nullptr; });
    if (found == nullptr) {
      ADD_FAILURE() << "no event of kind " << static_cast<int>(kind) << " for " << container_id
                    << " within " << timeout.count() << " ms";
      return {};
    }
    return *found;
  }
  int Count(Kind kind, const std::string& container_id) {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(std::count_if(events_.begin(), events_.end(), [&](const auto& e) {
      return e.kind == kind && e.container_id == container_id;
    }));
  }

 private:
  const BackendEvent* Find(Kind kind, const std::string& container_id, int nth) const {
    for (const BackendEvent& e : events_) {
      if (e.container_id != container_id) continue;
      if (e.kind == kind && --nth == 0) return &e;
      if (kind == Kind::kStarted && e.kind == Kind::kStartFailed) {
        ADD_FAILURE() << container_id << " failed to start: " << e.detail;
        return &e;
      }
    }
    return nullptr;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<BackendEvent> events_;
};

spec::Assembly Parse(const std::string& json) {
  spec::ParseOptions o;
  o.user = "alice";
  spec::ParseResult r = spec::ParseAssemblyJson(nlohmann::json::parse(json), o);
  if (!r.ok()) {
    for (const auto& d : r.diagnostics) ADD_FAILURE() << d.path << ": " << d.message;
    return {};
  }
  return *r.assembly;
}

// ps x1 and worker x2 (a GPU each) form the gang; web x1 stands alone.
spec::Assembly Training(const std::string& name) {
  return Parse(R"({"name": ")" + name + R"(", "version": "1", "components": [
    {"name": "ps", "number_of_containers": 1, "launch_command": "sleep 60",
     "resource": {"cpus": 1, "memory": "256"},
     "configuration": {"properties": {"tarn.tf.role": "ps", "tarn.ports": "grpc:2222"}}},
    {"name": "worker", "number_of_containers": 2, "launch_command": "sleep 60",
     "resource": {"cpus": 1, "memory": "256", "additional": {"yarn.io/gpu": {"value": 1}}},
     "configuration": {"properties": {"tarn.tf.role": "worker", "tarn.ports": "grpc:2222"}}},
    {"name": "web", "number_of_containers": 1, "launch_command": "sleep 60",
     "resource": {"cpus": 1, "memory": "128"}}]})");
}

InstanceRef Ref(const std::string& assembly, const std::string& component, int64_t index) {
  return {"alice", assembly, component, component + "-" + std::to_string(index), index};
}

class LocalBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tarn-local-backend-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    backend_.reset();
    std::filesystem::remove_all(dir_);
  }

  LocalBackend::Options Options() {
    LocalBackend::Options o;
    o.nodes = {{"local", 4, 4096, {{0, "fake", 1024}, {1, "fake", 1024}}}};
    o.clock = &clock_;
    o.launch.state_dir = dir_;
    o.launch.bin_dir = "/opt/tarn/bin";
    o.run_as = runtime::RunAs{{"nobody", 65534, 65534}, false, "test"};
    o.runtime = &runtime_;
    o.events = events_.Sink();
    o.poll_interval = 5ms;
    return o;
  }
  LocalBackend& Make(LocalBackend::Options o) {
    auto b = LocalBackend::Create(std::move(o));
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
    return *backend_;
  }
  LocalBackend& Make() { return Make(Options()); }
  std::string Shim(const InstanceRef& r) {
    return dir_ + "/shims/alice/" + r.assembly + "/" + r.instance;
  }

  std::string dir_;
  FakeClock clock_;
  FakeRuntime runtime_;
  EventLog events_;
  std::unique_ptr<LocalBackend> backend_;
};

TEST_F(LocalBackendTest, CreateNeedsItsDependencies) {
  LocalBackend::Options o = Options();
  o.runtime = nullptr;
  EXPECT_EQ(LocalBackend::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = Options();
  o.events = nullptr;
  EXPECT_EQ(LocalBackend::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = Options();
  o.worker_threads = 0;
  EXPECT_EQ(LocalBackend::Create(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(ParseLoopbackRange, AcceptsLoopbackCidrsOnly) {
  auto r = ParseLoopbackRange("127.42.0.0/16");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, (127u << 24 | 42u << 16) + 2);  // .1 is the DNS server's
  EXPECT_EQ(r->second, (127u << 24 | 42u << 16 | 0xffffu) - 1);
  EXPECT_FALSE(ParseLoopbackRange("10.0.0.0/8").ok());
  EXPECT_FALSE(ParseLoopbackRange("127.42.0.0").ok());
  EXPECT_FALSE(ParseLoopbackRange("127.42.0.0/31").ok());
  EXPECT_FALSE(ParseLoopbackRange("127.42.0.0/x").ok());
  EXPECT_FALSE(ParseLoopbackRange("nonsense/16").ok());
}

TEST_F(LocalBackendTest, EachPlacedInstanceHoldsItsOwnAddress) {
  LocalBackend::Options o = Options();
  o.address_range = "127.42.0.0/24";
  LocalBackend& b = Make(o);
  spec::Assembly a = Training("net");
  std::vector<InstanceRef> gang = {Ref("net", "ps", 0), Ref("net", "worker", 0),
                                   Ref("net", "worker", 1)};
  ASSERT_TRUE(b.RequestPlacement(a, gang, true).ok());
  ASSERT_EQ(b.Place().size(), 3u);
  std::set<std::string> ips;
  for (const InstanceRef& r : gang) ips.insert(b.GetPlacement(r.Key()).placement.ip);
  EXPECT_EQ(ips, (std::set<std::string>{"127.42.0.2", "127.42.0.3", "127.42.0.4"}));
  const std::string freed = b.GetPlacement("alice/net/worker-0").placement.ip;
  b.ReleasePlacement("alice/net/worker-0");
  ASSERT_TRUE(b.RequestPlacement(a, {Ref("net", "worker", 0)}, false).ok());
  ASSERT_EQ(b.Place().size(), 1u);
  EXPECT_EQ(b.GetPlacement("alice/net/worker-0").placement.ip, freed) << "lowest free first";
  // After a server restart an instance keeps its address; a taken one is refused.
  b.ReleasePlacement("alice/net/ps-0");
  EXPECT_TRUE(b.RestorePlacement(a, Ref("net", "ps", 0), {"local", {}, "127.42.0.9"}).ok());
  EXPECT_EQ(b.GetPlacement("alice/net/ps-0").placement.ip, "127.42.0.9");
  const std::vector<int> gpus = b.GetPlacement("alice/net/worker-1").placement.gpus;
  b.ReleasePlacement("alice/net/worker-1");
  Status taken = b.RestorePlacement(a, Ref("net", "worker", 1), {"local", gpus, "127.42.0.9"});
  EXPECT_EQ(taken.code(), StatusCode::kFailedPrecondition) << taken.ToString();
  Status outside = b.RestorePlacement(a, Ref("net", "worker", 1), {"local", gpus, "127.43.0.9"});
  EXPECT_EQ(outside.code(), StatusCode::kFailedPrecondition) << outside.ToString();
}

TEST_F(LocalBackendTest, GangIsPlacedAllOrNothingAndWaitsForRelease) {
  LocalBackend& b = Make();
  spec::Assembly first = Training("first"), second = Training("second");
  std::vector<InstanceRef> gang1 = {Ref("first", "ps", 0), Ref("first", "worker", 0),
                                    Ref("first", "worker", 1)};
  ASSERT_TRUE(b.RequestPlacement(first, gang1, true).ok());
  std::vector<std::string> placed = b.Place();
  EXPECT_EQ(placed.size(), 3u);
  service::PlacementStatus w0 = b.GetPlacement("alice/first/worker-0");
  service::PlacementStatus w1 = b.GetPlacement("alice/first/worker-1");
  ASSERT_EQ(w0.phase, service::PlacementStatus::Phase::kPlaced);
  ASSERT_EQ(w1.phase, service::PlacementStatus::Phase::kPlaced);
  EXPECT_EQ(w0.placement.node, "local");
  ASSERT_EQ(w0.placement.gpus.size(), 1u);
  ASSERT_EQ(w1.placement.gpus.size(), 1u);
  EXPECT_NE(w0.placement.gpus[0], w1.placement.gpus[0]);
  EXPECT_TRUE(b.GetPlacement("alice/first/ps-0").placement.gpus.empty());

  // The second gang needs both GPUs: none of it is placed while the first holds them,
  // although its ps alone would fit.
  std::vector<InstanceRef> gang2 = {Ref("second", "ps", 0), Ref("second", "worker", 0),
                                    Ref("second", "worker", 1)};
  ASSERT_TRUE(b.RequestPlacement(second, gang2, true).ok());
  EXPECT_TRUE(b.Place().empty());
  for (const InstanceRef& r : gang2) {
    service::PlacementStatus st = b.GetPlacement(r.Key());
    EXPECT_EQ(st.phase, service::PlacementStatus::Phase::kPending) << r.Key();
    EXPECT_FALSE(st.reason.empty()) << r.Key();
  }
  EXPECT_EQ(b.Nodes()[0].free.gpus, 0);

  for (const InstanceRef& r : gang1) b.ReleasePlacement(r.Key());
  EXPECT_EQ(b.GetPlacement("alice/first/ps-0").phase, service::PlacementStatus::Phase::kUnknown);
  EXPECT_EQ(b.Place().size(), 3u);
  EXPECT_EQ(b.GetPlacement("alice/second/worker-1").phase,
            service::PlacementStatus::Phase::kPlaced);
  b.ReleasePlacement("alice/nobody/x-0");  // unknown keys are ignored
}

TEST_F(LocalBackendTest, SinglesInfeasibleRequestsAndRestoredPlacements) {
  LocalBackend& b = Make();
  spec::Assembly a = Training("t");
  spec::Assembly huge = Parse(R"({"name": "huge", "version": "1", "components": [
    {"name": "big", "number_of_containers": 1, "launch_command": "sleep 1",
     "resource": {"cpus": 64, "memory": "256"}}]})");
  ASSERT_TRUE(b.RequestPlacement(huge, {Ref("huge", "big", 0)}, false).ok());
  ASSERT_TRUE(b.RestorePlacement(a, Ref("t", "worker", 1), {"local", {1}, ""}).ok());
  ASSERT_TRUE(b.RequestPlacement(a, {Ref("t", "worker", 0), Ref("t", "web", 0)}, false).ok());
  EXPECT_EQ(b.Place().size(), 2u);
  EXPECT_EQ(b.GetPlacement("alice/t/worker-0").placement.gpus, std::vector<int>{0});
  service::PlacementStatus big = b.GetPlacement("alice/huge/big-0");
  EXPECT_EQ(big.phase, service::PlacementStatus::Phase::kInfeasible);
  EXPECT_FALSE(big.reason.empty());
  EXPECT_EQ(b.Nodes()[0].free.vcores, 1);
  // A component the assembly lacks is refused, and nothing of the request stays queued.
  EXPECT_EQ(b.RequestPlacement(a, {Ref("t", "ps", 0), Ref("t", "nope", 0)}, false).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(b.GetPlacement("alice/t/ps-0").phase, service::PlacementStatus::Phase::kUnknown);
  EXPECT_EQ(b.Queues()[0].config.name, "default");
}

TEST_F(LocalBackendTest, LaunchStartsTheInstancesContainer) {
  LocalBackend& b = Make();
  spec::Assembly a = Training("t");
  b.Launch(a, Ref("t", "worker", 1), {"local", {1}, ""}, "c1");
  BackendEvent e = events_.Await(Kind::kStarted, "c1");
  EXPECT_EQ(e.key, "alice/t/worker-1");
  EXPECT_EQ(e.ip, "127.0.0.1");
  runtime::ContainerSpec s = runtime_.last_spec();
  EXPECT_EQ(s.shim_dir, Shim(Ref("t", "worker", 1)));
  EXPECT_EQ(runtime::EnvValue(s, "TARN_CONTAINER_ID"), "c1");
  EXPECT_EQ(runtime::EnvValue(s, "TARN_IP"), "127.0.0.1");
  EXPECT_EQ(runtime::EnvValue(s, "CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(s.run_uid, 65534u);
  EXPECT_EQ(b.LogFile(Ref("t", "worker", 1), false), s.shim_dir + "/stdout.log");
  EXPECT_EQ(b.LogFile(Ref("t", "worker", 1), true), "");  // the fake writes no stderr
  EXPECT_EQ(b.SharedDir("alice", "t"), dir_ + "/shared/alice/t");

  runtime_.FailStarts(FailedPreconditionError("alice/t/web-0: cannot start: no such program"));
  b.Launch(a, Ref("t", "web", 0), {"local", {}, ""}, "c2");
  EXPECT_EQ(events_.Await(Kind::kStartFailed, "c2").detail,
            "alice/t/web-0: cannot start: no such program");
  b.Launch(a, Ref("t", "nope", 0), {"local", {}, ""}, "c3");
  EXPECT_NE(events_.Await(Kind::kStartFailed, "c3").detail.find("no component \"nope\""),
            std::string::npos);
}

TEST_F(LocalBackendTest, NeverTwoCopiesOfOneInstance) {
  LocalBackend& b = Make();
  spec::Assembly a = Training("t");
  InstanceRef web = Ref("t", "web", 0);
  b.Launch(a, web, {"local", {}, ""}, "c1");
  events_.Await(Kind::kStarted, "c1");
  b.Launch(a, web, {"local", {}, ""}, "c2");
  std::string why = events_.Await(Kind::kStartFailed, "c2").detail;
  EXPECT_NE(why.find("already runs as container c1"), std::string::npos) << why;
  EXPECT_NE(why.find("not starting a second copy"), std::string::npos) << why;
  EXPECT_EQ(runtime_.starts(), 1);

  // Once it has ended, a new start retires it, keeping its logs as the previous run's.
  runtime_.Exit(Shim(web), 1);
  b.Launch(a, web, {"local", {}, ""}, "c3");
  events_.Await(Kind::kStarted, "c3");
  EXPECT_EQ(events_.Await(Kind::kExited, "c1").exit.exit_code, 1);
  EXPECT_EQ(runtime_.starts(), 2);
  EXPECT_EQ(ReadAll(b.LogFile(web, false)), "run 2\n");
  EXPECT_EQ(ReadAll(b.PreviousLogFile(web, false)), "run 1\n");
  EXPECT_NE(ReadAll(Shim(web) + ".previous/exit.json").find("exited with code 1"),
            std::string::npos);
}

TEST_F(LocalBackendTest, ExitIsReportedExactlyOnce) {
  LocalBackend::Options o = Options();
  o.poll_interval = 0ms;  // the test runs the monitor
  LocalBackend& b = Make(o);
  spec::Assembly a = Training("t");
  InstanceRef web = Ref("t", "web", 0);
  b.Launch(a, web, {"local", {}, ""}, "c1");
  events_.Await(Kind::kStarted, "c1");
  b.CheckContainersForTest();
  EXPECT_EQ(events_.Count(Kind::kExited, "c1"), 0);
  runtime_.Exit(Shim(web), 3);
  b.CheckContainersForTest();
  b.CheckContainersForTest();
  b.Stop(web, "c1");  // already ended: nothing more to say
  b.Recover(a, web, "c1");
  b.Launch(a, web, {"local", {}, ""},
           "c2");  // runs after Stop and Recover (one instance, in order)
  events_.Await(Kind::kStarted, "c2");
  b.CheckContainersForTest();
  EXPECT_EQ(events_.Count(Kind::kExited, "c1"), 1);
  EXPECT_EQ(events_.Await(Kind::kExited, "c1").exit.diagnostics, "exited with code 3");
  EXPECT_EQ(events_.Count(Kind::kExited, "c2"), 0);
}

TEST_F(LocalBackendTest, ExitIsReportedOnceWhileStopsRaceTheMonitor) {
  LocalBackend::Options o = Options();
  o.poll_interval = 1ms;
  LocalBackend& b = Make(o);
  spec::Assembly a = Parse(R"({"name": "many", "version": "1", "components": [
    {"name": "w", "number_of_containers": 20, "launch_command": "sleep 60",
     "resource": {"cpus": 1, "memory": "16"}}]})");
  const int n = 20;
  for (int i = 0; i < n; ++i)
    b.Launch(a, Ref("many", "w", i), {"local", {}, ""}, "a" + std::to_string(i));
  for (int i = 0; i < n; ++i) events_.Await(Kind::kStarted, "a" + std::to_string(i));
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 0) runtime_.Exit(Shim(Ref("many", "w", i)), 0);
    b.Stop(Ref("many", "w", i), "a" + std::to_string(i));
    b.Stop(Ref("many", "w", i), "a" + std::to_string(i));
  }
  for (int i = 0; i < n; ++i) events_.Await(Kind::kExited, "a" + std::to_string(i));
  // A later start of each instance runs after its stops; then one more monitor pass.
  for (int i = 0; i < n; ++i)
    b.Launch(a, Ref("many", "w", i), {"local", {}, ""}, "b" + std::to_string(i));
  for (int i = 0; i < n; ++i) events_.Await(Kind::kStarted, "b" + std::to_string(i));
  b.CheckContainersForTest();
  for (int i = 0; i < n; ++i) EXPECT_EQ(events_.Count(Kind::kExited, "a" + std::to_string(i)), 1);
}

TEST_F(LocalBackendTest, StopReportsTheExit) {
  LocalBackend& b = Make();
  spec::Assembly a = Training("t");
  InstanceRef web = Ref("t", "web", 0);
  b.Launch(a, web, {"local", {}, ""}, "c1");
  b.Stop(web, "c1");  // right behind the launch: stops what it started
  EXPECT_EQ(events_.Await(Kind::kExited, "c1").exit.signal, SIGTERM);
  EXPECT_EQ(events_.Count(Kind::kStarted, "c1"), 1);

  // Never started (unknown id, or nothing there at all): ended at once, saying so.
  b.Stop(web, "c9");
  BackendEvent e = events_.Await(Kind::kExited, "c9");
  EXPECT_EQ(e.exit.diagnostics, "stopped before it started");
  EXPECT_EQ(e.exit.exit_code, -1);
  EXPECT_EQ(e.exit.finished_at_ms, clock_.WallMillis());
  b.Stop(Ref("t", "ps", 0), "c10");
  EXPECT_EQ(events_.Await(Kind::kExited, "c10").exit.diagnostics, "stopped before it started");
  EXPECT_EQ(runtime_.stops(), 1);
}

TEST_F(LocalBackendTest, RecoverFindsRunningExitedLostAndMissingContainers) {
  spec::Assembly a = Training("t");
  InstanceRef ps = Ref("t", "ps", 0), web = Ref("t", "web", 0), w0 = Ref("t", "worker", 0);
  {
    LocalBackend& b = Make();
    b.Launch(a, ps, {"local", {}, ""}, "c1");
    b.Launch(a, web, {"local", {}, ""}, "c2");
    b.Launch(a, w0, {"local", {0}, ""}, "c3");
    events_.Await(Kind::kStarted, "c1");
    events_.Await(Kind::kStarted, "c2");
    events_.Await(Kind::kStarted, "c3");
    backend_.reset();  // the server goes; its containers stay
  }
  EXPECT_EQ(runtime_.stops(), 0);
  runtime_.Exit(Shim(web), 7);
  ContainerState lost;
  lost.phase = ContainerState::Phase::kLost;
  lost.shim_pid = 1003;
  lost.diagnostics = "its shim (pid 1003) is gone without recording an exit status";
  runtime_.Put(Shim(w0), lost);
  ContainerState never;
  never.phase = ContainerState::Phase::kLost;
  never.diagnostics = "its shim never started";
  runtime_.Put(Shim(Ref("t", "worker", 1)), never);

  LocalBackend& b = Make();
  b.Recover(a, ps, "c1");
  b.Recover(a, web, "c2");
  b.Recover(a, w0, "c3");
  b.Recover(a, Ref("t", "worker", 1), "c4");
  b.Recover(a, Ref("t", "ps", 1), "c5");
  EXPECT_EQ(events_.Await(Kind::kStarted, "c1").ip, "127.0.0.1");
  EXPECT_EQ(events_.Await(Kind::kExited, "c2").exit.exit_code, 7);
  BackendEvent lost_exit = events_.Await(Kind::kExited, "c3");
  EXPECT_EQ(lost_exit.exit.exit_code, -1);
  EXPECT_EQ(lost_exit.exit.diagnostics,
            "lost: its shim (pid 1003) is gone without recording an exit status");
  EXPECT_EQ(events_.Await(Kind::kStartFailed, "c4").detail,
            "container c4 never started: its shim never started");
  EXPECT_NE(events_.Await(Kind::kStartFailed, "c5").detail.find("holds no container"),
            std::string::npos);

  // A start the directory does not hold (the server died between choosing an id and
  // starting it) never started.
  b.Recover(a, ps, "c6");
  std::string why = events_.Await(Kind::kStartFailed, "c6").detail;
  EXPECT_NE(why.find("holds container c1 (running"), std::string::npos) << why;

  EXPECT_EQ(runtime_.stops(), 0);

  // The recovered container is watched again.
  runtime_.Exit(Shim(ps), 0);
  EXPECT_EQ(events_.Await(Kind::kExited, "c1").exit.diagnostics, "exited with code 0");
  EXPECT_EQ(events_.Count(Kind::kExited, "c1"), 1);
}

TEST_F(LocalBackendTest, AStartStopsAnEarlierRunThatNothingTracks) {
  spec::Assembly a = Training("t");
  InstanceRef web = Ref("t", "web", 0);
  {
    LocalBackend& b = Make();
    b.Launch(a, web, {"local", {}, ""}, "c1");
    events_.Await(Kind::kStarted, "c1");
    backend_.reset();  // the server dies after recording c2 as web-0's next start
  }
  LocalBackend& b = Make();
  b.Recover(a, web, "c2");
  const std::string why = events_.Await(Kind::kStartFailed, "c2").detail;
  EXPECT_NE(why.find("holds container c1 (running"), std::string::npos) << why;
  EXPECT_EQ(runtime_.stops(), 0);
  // The restart of web-0 finds c1, which nothing tracks, running: it stops it and starts
  // (before, it refused every start as "a second copy", up to the failure threshold).
  b.Launch(a, web, {"local", {}, ""}, "c3");
  events_.Await(Kind::kStarted, "c3");
  EXPECT_EQ(runtime_.stops(), 1);
  EXPECT_EQ(runtime_.starts(), 2);
}

// A tiny HTTP server on 127.0.0.1 that answers 200 and remembers the request.
class HttpListener {
 public:
  HttpListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(fd_, 8);
    thread_ = std::thread([this] {
      while (true) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[2048];
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n > 0) {
          std::lock_guard<std::mutex> lock(mu_);
          request_.assign(buf, n);
        }
        const std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        ssize_t ignored = ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
        (void)ignored;
        ::close(c);
      }
    });
  }
  ~HttpListener() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  std::string request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return request_;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::string request_;
};

TEST_F(LocalBackendTest, ProbesSubstituteTheInstancesVariables) {
  LocalBackend& b = Make();
  spec::Assembly a = Training("t");
  HttpListener http;
  const std::string port = std::to_string(http.port());
  spec::ReadinessCheck check{spec::ReadinessType::kHttp,
                             {{"url", "http://${THIS_HOST}:" + port + "/ready"}}};
  b.Probe(a, Ref("t", "web", 0), "c1", check);
  BackendEvent e = events_.Await(Kind::kProbed, "c1");
  EXPECT_TRUE(e.ready) << e.detail;
  EXPECT_NE(http.request().find("Host: web-0.t.alice.tarn:" + port + "\r\n"), std::string::npos)
      << http.request();

  b.Probe(a, Ref("t", "web", 0), "c2", {spec::ReadinessType::kDefault, {}});
  EXPECT_TRUE(events_.Await(Kind::kProbed, "c2").ready);

  int closed = 0;
  {
    HttpListener gone;
    closed = gone.port();
  }
  b.Probe(a, Ref("t", "web", 0), "c3",
          {spec::ReadinessType::kPort, {{"port", std::to_string(closed)}}});
  BackendEvent refused = events_.Await(Kind::kProbed, "c3");
  EXPECT_FALSE(refused.ready);
  EXPECT_FALSE(refused.detail.empty());
}

TEST_F(LocalBackendTest, CleanupKeepsLogsUnlessToldAndDestroyRemovesAll) {
  LocalBackend& b = Make();
  spec::Assembly a = Training("t");
  InstanceRef web = Ref("t", "web", 0), ps = Ref("t", "ps", 0);
  b.Launch(a, web, {"local", {}, ""}, "c1");
  b.Launch(a, ps, {"local", {}, ""}, "c2");
  b.Cleanup(web, false);  // still running: left alone
  b.WaitForIdleForTest();
  const std::string work = dir_ + "/containers/alice/t/web-0";
  EXPECT_TRUE(Exists(work));
  EXPECT_TRUE(Exists(Shim(web) + "/stdout.log"));
  EXPECT_EQ(events_.Count(Kind::kExited, "c1"), 0);

  // Retired with its logs kept: they are what `logs` shows until the next start.
  runtime_.Exit(Shim(web), 0);
  b.Cleanup(web, false);
  b.Stop(web, "c1");  // after the cleanup, which reported the exit: nothing more
  b.WaitForIdleForTest();
  EXPECT_EQ(events_.Await(Kind::kExited, "c1").exit.diagnostics, "exited with code 0");
  EXPECT_EQ(events_.Count(Kind::kExited, "c1"), 1);
  EXPECT_FALSE(Exists(Shim(web)));
  EXPECT_EQ(b.LogFile(web, false), Shim(web) + ".previous/stdout.log");
  EXPECT_EQ(ReadAll(b.LogFile(web, false)), "run 1\n");
  EXPECT_TRUE(Exists(work));

  // Flexed down: nothing of it stays.
  b.Cleanup(web, true);
  b.WaitForIdleForTest();
  EXPECT_FALSE(Exists(Shim(web) + ".previous"));
  EXPECT_FALSE(Exists(work));
  EXPECT_EQ(b.LogFile(web, false), "");

  // Destroyed: the shared directory and every other trace go.
  ASSERT_TRUE(MakeDirectories(b.SharedDir("alice", "t") + "/models").ok());
  b.Stop(ps, "c2");
  events_.Await(Kind::kExited, "c2");
  b.DestroyAssembly("alice", "t");
  b.WaitForIdleForTest();
  EXPECT_FALSE(Exists(b.SharedDir("alice", "t")));
  EXPECT_FALSE(Exists(dir_ + "/shims/alice/t"));
  EXPECT_FALSE(Exists(dir_ + "/containers/alice/t"));
}

TEST_F(LocalBackendTest, DestroyLeavesTheDirectoriesOfARunningContainer) {
  LocalBackend& b = Make();
  spec::Assembly a = Training("t");
  InstanceRef web = Ref("t", "web", 0), ps = Ref("t", "ps", 0);
  b.Launch(a, web, {"local", {}, ""}, "c1");
  b.Launch(a, ps, {"local", {}, ""}, "c2");
  b.WaitForIdleForTest();
  runtime_.Exit(Shim(ps), 0);
  b.DestroyAssembly("alice", "t");
  b.WaitForIdleForTest();
  EXPECT_EQ(events_.Await(Kind::kExited, "c2").exit.exit_code, 0);
  EXPECT_TRUE(Exists(Shim(web) + "/spec.json"));
  EXPECT_TRUE(Exists(dir_ + "/containers/alice/t/web-0"));
  EXPECT_FALSE(Exists(Shim(ps)));
  EXPECT_FALSE(Exists(dir_ + "/containers/alice/t/ps-0"));
}

// ---- The real runtime: tarn-shim, namespaces, cgroups (root) ----

class LocalBackendAsRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: namespaces and cgroups";
    char tmpl[] = "/tmp/tarn-local-backend-root-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0755);  // the containers' user must reach its work directory
    // A name of this process's own: cgroups are named after it.
    name_ = "lb" + std::to_string(::getpid());
  }
  void TearDown() override {
    backend_.reset();
    if (dir_.empty()) return;
    // Containers outlive the backend: stop whatever a failed test left running.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/shims/alice/" + name_, ec)) {
      if (runtime_.Stop(e.path()).ok()) (void)runtime_.Wait(e.path(), 10s);
    }
    std::filesystem::remove_all(dir_);
  }

  LocalBackend& Make() {
    LocalBackend::Options o;
    o.nodes = {{"local", 2, 1024, {}}};
    o.clock = &clock_;
    o.launch.state_dir = dir_;
    o.launch.stop_grace_ms = 2000;
    o.runtime = &runtime_;
    o.events = events_.Sink();
    o.poll_interval = 10ms;
    auto b = LocalBackend::Create(std::move(o));
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
    return *backend_;
  }
  // sleeper: sleeps; failer: exits 3; listener: accepts on $TARN_IP:<port>.
  spec::Assembly Assembly(int port) {
    const std::string p = std::to_string(port);
    return Parse(R"({"name": ")" + name_ + R"(", "version": "1", "components": [
      {"name": "sleeper", "number_of_containers": 1, "launch_command": "sleep 60",
       "resource": {"cpus": 1, "memory": "64"}},
      {"name": "failer", "number_of_containers": 1, "launch_command": "echo bye >&2; exit 3",
       "resource": {"cpus": 1, "memory": "64"}},
      {"name": "listener", "number_of_containers": 1,
       "launch_command": "exec /usr/bin/python3 -c \"import os, socket, time; s = socket.socket(); s.bind((os.environ['TARN_IP'], )" +
                 p + R"()); s.listen(); time.sleep(60)\"",
       "resource": {"cpus": 1, "memory": "128"},
       "readiness_check": {"type": "PORT", "properties": {"port": ")" +
                 p + R"("}}}]})");
  }
  InstanceRef Ref(const std::string& component) {
    return {"alice", name_, component, component + "-0", 0};
  }

  std::string dir_, name_;
  FakeClock clock_;
  runtime::ShimRuntime runtime_{{TARN_SHIM_BINARY}};
  EventLog events_;
  std::unique_ptr<LocalBackend> backend_;
};

TEST_F(LocalBackendAsRoot, StartsReportsExitsAndStops) {
  LocalBackend& b = Make();
  spec::Assembly a = Assembly(1);
  b.Launch(a, Ref("failer"), {"local", {}, ""}, "f1");
  b.Launch(a, Ref("sleeper"), {"local", {}, ""}, "s1");
  EXPECT_EQ(events_.Await(Kind::kStarted, "f1").ip, "127.0.0.1");
  BackendEvent exited = events_.Await(Kind::kExited, "f1");
  EXPECT_EQ(exited.exit.exit_code, 3);
  EXPECT_EQ(exited.exit.diagnostics, "exited with code 3");
  EXPECT_EQ(ReadAll(b.LogFile(Ref("failer"), true)), "bye\n");

  events_.Await(Kind::kStarted, "s1");
  b.Launch(a, Ref("sleeper"), {"local", {}, ""}, "s2");  // never a second copy
  EXPECT_NE(events_.Await(Kind::kStartFailed, "s2").detail.find("already runs"), std::string::npos);
  b.Stop(Ref("sleeper"), "s1");
  BackendEvent stopped = events_.Await(Kind::kExited, "s1");
  EXPECT_EQ(stopped.exit.signal, SIGTERM) << stopped.exit.diagnostics;

  // A restart keeps the earlier run's logs as the previous ones.
  b.Launch(a, Ref("failer"), {"local", {}, ""}, "f2");
  events_.Await(Kind::kExited, "f2");
  EXPECT_EQ(ReadAll(b.PreviousLogFile(Ref("failer"), true)), "bye\n");
  EXPECT_EQ(events_.Count(Kind::kExited, "f1"), 1);
}

TEST_F(LocalBackendAsRoot, RecoversARunningContainerAfterARestart) {
  spec::Assembly a = Assembly(1);
  Make().Launch(a, Ref("sleeper"), {"local", {}, ""}, "s1");
  events_.Await(Kind::kStarted, "s1");
  backend_.reset();  // the server goes; the container stays

  LocalBackend& b = Make();
  b.Recover(a, Ref("sleeper"), "s0");
  EXPECT_NE(events_.Await(Kind::kStartFailed, "s0").detail.find("holds container s1"),
            std::string::npos);
  b.Recover(a, Ref("sleeper"), "s1");
  EXPECT_EQ(events_.Await(Kind::kStarted, "s1", 10s, 2).ip, "127.0.0.1");
  b.Stop(Ref("sleeper"), "s1");
  EXPECT_EQ(events_.Await(Kind::kExited, "s1").exit.signal, SIGTERM);
}

TEST_F(LocalBackendAsRoot, PortProbeTurnsReadyOnceTheInstanceListens) {
  // A free port: bound, read and let go.
  int port = 0;
  {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    ::close(fd);
  }
  LocalBackend& b = Make();
  spec::Assembly a = Assembly(port);
  const spec::ReadinessCheck check = *a.components[2].readiness_check;
  b.Launch(a, Ref("listener"), {"local", {}, ""}, "l1");
  events_.Await(Kind::kStarted, "l1");
  // Probe as the service does, every 20 ms until ready (python needs a moment to bind).
  BackendEvent probed;
  for (int i = 1; i <= 250 && !probed.ready; ++i) {
    if (i > 1) std::this_thread::sleep_for(20ms);
    b.Probe(a, Ref("listener"), "l1", check);
    probed = events_.Await(Kind::kProbed, "l1", 10s, i);
  }
  const bool ready = probed.ready;
  const std::string detail = probed.detail;
  EXPECT_TRUE(ready) << detail;
  EXPECT_EQ(detail, "port " + std::to_string(port) + " accepts connections");
  b.Stop(Ref("listener"), "l1");
  events_.Await(Kind::kExited, "l1");
}

}  // namespace
}  // namespace tarn::backend
