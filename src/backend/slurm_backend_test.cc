// SlurmBackend against a fake Slurm (Options::run_command): what it submits, and how the
// poller turns squeue's answers into events (once each), adopts jobs after a restart and
// never submits for them. tests/slurm_backend_test.cc runs the same against a real Slurm.
#include "backend/slurm_backend.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "common/file.h"
#include "spec/parser.h"

namespace tarn::backend {
namespace {

using json = nlohmann::json;
using service::BackendEvent;
using service::InstanceRef;

// The Slurm command of a command line: after `env SLURM_CONF=...` (and a setpriv before it).
std::string CommandOf(const std::vector<std::string>& argv) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i].rfind("SLURM_CONF=", 0) == 0) return argv[i + 1];
  }
  return "";
}

// A Slurm controller in memory: sinfo, squeue, sbatch (and --test-only), scancel.
class FakeSlurm {
 public:
  struct Job {
    std::string name, state = "PENDING", reason = "None";
    int64_t exit_code = 0;
  };

  StatusOr<CommandResult> Run(const std::vector<std::string>& full) {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(full);
    std::vector<std::string> argv = full;  // without setpriv ... env SLURM_CONF=...
    auto conf = std::find_if(argv.begin(), argv.end(),
                             [](const std::string& a) { return a.rfind("SLURM_CONF=", 0) == 0; });
    if (conf != argv.end()) argv.erase(argv.begin(), conf + 1);
    CommandResult r;
    r.exit_code = 0;
    if (argv[0] == "sinfo") {
      r.out = R"({"errors": [], "nodes": [
          {"name": "node1", "address": "127.0.1.1", "cpus": 4, "real_memory": 4096,
           "gres": "gpu:2", "partitions": ["main"]},
          {"name": "node2", "address": "127.0.1.2", "cpus": 4, "real_memory": 4096,
           "gres": "gpu:2", "partitions": ["main"]}]})";
    } else if (argv[0] == "squeue") {
      if (down) {
        r.exit_code = 1;
        r.err = "squeue: error: Unable to contact slurm controller (connect failure)\n";
        return r;
      }
      json jobs = json::array();
      for (const auto& [id, j] : jobs_) {
        jobs.push_back({{"job_id", id},
                        {"name", j.name},
                        {"job_state", j.state},
                        {"state_reason", j.reason},
                        {"exit_code", j.exit_code},
                        {"derived_exit_code", 0}});
      }
      r.out = json{{"errors", json::array()}, {"jobs", jobs}}.dump();
    } else if (argv[0] == "sbatch" && argv[1] == "--test-only") {
      r.exit_code = 1;
      r.err = "allocation failure: Requested node configuration is not available\n";
    } else if (argv[0] == "sbatch") {
      Job j;
      for (const std::string& a : argv) {
        if (a.rfind("--job-name=", 0) == 0) j.name = a.substr(11);
      }
      jobs_[next_id_] = j;
      r.out = std::to_string(next_id_++) + "\n";
    } else if (argv[0] == "scontrol" && argv.size() == 3 && argv[1] == "show" &&
               argv[2] == "config") {
      r.out = "AuthType                = auth/none\n";
      if (!jobcomp_file.empty()) {
        r.out += "JobCompLoc              = " + jobcomp_file +
                 "\nJobCompType             = jobcomp/filetxt\n";
      }
    } else if (argv[0] == "scancel") {
      for (auto& [id, j] : jobs_) {
        if (std::to_string(id) == argv[1] || "--name=" + j.name == argv[1]) {
          j.state = "CANCELLED";
          j.exit_code = 15;
        }
      }
    }
    return r;
  }

  void Set(int64_t id, Job j) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[id] = std::move(j);
  }
  void Remove(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.erase(id);
  }
  void SetState(int64_t id, const std::string& state, int64_t exit_code = 0,
                const std::string& reason = "None") {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[id].state = state;
    jobs_[id].exit_code = exit_code;
    jobs_[id].reason = reason;
  }
  // The commands run so far whose Slurm command is `name`.
  std::vector<std::vector<std::string>> Commands(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::vector<std::string>> out;
    for (const auto& c : commands_) {
      if (CommandOf(c) == name) out.push_back(c);
    }
    return out;
  }

  bool down = false;         // squeue fails, as with the controller down
  std::string jobcomp_file;  // `scontrol show config` names it (read when a backend starts)

 private:
  std::mutex mu_;
  std::map<int64_t, Job> jobs_;
  int64_t next_id_ = 100;
  std::vector<std::vector<std::string>> commands_;
};

// alice's account: what a tenant's job runs as, and submits as, under a root server.
constexpr uid_t kAliceUid = 4242;
constexpr gid_t kAliceGid = 4343;

class FakeSlurmBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("slurm_backend_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    spec::ParseOptions po;
    po.user = "alice";
    spec::ParseResult r = spec::ParseAssemblyJson(
        json::parse(R"({"name": "a", "version": "1", "components": [{"name": "w",
          "number_of_containers": 3, "launch_command": "sleep 100",
          "resource": {"cpus": 2, "memory": "128"}}]})"),
        po);
    ASSERT_TRUE(r.ok());
    assembly_ = *r.assembly;
    backend_ = NewBackend();
    ASSERT_NE(backend_, nullptr);
  }
  void TearDown() override {
    backend_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<SlurmBackend> NewBackend(
      const std::function<void(SlurmBackend::Options&)>& configure = {}) {
    SlurmBackend::Options o;
    o.slurm_conf = "/fake/slurm.conf";
    o.shared_dir = dir_.string();
    o.poll_interval = std::chrono::milliseconds(0);  // the test polls
    o.bin_dir = "/opt/tarn/bin";
    o.clock = &clock_;
    o.events = [this](BackendEvent e) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
    };
    o.run_command = [this](const std::vector<std::string>& argv, std::chrono::milliseconds) {
      return slurm_.Run(argv);
    };
    o.accounts = [](const std::string& name) -> std::optional<runtime::Account> {
      if (name != "alice") return std::nullopt;
      return runtime::Account{"alice", kAliceUid, kAliceGid};
    };
    if (configure) configure(o);
    auto b = SlurmBackend::Create(std::move(o));
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(b).value() : nullptr;
  }

  InstanceRef Ref(int index) {
    InstanceRef r;
    r.user = "alice";
    r.assembly = "a";
    r.component = "w";
    r.index = index;
    r.instance = "w-" + std::to_string(index);
    return r;
  }
  // The events so far, then forgets them.
  std::vector<BackendEvent> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(events_, {});
  }
  void ReportAddress(int index, const std::string& line) {
    const std::filesystem::path inst = dir_ / "alice/a" / ("w-" + std::to_string(index));
    std::filesystem::create_directories(inst);
    ASSERT_TRUE(runtime::WriteFileAtomically((inst / "address").string(), line).ok());
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  FakeSlurm slurm_;
  spec::Assembly assembly_;
  std::mutex mu_;
  std::vector<BackendEvent> events_;
  std::unique_ptr<SlurmBackend> backend_;
};

TEST_F(FakeSlurmBackendTest, LaunchSubmitsAndThePollerReportsEachStepOnce) {
  ASSERT_TRUE(backend_->RequestPlacement(assembly_, {Ref(0)}, false).ok());
  EXPECT_EQ(backend_->Place(), std::vector<std::string>{"alice/a/w-0"});
  service::PlacementStatus ps = backend_->GetPlacement("alice/a/w-0");
  EXPECT_EQ(ps.phase, service::PlacementStatus::Phase::kPlaced);
  EXPECT_EQ(ps.placement, service::Placement{});  // node and address come with kStarted

  backend_->Launch(assembly_, Ref(0), {}, "alice_a_w-0_1");
  backend_->WaitForIdleForTest();
  auto sbatch = slurm_.Commands("sbatch");
  ASSERT_EQ(sbatch.size(), 1u);
  const std::string inst = (dir_ / "alice/a/w-0").string();
  std::vector<std::string> submit;  // a root server submits as alice; another, as itself
  if (::geteuid() == 0) {
    submit = {"setpriv", "--reuid=" + std::to_string(kAliceUid),
              "--regid=" + std::to_string(kAliceGid), "--init-groups"};
  }
  submit.insert(submit.end(), {"env", "SLURM_CONF=/fake/slurm.conf", "sbatch", "--parsable",
                               "--no-requeue", "--job-name=tarn.alice.a.w-0.1", "--cpus-per-task=2",
                               "--mem=128M", "--chdir=" + inst, "-o", inst + "/stdout.log", "-e",
                               inst + "/stderr.log", inst + "/job.sh"});
  EXPECT_EQ(sbatch[0], submit);
  // The job's directories are alice's alone; the job script is the server's.
  struct stat st {};
  for (const std::string& d : {inst, dir_.string() + "/.tarn/shared/alice/a"}) {
    ASSERT_EQ(::stat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_mode & 0777, 0750u) << d;
    if (::geteuid() == 0) {
      EXPECT_EQ(st.st_uid, kAliceUid) << d;
    }
  }
  ASSERT_EQ(::stat((inst + "/job.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_NE(ReadFileToString(inst + "/job.sh").value_or("").find("tarn-shim' --foreground"),
            std::string::npos);
  const std::string spec = ReadFileToString(inst + "/spec.json").value_or("");
  EXPECT_NE(spec.find("TARN_SHARED_DIR=" + dir_.string() + "/.tarn/shared/alice/a"),
            std::string::npos);
  EXPECT_TRUE(Take().empty());

  backend_->PollForTest();
  auto events = Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, BackendEvent::Kind::kWaiting);
  EXPECT_EQ(events[0].detail, "Slurm: PENDING");
  slurm_.Set(100, {"tarn.alice.a.w-0.1", "PENDING", "Resources", 0});
  backend_->PollForTest();
  events = Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].detail, "Slurm: PENDING (Resources)");
  backend_->PollForTest();
  EXPECT_TRUE(Take().empty()) << "the same reason is said once";

  // Running, but no address reported yet (or an older job's): not started.
  slurm_.SetState(100, "RUNNING");
  ReportAddress(0, "127.0.1.1 node1 99\n");
  backend_->PollForTest();
  EXPECT_TRUE(Take().empty());
  ReportAddress(0, "127.0.1.2 node2 100\n");
  backend_->PollForTest();
  backend_->PollForTest();
  events = Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, BackendEvent::Kind::kStarted);
  EXPECT_EQ(events[0].container_id, "alice_a_w-0_1");
  EXPECT_EQ(events[0].ip, "127.0.1.2");
  EXPECT_EQ(events[0].node, "node2");

  slurm_.SetState(100, "FAILED", 768, "NonZeroExitCode");
  backend_->PollForTest();
  backend_->PollForTest();
  events = Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, BackendEvent::Kind::kExited);
  EXPECT_EQ(events[0].exit.exit_code, 3);
  EXPECT_EQ(events[0].exit.diagnostics, "Slurm: FAILED (NonZeroExitCode), exited with code 3");
  EXPECT_EQ(backend_->LogFile(Ref(0), false), "");  // the fake job wrote no output
}

// Instances share their node's address on Slurm: each gets numbers of its own for its
// declared ports before it is submitted, and TF_CONFIG names every member with its numbers.
TEST_F(FakeSlurmBackendTest, PortsAreAssignedBeforeSubmitAndKeptAcrossAServerRestart) {
  spec::ParseOptions po;
  po.user = "alice";
  spec::ParseResult r = spec::ParseAssemblyJson(json::parse(R"({"name": "t", "version": "1",
      "components": [
        {"name": "ps", "number_of_containers": 2, "launch_command": "sleep 100",
         "resource": {"cpus": 1, "memory": "128"},
         "configuration": {"properties": {"tarn.tf.role": "ps", "tarn.ports": "grpc:2222"}}},
        {"name": "worker", "number_of_containers": 2, "launch_command": "sleep 100",
         "dependencies": ["ps"], "resource": {"cpus": 1, "memory": "128"},
         "configuration": {"properties": {"tarn.tf.role": "worker",
                                          "tarn.ports": "grpc:2222,metrics:9100"}}}]})"),
                                                po);
  ASSERT_TRUE(r.ok());
  const spec::Assembly tf = *r.assembly;
  InstanceRef w1{"alice", "t", "worker", "worker-1", 1};
  backend_->Launch(tf, w1, {}, "alice_t_worker-1_1");
  backend_->WaitForIdleForTest();
  ASSERT_EQ(slurm_.Commands("sbatch").size(), 1u);
  json spec =
      json::parse(ReadFileToString((dir_ / "alice/t/worker-1/spec.json").string()).value_or("{}"));
  std::map<std::string, std::string> env;
  for (const auto& kv : spec["env"]) {
    const std::string s = kv.get<std::string>();
    env[s.substr(0, s.find('='))] = s.substr(s.find('=') + 1);
  }
  json tf_config = json::parse(env["TF_CONFIG"]);
  std::set<int> numbers;
  std::map<std::string, int> by_instance;
  for (const char* job : {"ps", "worker"}) {
    ASSERT_EQ(tf_config["cluster"][job].size(), 2u) << env["TF_CONFIG"];
    for (int i = 0; i < 2; ++i) {
      const std::string entry = tf_config["cluster"][job][i].get<std::string>();
      const std::string host = std::string(job) + "-" + std::to_string(i) + ".t.alice.tarn:";
      ASSERT_EQ(entry.rfind(host, 0), 0u) << entry;
      const int port = std::stoi(entry.substr(host.size()));
      EXPECT_GE(port, 20000);
      EXPECT_LE(port, 29999);
      numbers.insert(port);
      by_instance[std::string(job) + "-" + std::to_string(i)] = port;
    }
  }
  EXPECT_EQ(numbers.size(), 4u) << env["TF_CONFIG"];
  EXPECT_EQ(env["TARN_PORT_GRPC"], std::to_string(by_instance["worker-1"]));
  EXPECT_NE(env["TARN_PORT_METRICS"], env["TARN_PORT_GRPC"]);
  EXPECT_FALSE(numbers.count(std::stoi(env["TARN_PORT_METRICS"])));

  // What the registry and `tarn status` show is what the instances were given.
  InstanceRef p0{"alice", "t", "ps", "ps-0", 0};
  auto ports = backend_->InstancePorts(p0, tf.components[0]);
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0], (spec::NamedPort{"grpc", by_instance["ps-0"]}));

  // A restarted server hands out the same numbers, and new ones around them.
  backend_.reset();
  backend_ = NewBackend();
  ASSERT_NE(backend_, nullptr);
  EXPECT_EQ(backend_->InstancePorts(p0, tf.components[0]), ports);
  InstanceRef w2{"alice", "t", "worker", "worker-2", 2};
  for (const spec::NamedPort& p : backend_->InstancePorts(w2, tf.components[1])) {
    EXPECT_FALSE(numbers.count(p.port)) << p.name;
    EXPECT_NE(std::to_string(p.port), env["TARN_PORT_METRICS"]);
  }
}

TEST_F(FakeSlurmBackendTest, StopCancelsAndTheEndComesFromSqueue) {
  backend_->Launch(assembly_, Ref(0), {}, "alice_a_w-0_1");
  backend_->Stop(Ref(0), "alice_a_w-0_1");
  backend_->WaitForIdleForTest();
  auto scancel = slurm_.Commands("scancel");
  ASSERT_EQ(scancel.size(), 1u);
  EXPECT_EQ(scancel[0].back(), "100");
  EXPECT_TRUE(Take().empty()) << "the end is squeue's to tell";
  backend_->PollForTest();
  auto events = Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, BackendEvent::Kind::kExited);
  EXPECT_EQ(events[0].exit.signal, 15);
  EXPECT_EQ(events[0].exit.diagnostics, "Slurm: CANCELLED");
  // A start that was never submitted ends at once.
  backend_->Stop(Ref(1), "alice_a_w-1_1");
  backend_->WaitForIdleForTest();
  events = Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].exit.diagnostics, "stopped before it started");
}

// tarn's priority as Slurm's: nice = the queue's max-application-priority less the
// assembly's priority, and a QOS by priority; the configured queue's caps apply to its
// partition. A job Slurm preempts ends PREEMPTED, which the event says.
TEST_F(FakeSlurmBackendTest, PriorityIsNiceAndAQosAndSlurmsPreemptionIsSaid) {
  backend_ = NewBackend([](SlurmBackend::Options& o) {
    scheduler::QueueConfig q;
    q.name = "default";
    q.default_priority = 2;
    q.max_priority = 10;
    o.queues = {q};
    o.qos = "normal";
    o.priority_qos = {{5, "urgent"}, {9, "top"}};
  });
  ASSERT_NE(backend_, nullptr);
  std::map<std::string, int> caps;
  for (const scheduler::QueueUsage& q : backend_->Queues())
    caps[q.config.name] = q.config.max_priority;
  EXPECT_EQ(caps, (std::map<std::string, int>{{"default", 10}, {"main", 0}}));

  spec::ParseOptions po;
  po.user = "alice";
  spec::ParseResult r = spec::ParseAssemblyJson(json::parse(R"({"name": "a", "version": "1",
        "configuration": {"properties": {"tarn.priority": "7"}},
        "components": [{"name": "w", "number_of_containers": 1, "launch_command": "sleep 100",
          "resource": {"cpus": 1, "memory": "64"}}]})"),
                                                po);
  ASSERT_TRUE(r.ok());
  backend_->Launch(*r.assembly, Ref(0), {}, "alice_a_w-0_1");
  backend_->Launch(assembly_, Ref(1), {}, "alice_a_w-1_1");  // the queue's default, 2
  backend_->WaitForIdleForTest();
  auto sbatch = slurm_.Commands("sbatch");
  ASSERT_EQ(sbatch.size(), 2u);
  auto has = [](const std::vector<std::string>& argv, const std::string& option) {
    return std::find(argv.begin(), argv.end(), option) != argv.end();
  };
  EXPECT_TRUE(has(sbatch[0], "--nice=3")) << testing::PrintToString(sbatch[0]);
  EXPECT_TRUE(has(sbatch[0], "--qos=urgent")) << testing::PrintToString(sbatch[0]);
  EXPECT_TRUE(has(sbatch[1], "--nice=8")) << testing::PrintToString(sbatch[1]);
  EXPECT_TRUE(has(sbatch[1], "--qos=normal")) << testing::PrintToString(sbatch[1]);

  slurm_.SetState(100, "PREEMPTED", 15, "None");
  slurm_.SetState(101, "CANCELLED", 15, "None");
  backend_->PollForTest();
  std::map<std::string, bool> preempted;
  for (const BackendEvent& e : Take()) {
    if (e.kind == BackendEvent::Kind::kExited) preempted[e.key] = e.preempted;
  }
  EXPECT_EQ(preempted,
            (std::map<std::string, bool>{{"alice/a/w-0", true}, {"alice/a/w-1", false}}));
}

// After a server restart: a job found by name is adopted (nothing submitted), even when the
// controller did not answer at first; none is kStartFailed; one recorded but forgotten by
// squeue is an exit that says it was lost; one that vanishes while watched is lost too.
TEST_F(FakeSlurmBackendTest, RecoverAdoptsJobsAndNeverSubmits) {
  slurm_.Set(200, {"tarn.alice.a.w-0.3", "RUNNING", "None", 0});
  std::filesystem::create_directories(dir_ / "alice/a/.jobs");
  ASSERT_TRUE(
      runtime::WriteFileAtomically((dir_ / "alice/a/.jobs/w-2").string(), "300 alice_a_w-2_1\n")
          .ok());
  slurm_.down = true;
  backend_->Recover(assembly_, Ref(0), "alice_a_w-0_3");
  backend_->Recover(assembly_, Ref(1), "alice_a_w-1_1");
  backend_->Recover(assembly_, Ref(2), "alice_a_w-2_1");
  backend_->WaitForIdleForTest();
  backend_->PollForTest();
  EXPECT_TRUE(Take().empty()) << "no answer from Slurm: nothing can be told yet";

  slurm_.down = false;
  ReportAddress(0, "127.0.1.1 node1 200\n");
  backend_->PollForTest();
  std::map<std::string, BackendEvent> by_key;
  for (BackendEvent& e : Take()) by_key[e.key] = std::move(e);
  ASSERT_EQ(by_key.size(), 3u);
  EXPECT_EQ(by_key["alice/a/w-0"].kind, BackendEvent::Kind::kStarted);
  EXPECT_EQ(by_key["alice/a/w-0"].ip, "127.0.1.1");
  EXPECT_EQ(by_key["alice/a/w-1"].kind, BackendEvent::Kind::kStartFailed);
  EXPECT_EQ(by_key["alice/a/w-1"].detail,
            "container alice_a_w-1_1 never started: Slurm has no job tarn.alice.a.w-1.1");
  EXPECT_EQ(by_key["alice/a/w-2"].kind, BackendEvent::Kind::kExited);
  EXPECT_EQ(by_key["alice/a/w-2"].exit.diagnostics,
            "lost: Slurm job 300 ended while tarn server was down; how it ended is unknown");
  EXPECT_TRUE(slurm_.Commands("sbatch").empty());

  // A second Launch of a watched instance is refused: never two copies.
  backend_->Launch(assembly_, Ref(0), {}, "alice_a_w-0_4");
  backend_->WaitForIdleForTest();
  auto events = Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, BackendEvent::Kind::kStartFailed);
  EXPECT_TRUE(slurm_.Commands("sbatch").empty());

  // The job vanishes from squeue with no end state seen: lost after a few passes.
  slurm_.Remove(200);
  backend_->PollForTest();
  backend_->PollForTest();
  EXPECT_TRUE(Take().empty()) << "one or two passes may miss a job";
  backend_->PollForTest();
  events = Take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, BackendEvent::Kind::kExited);
  EXPECT_EQ(events[0].exit.diagnostics,
            "lost: Slurm no longer lists job 200 and no end state of it was seen");
}

// A job that ended while tarn server was down and that squeue has forgotten: its end comes
// from Slurm's job completion log, else from the shim's exit.json, and only else is "lost".
TEST_F(FakeSlurmBackendTest, JobsThatEndedWhileTheServerWasDownTellHowTheyEnded) {
  const std::string jobcomp = (dir_ / "jobcomp.txt").string();
  std::ofstream(jobcomp)
      << "JobId=300 UserId=root(0) GroupId=root(0) Name=tarn.alice.a.w-0.1 JobState=FAILED "
         "Partition=main TimeLimit=525600 StartTime=2026-11-30T15:22:46 "
         "EndTime=2026-11-30T15:22:47 NodeList=node1 NodeCnt=1 DerivedExitCode=0:0 "
         "ExitCode=3:0 \n";
  slurm_.jobcomp_file = jobcomp;
  backend_.reset();
  backend_ = NewBackend();  // reads where the log is at start
  ASSERT_NE(backend_, nullptr);
  std::filesystem::create_directories(dir_ / "alice/a/.jobs");
  for (int i : {0, 1, 2}) {
    std::filesystem::create_directories(dir_ / "alice/a" / ("w-" + std::to_string(i)));
    ASSERT_TRUE(runtime::WriteFileAtomically(
                    (dir_ / "alice/a/.jobs" / ("w-" + std::to_string(i))).string(),
                    std::to_string(300 + i) + " alice_a_w-" + std::to_string(i) + "_1\n")
                    .ok());
  }
  runtime::ExitInfo shim_exit;
  shim_exit.exit_code = 7;
  shim_exit.finished_at_ms = 1234;
  ASSERT_TRUE(runtime::WriteFileAtomically((dir_ / "alice/a/w-1/exit.json").string(),
                                           runtime::ToJson(shim_exit).dump())
                  .ok());
  for (int i : {0, 1, 2}) {
    backend_->Recover(assembly_, Ref(i), "alice_a_w-" + std::to_string(i) + "_1");
  }
  backend_->WaitForIdleForTest();
  backend_->PollForTest();
  std::map<std::string, BackendEvent> by_key;
  for (BackendEvent& e : Take()) by_key[e.key] = std::move(e);
  ASSERT_EQ(by_key.size(), 3u);
  for (const auto& [key, e] : by_key) EXPECT_EQ(e.kind, BackendEvent::Kind::kExited) << key;
  const runtime::ExitInfo& from_log = by_key["alice/a/w-0"].exit;
  EXPECT_EQ(from_log.exit_code, 3);
  EXPECT_EQ(from_log.diagnostics,
            "Slurm: FAILED, exited with code 3 (Slurm job 300, from Slurm's job completion log)");
  EXPECT_GT(from_log.finished_at_ms, 0);
  const runtime::ExitInfo& from_shim = by_key["alice/a/w-1"].exit;
  EXPECT_EQ(from_shim.exit_code, 7);
  EXPECT_EQ(from_shim.finished_at_ms, 1234);
  EXPECT_EQ(from_shim.diagnostics,
            "exited with code 7 (Slurm job 301 is gone from squeue; this is what the "
            "instance's shim recorded)");
  EXPECT_EQ(by_key["alice/a/w-2"].exit.diagnostics,
            "lost: Slurm job 302 ended while tarn server was down; how it ended is unknown");
  EXPECT_NE(by_key["alice/a/w-2"].exit.exit_code, 0) << "never read as a success";
}

TEST_F(FakeSlurmBackendTest, WhatNoNodeCanHoldIsInfeasibleInSlurmsWords) {
  spec::Assembly big = assembly_;
  big.components[0].resource.gpus = 9;
  ASSERT_TRUE(backend_->RequestPlacement(big, {Ref(0)}, false).ok());
  EXPECT_TRUE(backend_->Place().empty());
  service::PlacementStatus ps = backend_->GetPlacement("alice/a/w-0");
  EXPECT_EQ(ps.phase, service::PlacementStatus::Phase::kInfeasible);
  EXPECT_EQ(ps.reason,
            "no Slurm node has 2 CPUs, 128 MiB and 9 GPUs (the largest have 4 CPUs, 4096 MiB, 2 "
            "GPUs); Slurm: allocation failure: Requested node configuration is not available");
  EXPECT_EQ(slurm_.Commands("sbatch").size(), 1u);  // --test-only: nothing submitted
}

TEST_F(FakeSlurmBackendTest, SharedDirIsChecked) {
  EXPECT_TRUE(CheckSharedDir(dir_.string()).ok());
  Status s = CheckSharedDir((dir_ / "nope").string());
  EXPECT_EQ(s.message(), "backend.shared_dir \"" + (dir_ / "nope").string() +
                             "\": No such file or directory (create it on a filesystem every "
                             "Slurm node mounts)");
  EXPECT_EQ(CheckSharedDir("rel").message(), "backend.shared_dir \"rel\": not an absolute path");
}

}  // namespace
}  // namespace tarn::backend
