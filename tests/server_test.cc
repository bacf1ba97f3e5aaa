// Integration tests of `tarn server` as a user runs it: a real server process with its own
// state directory, real instances under tarn-shim, the REST API over HTTP, and kill -9 of
// the server in the middle of work. Needs root (namespaces, cgroups): ctest label "root".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "http/raw_client_for_test.h"
#include "server_process.h"
#include "tarn_process.h"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

using tarn::testing::CallApi;
using tarn::testing::ReadAll;
using tarn::testing::Reply;
using tarn::testing::ServerProcess;

// Live workload processes of instances under `state_dir` with their "user/assembly/instance":
// every process whose environment has TARN_SHARED_DIR below it and that runs `sleep`.
std::vector<std::pair<pid_t, std::string>> LivePids(const std::string& state_dir) {
  std::vector<std::pair<pid_t, std::string>> out;
  for (auto& p : tarn::testing::WorkloadProcesses("sleep")) {
    // Zombies have no environment; a stopped sleep is not live.
    if (p.env["TARN_SHARED_DIR"].rfind(state_dir + "/", 0) != 0) continue;
    out.push_back(
        {p.pid, p.env["TARN_USER"] + "/" + p.env["TARN_ASSEMBLY"] + "/" + p.env["TARN_INSTANCE"]});
  }
  return out;
}

std::map<std::string, int> LiveInstances(const std::string& state_dir) {
  std::map<std::string, int> out;
  for (const auto& [pid, key] : LivePids(state_dir)) ++out[key];
  return out;
}

using tarn::testing::CommandResult;

// Runs the tarn CLI with `args` and extra environment entries "K=V" in `dir`.
CommandResult RunTarn(const std::vector<std::string>& args, const std::vector<std::string>& env,
                      const std::string& dir, std::chrono::seconds timeout = 120s) {
  return tarn::testing::RunTarn(args, env, dir, timeout);
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tarn-server-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0711);
    state_ = dir_ + "/state";
    range_lock_ = tarn::testing::LockAddressRange(&range_);
    ASSERT_GE(range_lock_, 0) << "no free test address range";
    range_prefix_ = range_.substr(0, range_.find(".0.0/"));
    WriteConfig(json::object());
  }
  void TearDown() override {
    if (server_ && server_->pid() <= 0) {
      if (!server_->Start()) ADD_FAILURE() << "server did not restart for cleanup";
    }
    if (server_) {
      // Destroy what the test left, so that no instance outlives it.
      for (const char* user : {"alice", "bob"}) {
        Reply list = Call("GET", "/app/v1/services", json(), user);
        if (list.status != 200) continue;
        for (const json& a : list.body) {
          const std::string path = "/app/v1/services/" + a["name"].get<std::string>();
          Call("DELETE", path, json(), user);
          // Destroyed means every instance has stopped: only then may the server go.
          WaitFor(path + " to be destroyed", 30s,
                  [&] { return Call("GET", path, json(), user).status == 404; });
        }
      }
      WaitFor("every instance to be gone", 30s, [&] { return LiveInstances(state_).empty(); });
      EXPECT_TRUE(server_->Terminate()) << server_->log();
      server_.reset();
    }
    std::filesystem::remove_all(dir_);
    if (range_lock_ >= 0) ::close(range_lock_);
  }

  void WriteConfig(json extra) {
    json config = {
        {"restart", {{"initial_backoff_ms", 200}, {"max_backoff_ms", 5000}}},
        {"probe_interval_ms", 100},
        {"address_range", range_},
        // Names outside tarn's domain are refused, never sent to the machine's resolvers.
        {"dns_upstream", json::array()},
        {"nodes",
         json::array({{{"name", "node-1"}, {"vcores", 64}, {"memory_mb", 65536}, {"gpus", 0}}})}};
    for (auto it = extra.begin(); it != extra.end(); ++it) config[it.key()] = it.value();
    std::string path = dir_ + "/config.json";
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(config.dump(2).c_str(), f);
    std::fclose(f);
    config_ = path;
  }

  void StartServer(std::vector<std::string> env = {}) {
    server_ = std::make_unique<ServerProcess>(state_, config_, std::move(env));
    ASSERT_TRUE(server_->Start()) << server_->log();
  }

  Reply Call(const std::string& method, const std::string& path, const json& body = json(),
             const std::string& user = "alice") {
    return CallApi(*server_, method, path, body, user);
  }

  bool WaitFor(const std::string& what, std::chrono::milliseconds timeout,
               const std::function<bool()>& done) {
    return tarn::testing::WaitFor(what, timeout, done);
  }

  // A READY instance's `sh -c` may not have started its `sleep` yet: wait for the count.
  std::map<std::string, int> WaitLive(size_t n) {
    std::map<std::string, int> live;
    WaitFor(std::to_string(n) + " live instances", 20s, [&] {
      live = LiveInstances(state_);
      return live.size() == n;
    });
    return live;
  }

  std::string State(const std::string& name, const std::string& user = "alice") {
    Reply r = Call("GET", "/app/v1/services/" + name, json(), user);
    return r.status == 200 ? r.body.value("state", "") : "HTTP " + std::to_string(r.status);
  }

  bool WaitState(const std::string& name, const std::string& state,
                 std::chrono::milliseconds timeout = 30s, const std::string& user = "alice") {
    std::string last;
    bool ok = WaitFor(name + " to be " + state, timeout, [&] {
      last = State(name, user);
      return last == state;
    });
    if (!ok) {
      ADD_FAILURE() << "last state " << last
                    << "; service: " << Call("GET", "/app/v1/services/" + name, json(), user).text;
    }
    return ok;
  }

  static json Sleeper(const std::string& name, int count, const std::string& extra_component = "") {
    json a = {{"name", name},
              {"version", "1"},
              {"components", json::array({{{"name", "sleeper"},
                                           {"number_of_containers", count},
                                           {"launch_command", "sleep 1000"},
                                           {"resource", {{"cpus", 1}, {"memory", "64"}}}}})}};
    (void)extra_component;
    return a;
  }

  std::string dir_, state_, config_;
  std::string range_;         // this test's address range, "127.N.0.0/16"
  std::string range_prefix_;  // "127.N"
  int range_lock_ = -1;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ServerTest, LaunchReachesStableInDependencyOrder) {
  StartServer();
  json a = {{"name", "chain"},
            {"version", "1"},
            {"components",
             json::array({
                 {{"name", "first"},
                  {"number_of_containers", 2},
                  {"launch_command", "sleep 1000"},
                  {"resource", {{"cpus", 1}, {"memory", "64"}}},
                  // READY only once a file appears: the test decides when.
                  {"readiness_check",
                   {{"type", "PORT"}, {"properties", {{"port", "1"}, {"timeout", "200"}}}}}},
                 {{"name", "second"},
                  {"number_of_containers", 1},
                  {"launch_command", "sleep 1000"},
                  {"dependencies", json::array({"first"})},
                  {"resource", {{"cpus", 1}, {"memory", "64"}}}},
             })}};
  Reply r = Call("POST", "/app/v1/services", a);
  ASSERT_EQ(r.status, 202) << r.text;
  EXPECT_EQ(r.body["uri"], "/app/v1/services/chain");
  EXPECT_EQ(r.body["state"], "ACCEPTED");
  // `first` runs but never gets ready (nothing listens on port 1): `second` must not start.
  WaitFor("first's instances to run", 20s, [&] {
    return LiveInstances(state_).count("alice/chain/first-1") == 1 &&
           LiveInstances(state_).count("alice/chain/first-0") == 1;
  });
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(LiveInstances(state_).count("alice/chain/second-0"), 0u);
  Reply s = Call("GET", "/app/v1/services/chain");
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(s.body["state"], "STARTED");
  const json& first = s.body["components"][0];
  EXPECT_EQ(first["containers"][0]["state"], "RUNNING_BUT_UNREADY");
  EXPECT_NE(first["containers"][0]["diagnostics"].get<std::string>().find("readiness check"),
            std::string::npos)
      << first.dump();
  EXPECT_EQ(s.body["components"][1]["containers"][0]["diagnostics"],
            "waiting for first to be READY");
  // The same file without the impossible check: second follows first, and all is STABLE.
  ASSERT_EQ(Call("DELETE", "/app/v1/services/chain").status, 200);
  WaitFor("chain to be gone", 20s,
          [&] { return Call("GET", "/app/v1/services/chain").status == 404; });
  a["components"][0].erase("readiness_check");
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  ASSERT_TRUE(WaitState("chain", "STABLE"));
  s = Call("GET", "/app/v1/services/chain");
  const json& c0 = s.body["components"][0]["containers"][0];
  EXPECT_EQ(c0["component_instance_name"], "first-0");
  EXPECT_EQ(c0["hostname"], "first-0.chain.alice.tarn");
  EXPECT_EQ(c0["state"], "READY");
  EXPECT_EQ(c0["bare_host"], "node-1");
  EXPECT_GT(c0["launch_time"].get<int64_t>(), 0);
  // Its own address from the configured range.
  EXPECT_EQ(c0["ip"].get<std::string>().rfind(range_prefix_ + ".0.", 0), 0u) << c0.dump();
  EXPECT_NE(c0["ip"], s.body["components"][0]["containers"][1]["ip"]);
  // Events show the order: both `first` STARTED before `second` was launched.
  Reply ev = Call("GET", "/tarn/v1/services/chain/events");
  ASSERT_EQ(ev.status, 200);
  int first_started = 0;
  bool second_launched_early = false;
  for (const json& e : ev.body) {
    if (e["component"] == "first" && e["type"] == "STARTED") ++first_started;
    if (e["component"] == "second" && e["type"] == "LAUNCH" && first_started < 2) {
      second_launched_early = true;
    }
  }
  EXPECT_EQ(first_started, 2);
  EXPECT_FALSE(second_launched_early) << ev.text;
  std::map<std::string, int> live = WaitLive(3);
  EXPECT_EQ(live["alice/chain/first-0"], 1);
  EXPECT_EQ(live["alice/chain/first-1"], 1);
  EXPECT_EQ(live["alice/chain/second-0"], 1);
}

// A state directory the instances' account cannot reach (under a 0700 directory, as
// `mktemp -d` makes) is refused at launch, naming the directory and the account, instead of
// crash-looping on "Permission denied" where nobody looks.
TEST_F(ServerTest, AStateDirectoryTheRunAsAccountCannotReachIsRefusedAtLaunch) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (containers run as another account)";
  ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
  StartServer();
  json a = {{"name", "walled"},
            {"version", "1"},
            {"components", json::array({{{"name", "c"},
                                         {"number_of_containers", 1},
                                         {"launch_command", "sleep 100"},
                                         {"resource", {{"cpus", 1}, {"memory", "64"}}}}})}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  std::string why;
  WaitFor("c-0 to say why it cannot start", 20s, [&] {
    Reply r = Call("GET", "/app/v1/services/walled");
    if (r.status != 200) return false;
    why = r.body["components"][0]["containers"][0].value("diagnostics", "") + " " +
          r.body["components"][0]["containers"][0].value("last_exit", "");
    return why.find("cannot enter") != std::string::npos;
  });
  EXPECT_NE(why.find("state directory " + state_), std::string::npos) << why;
  EXPECT_NE(
      why.find("account nobody (uid 65534) cannot enter " + dir_ + " (mode 0700, owner root)"),
      std::string::npos)
      << why;
  ::chmod(dir_.c_str(), 0711);
}

// A DOCKER artifact asks for an image: a server without a container engine refuses the
// start and says why, instead of running the command on the host without the image.
TEST_F(ServerTest, CrashingInstanceBacksOffThenFailsTheAssembly) {
  StartServer();
  json a = {
      {"name", "crash"},
      {"version", "1"},
      {"components",
       json::array({{{"name", "bad"},
                     {"number_of_containers", 1},
                     {"launch_command", "echo going down >&2; exit 3"},
                     {"resource", {{"cpus", 1}, {"memory", "64"}}},
                     {"configuration",
                      {{"properties",
                        {{"yarn.service.container-failure-per-component.threshold", "4"}}}}}}})}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  ASSERT_TRUE(WaitState("crash", "FAILED", 30s));
  Reply s = Call("GET", "/app/v1/services/crash");
  EXPECT_NE(s.body["diagnostics"].get<std::string>().find("bad"), std::string::npos) << s.text;
  const json& c = s.body["components"][0]["containers"][0];
  EXPECT_EQ(c["state"], "FAILED");
  EXPECT_EQ(c["last_exit"], "exited with code 3; its last stderr line: going down");
  EXPECT_EQ(c["restarts"], 3);
  // The restarts backed off: 0.2 s, 0.4 s, 0.8 s apart (at least), as the events say.
  Reply ev = Call("GET", "/tarn/v1/services/crash/events");
  std::vector<std::string> delays;
  std::vector<int64_t> launches;
  for (const json& e : ev.body) {
    if (e["type"] == "RESTART") delays.push_back(e["message"]);
    if (e["type"] == "LAUNCH") launches.push_back(e["time"]);
  }
  ASSERT_EQ(delays.size(), 3u) << ev.text;
  EXPECT_EQ(delays[0].rfind("restarting in 0.2s", 0), 0u) << delays[0];
  EXPECT_EQ(delays[1].rfind("restarting in 0.4s", 0), 0u) << delays[1];
  EXPECT_EQ(delays[2].rfind("restarting in 0.8s", 0), 0u) << delays[2];
  ASSERT_EQ(launches.size(), 4u);
  EXPECT_GE(launches[2] - launches[1], 400);
  EXPECT_GE(launches[3] - launches[2], 800);
  // Its stderr is kept.
  httplib::Client cl("127.0.0.1", server_->port());
  cl.set_bearer_token_auth(server_->Token("alice").c_str());
  auto logs = cl.Get("/tarn/v1/services/crash/instances/bad-0/logs?stream=stderr");
  ASSERT_TRUE(logs);
  EXPECT_EQ(logs->status, 200);
  EXPECT_NE(logs->body.find("going down"), std::string::npos) << logs->body;
}

// A FAILED assembly starts nothing: flexing it is refused (409, with the reason) and the
// stored count stays; its healthy component says it was stopped, not FLEXING for ever.
TEST_F(ServerTest, FlexOfAFailedAssemblyIsRefusedAndChangesNothing) {
  StartServer();
  json a = {
      {"name", "broken"},
      {"version", "1"},
      {"components",
       json::array(
           {{{"name", "bad"},
             {"number_of_containers", 1},
             {"launch_command", "exit 3"},
             {"resource", {{"cpus", 1}, {"memory", "64"}}},
             {"configuration",
              {{"properties", {{"yarn.service.container-failure-per-component.threshold", "1"}}}}}},
            {{"name", "fine"},
             {"number_of_containers", 1},
             {"launch_command", "sleep 1000"},
             {"resource", {{"cpus", 1}, {"memory", "64"}}}}})}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  ASSERT_TRUE(WaitState("broken", "FAILED", 30s));
  for (const std::string component : {"bad", "fine"}) {
    Reply r = Call("PUT", "/app/v1/services/broken/components/" + component,
                   {{"number_of_containers", 2}});
    EXPECT_EQ(r.status, 409) << r.text;
    EXPECT_NE(r.text.find("assembly broken is FAILED: flexing it would start nothing"),
              std::string::npos)
        << r.text;
  }
  WaitFor("fine to be stopped with the assembly", 20s, [&] {
    Reply s = Call("GET", "/app/v1/services/broken");
    return s.body["components"][1]["state"] == "STOPPED";
  });
  Reply s = Call("GET", "/app/v1/services/broken");
  EXPECT_EQ(s.body["components"][0]["number_of_containers"], 1) << s.text;
  EXPECT_EQ(s.body["components"][1]["number_of_containers"], 1) << s.text;
  EXPECT_EQ(s.body["components"][1]["diagnostics"], "stopped: the assembly failed") << s.text;
  // What is stored says the same after a restart of the server.
  ASSERT_TRUE(server_->Terminate());
  StartServer();
  s = Call("GET", "/app/v1/services/broken");
  EXPECT_EQ(s.body["state"], "FAILED") << s.text;
  EXPECT_EQ(s.body["components"][0]["number_of_containers"], 1) << s.text;
  EXPECT_EQ(s.body["components"][1]["number_of_containers"], 1) << s.text;
}

TEST_F(ServerTest, FlexUpAndDown) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("flex", 1)).status, 202);
  ASSERT_TRUE(WaitState("flex", "STABLE"));
  Reply r = Call("PUT", "/app/v1/services/flex/components/sleeper", {{"number_of_containers", 3}});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["diagnostics"], "Updating component (sleeper) size from 1 to 3");
  ASSERT_TRUE(WaitState("flex", "STABLE"));
  auto live = WaitLive(3);
  EXPECT_EQ(live["alice/flex/sleeper-2"], 1);
  ASSERT_EQ(
      Call("PUT", "/app/v1/services/flex/components/sleeper", {{"number_of_containers", 1}}).status,
      200);
  WaitFor("flex down to one", 20s, [&] {
    Reply s = Call("GET", "/app/v1/services/flex");
    return s.body["state"] == "STABLE" && s.body["components"][0]["containers"].size() == 1;
  });
  WaitFor("the highest two to be gone", 20s, [&] {
    auto l = LiveInstances(state_);
    return l.size() == 1 && l.count("alice/flex/sleeper-0") == 1;
  });
  Reply s = Call("GET", "/app/v1/services/flex");
  EXPECT_EQ(s.body["components"][0]["number_of_containers"], 1);
  EXPECT_EQ(
      Call("PUT", "/app/v1/services/flex/components/nope", {{"number_of_containers", 1}}).status,
      404);
  // With no queue configured, the default queue is guaranteed the whole cluster, and alice's
  // one sleeper is her share of it.
  Reply q = Call("GET", "/tarn/v1/queues");
  ASSERT_EQ(q.body.size(), 1u) << q.text;
  EXPECT_EQ(q.body[0]["name"], "default");
  EXPECT_EQ(q.body[0]["capacity"], 100) << q.text;
  ASSERT_EQ(q.body[0]["users"].size(), 1u) << q.text;
  EXPECT_EQ(q.body[0]["users"][0]["user"], "alice");
  EXPECT_DOUBLE_EQ(q.body[0]["users"][0]["dominant_share"].get<double>(), 1.0 / 64) << q.text;
}

// tarn's paging of a service's instances and events (what the dashboard asks for): bounded
// answers that say how many there are; YARN's plain GET unchanged.
TEST_F(ServerTest, AServicesInstancesAndEventsPage) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("paged", 12)).status, 202);
  ASSERT_TRUE(WaitState("paged", "STABLE"));
  Reply whole = Call("GET", "/app/v1/services/paged");
  ASSERT_EQ(whole.status, 200) << whole.text;
  EXPECT_EQ(whole.body["components"][0]["containers"].size(), 12u);
  EXPECT_FALSE(whole.body["components"][0].contains("containers_total"));

  Reply first = Call("GET", "/app/v1/services/paged?containers_limit=5");
  ASSERT_EQ(first.status, 200) << first.text;
  const json& c = first.body["components"][0];
  EXPECT_EQ(c["containers_total"], 12);
  EXPECT_EQ(c["containers_offset"], 0);
  ASSERT_EQ(c["containers"].size(), 5u);
  EXPECT_EQ(c["containers"][0]["component_instance_name"], "sleeper-0");
  EXPECT_EQ(c["number_of_containers"], 12);
  EXPECT_EQ(c["ready_containers"], 12);

  Reply last = Call(
      "GET", "/app/v1/services/paged?containers_limit=5&component=sleeper&containers_offset=10");
  ASSERT_EQ(last.status, 200) << last.text;
  ASSERT_EQ(last.body["components"][0]["containers"].size(), 2u);
  EXPECT_EQ(last.body["components"][0]["containers"][0]["component_instance_name"], "sleeper-10");
  EXPECT_EQ(last.body["components"][0]["containers_offset"], 10);
  Reply past = Call(
      "GET", "/app/v1/services/paged?containers_limit=5&component=sleeper&containers_offset=40");
  ASSERT_EQ(past.status, 200) << past.text;
  EXPECT_EQ(past.body["components"][0]["containers"].size(), 0u);

  Reply bad = Call("GET", "/app/v1/services/paged?containers_limit=0");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["diagnostics"], "containers_limit: from 1 to 500, got 0") << bad.text;
  bad = Call("GET", "/app/v1/services/paged?containers_limit=5&containers_offset=-1");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["diagnostics"], "containers_offset: expected a whole number >= 0, got \"-1\"")
      << bad.text;
  bad = Call("GET", "/app/v1/services/paged?containers_limit=5&component=nope");
  EXPECT_EQ(bad.status, 404);
  EXPECT_EQ(bad.body["diagnostics"], "component nope not found in paged") << bad.text;

  Reply events = Call("GET", "/tarn/v1/services/paged/events");
  ASSERT_EQ(events.status, 200);
  ASSERT_GT(events.body.size(), 5u);
  Reply newest = Call("GET", "/tarn/v1/services/paged/events?limit=5");
  ASSERT_EQ(newest.status, 200);
  ASSERT_EQ(newest.body.size(), 5u);
  EXPECT_EQ(newest.body[4], events.body.back());
  EXPECT_EQ(newest.body[0], events.body[events.body.size() - 5]);
  EXPECT_EQ(Call("GET", "/tarn/v1/services/paged/events?limit=x").status, 400);
}

// Blocking reads (api/watches.h, Consul's blocking queries): a GET that sends the
// X-Tarn-Index it was given is held until the status changes, the assembly goes, the wait
// ends or the server stops, and nothing else holds it.
TEST_F(ServerTest, ABlockingReadIsHeldUntilTheStatusChanges) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("watched", 1)).status, 202);
  ASSERT_TRUE(WaitState("watched", "STABLE"));
  Reply now = Call("GET", "/app/v1/services/watched");
  ASSERT_EQ(now.status, 200) << now.text;
  ASSERT_FALSE(now.index.empty()) << "no X-Tarn-Index";
  const uint64_t index = std::stoull(now.index);
  const std::string held = "/app/v1/services/watched?index=" + now.index;
  auto elapsed_ms = [](auto since) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 since)
        .count();
  };

  // /metrics: GETs answered 200, and requests timed.
  auto counts = [&] {
    const std::string text = Call("GET", "/metrics").text;
    auto value = [&](const std::string& series) {
      const size_t at = text.find("\n" + series + " ");
      return at == std::string::npos ? -1 : std::stoll(text.substr(at + series.size() + 2));
    };
    return std::make_pair(value("tarn_http_requests_total{method=\"GET\",code=\"200\"}"),
                          value("tarn_http_request_duration_seconds_count"));
  };
  const auto counted = counts();

  // Nothing changes: held for the whole wait, then the same status and index.
  auto t0 = std::chrono::steady_clock::now();
  Reply same = Call("GET", held + "&wait=400ms");
  EXPECT_GE(elapsed_ms(t0), 350);
  ASSERT_EQ(same.status, 200) << same.text;
  EXPECT_EQ(same.index, now.index);
  EXPECT_EQ(same.body, now.body);
  // Counted, but not timed: its 400 ms are the wait it asked for (the first /metrics GET
  // counts itself once it has answered).
  const auto after = counts();
  EXPECT_EQ(after.first, counted.first + 2);
  EXPECT_EQ(after.second, counted.second + 1);

  // A flex answers the held read with the new status; the wait (20 s) is not waited out.
  Reply changed;
  std::atomic<bool> answered{false};
  t0 = std::chrono::steady_clock::now();
  std::thread reader([&] {
    changed = Call("GET", held + "&wait=20s");
    answered = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(answered) << "answered before anything changed";
  ASSERT_EQ(
      Call("PUT", "/app/v1/services/watched/components/sleeper", {{"number_of_containers", 2}})
          .status,
      200);
  reader.join();
  EXPECT_LT(elapsed_ms(t0), 10000);
  ASSERT_EQ(changed.status, 200) << changed.text;
  EXPECT_GT(std::stoull(changed.index), index);
  EXPECT_EQ(changed.body["components"][0]["number_of_containers"], 2) << changed.text;
  ASSERT_TRUE(WaitState("watched", "STABLE"));

  // An index this server never gave (a restarted one counts anew) is answered at once, as
  // is another tenant's assembly (404, as if it did not exist), before anything is held.
  t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Call("GET", "/app/v1/services/watched?index=999999999&wait=20s").status, 200);
  EXPECT_EQ(Call("GET", held + "&wait=20s", json(), "bob").status, 404);
  EXPECT_LT(elapsed_ms(t0), 10000);

  // Bad parameters are named.
  Reply bad = Call("GET", "/app/v1/services/watched?index=soon");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["diagnostics"], "index: expected a whole number >= 0, got \"soon\"")
      << bad.text;
  bad = Call("GET", held + "&wait=later");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["diagnostics"],
            "wait: expected a duration such as 500ms, 30s or 5m (at most 10m), got \"later\"")
      << bad.text;

  // A client that watches the destroy sees each change, then 404 once the assembly is
  // gone, every answer with a newer index.
  Reply current = Call("GET", "/app/v1/services/watched");
  std::vector<Reply> seen;
  std::thread watcher([&] {
    std::string last = current.index;
    for (int i = 0; i < 50; ++i) {
      Reply r = Call("GET", "/app/v1/services/watched?index=" + last + "&wait=20s");
      seen.push_back(r);
      if (r.status != 200 || r.index == last) break;
      last = r.index;
    }
  });
  std::this_thread::sleep_for(200ms);
  t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Call("DELETE", "/app/v1/services/watched").status, 200);
  watcher.join();
  EXPECT_LT(elapsed_ms(t0), 15000);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().status, 404) << seen.back().text;
  for (size_t i = 0; i + 1 < seen.size(); ++i) {
    EXPECT_EQ(seen[i].status, 200);
    EXPECT_GT(std::stoull(seen[i].index),
              i == 0 ? std::stoull(current.index) : std::stoull(seen[i - 1].index));
  }

  // A server that stops answers what it holds (the status as it is) before it exits.
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("held", 1)).status, 202);
  ASSERT_TRUE(WaitState("held", "STABLE"));
  Reply before = Call("GET", "/app/v1/services/held");
  Reply at_stop;
  std::thread stop_reader(
      [&] { at_stop = Call("GET", "/app/v1/services/held?index=" + before.index + "&wait=60s"); });
  std::this_thread::sleep_for(200ms);
  t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(server_->Terminate()) << server_->log();
  stop_reader.join();
  EXPECT_LT(elapsed_ms(t0), 15000);
  EXPECT_EQ(at_stop.status, 200) << at_stop.text;
  EXPECT_EQ(at_stop.index, before.index);
}

TEST_F(ServerTest, StopStartDestroy) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("sss", 2)).status, 202);
  ASSERT_TRUE(WaitState("sss", "STABLE"));
  Reply r = Call("PUT", "/app/v1/services/sss", {{"state", "STOPPED"}});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(State("sss"), "STOPPED");
  WaitFor("instances to stop", 20s, [&] { return LiveInstances(state_).empty(); });
  WaitFor("containers to say STOPPED", 20s, [&] {
    Reply s = Call("GET", "/app/v1/services/sss");
    return s.body["components"][0]["containers"][1]["state"] == "STOPPED";
  });
  // The spec is kept; start brings it back.
  ASSERT_EQ(Call("PUT", "/app/v1/services/sss", {{"state", "STARTED"}}).status, 200);
  ASSERT_TRUE(WaitState("sss", "STABLE"));
  WaitLive(2);
  EXPECT_EQ(Call("PUT", "/app/v1/services/sss", {{"state", "STARTED"}}).status, 409);
  ASSERT_EQ(Call("DELETE", "/app/v1/services/sss").status, 200);
  WaitFor("destroyed", 20s, [&] { return Call("GET", "/app/v1/services/sss").status == 404; });
  EXPECT_TRUE(LiveInstances(state_).empty());
  // The directories go after the 404, on a backend worker (docs/server.md: destroy is
  // asynchronous): seen once under load.
  WaitFor("the shared directory removed", 10s,
          [&] { return !std::filesystem::exists(state_ + "/shared/alice/sss"); });
}

// Zombie processes whose parent is `parent` (state Z in /proc/<pid>/stat, its fourth field),
// as "<pid> (<command>)".
std::vector<std::string> ZombieChildren(pid_t parent) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string stat = tarn::testing::ReadAll(it->path().string() + "/stat");
    const size_t paren = stat.rfind(')');  // the command name may hold spaces and ')'
    if (paren == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + paren + 1, " %c %d", &state, &ppid) == 2 && state == 'Z' &&
        ppid == parent) {
      out.push_back(it->path().filename().string() + " " +
                    stat.substr(stat.find('('), paren + 1 - stat.find('(')));
    }
  }
  return out;
}

// The server is its shims' subreaper and waits for every one that ends, whether its
// instance ended by a flex-down, a stop or a destroy: a server with churn that kept them
// as zombies would run out of pids (and of its pids cgroup long before).
TEST_F(ServerTest, EndedShimsLeaveNoZombies) {
  StartServer();
  const std::string path = "/app/v1/services/churn";
  auto flex = [&](int n) {
    ASSERT_EQ(Call("PUT", path + "/components/sleeper", {{"number_of_containers", n}}).status, 200);
    ASSERT_TRUE(WaitState("churn", "STABLE"));
    WaitLive(static_cast<size_t>(n));
  };
  int ends = 0;
  for (int round = 0; round < 4; ++round) {
    ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("churn", 4)).status, 202);
    ASSERT_TRUE(WaitState("churn", "STABLE"));
    WaitLive(4);
    flex(1);
    flex(4);
    flex(1);
    flex(4);
    ends += 6;
    ASSERT_EQ(Call("PUT", path, {{"state", "STOPPED"}}).status, 200);
    // A start is refused (409) until every instance has been seen to stop.
    WaitFor("a start once the instances have stopped", 20s, [&] {
      return Call("PUT", path, {{"state", "STARTED"}}).status == 200;
    });
    ASSERT_TRUE(WaitState("churn", "STABLE"));
    WaitLive(4);
    ASSERT_EQ(Call("DELETE", path).status, 200);
    WaitFor("destroyed", 20s, [&] { return Call("GET", path).status == 404; });
    ends += 8;
  }
  EXPECT_GE(ends, 50);
  // Each shim is waited for within a poll of the backend's monitor (the last ones, after the
  // assembly is gone, too).
  std::vector<std::string> zombies;
  WaitFor("no zombie children of the server", 10s, [&] {
    zombies = ZombieChildren(server_->pid());
    return zombies.empty();
  });
  EXPECT_TRUE(zombies.empty()) << zombies.size() << " zombies after " << ends
                               << " instance ends, e.g. " << (zombies.empty() ? "" : zombies[0]);
}

// YARN's ${<INSTANCE>_IP}: a dependent's command, env and template get the address the ps
// holds; an instance whose peer has no address yet says so and passes nothing on.
TEST_F(ServerTest, PeersAddressesReachCommandsEnvAndTemplates) {
  StartServer();
  json sleeper = {{"number_of_containers", 1},
                  {"launch_command", "sleep 1000"},
                  {"resource", {{"cpus", 1}, {"memory", "64"}}}};
  json ps = sleeper;
  ps["name"] = "ps";
  json web = sleeper;
  web["name"] = "web";
  web["dependencies"] = {"ps"};
  web["launch_command"] =
      "echo \"cmd=${PS-0_IP} env=$PS_ADDR $(cat conf/peers.txt)\" > $TARN_SHARED_DIR/seen.txt; "
      "sleep 1000";
  web["configuration"] = {{"env", {{"PS_ADDR", "${PS-0_IP}"}}},
                          {"files",
                           {{{"type", "TEMPLATE"},
                             {"dest_file", "peers.txt"},
                             {"properties", {{"content", "tpl=${PS-0_IP}"}}}}}}};
  ASSERT_EQ(Call("POST", "/app/v1/services",
                 {{"name", "ips"}, {"version", "1"}, {"components", {ps, web}}})
                .status,
            202);
  ASSERT_TRUE(WaitState("ips", "STABLE"));
  Reply s = Call("GET", "/app/v1/services/ips");
  const std::string ip = s.body["components"][0]["containers"][0].value("ip", "");
  ASSERT_EQ(ip.rfind(range_prefix_ + ".", 0), 0u) << s.text;
  const std::string seen = state_ + "/shared/alice/ips/seen.txt";
  std::string text;
  WaitFor("web-0 to write what it saw", 10s, [&] {
    text = tarn::testing::ReadAll(seen);
    return !text.empty();
  });
  EXPECT_EQ(text, "cmd=" + ip + " env=" + ip + " tpl=" + ip + "\n");

  // "early" names the address of "late", which starts only after early is READY.
  json early = sleeper;
  early["name"] = "early";
  early["launch_command"] = "echo ${LATE-0_IP}; sleep 1000";
  json late = sleeper;
  late["name"] = "late";
  late["dependencies"] = {"early"};
  ASSERT_EQ(Call("POST", "/app/v1/services",
                 {{"name", "order"}, {"version", "1"}, {"components", {early, late}}})
                .status,
            202);
  std::string diagnostics;
  WaitFor("early-0 to say why it cannot start", 20s, [&] {
    Reply o = Call("GET", "/app/v1/services/order");
    diagnostics = o.body["components"][0]["containers"][0].value("diagnostics", "");
    return diagnostics.find("${LATE-0_IP}") != std::string::npos;
  });
  EXPECT_NE(diagnostics.find("${LATE-0_IP}: that instance has no address yet (not placed)"),
            std::string::npos)
      << diagnostics;
}

TEST_F(ServerTest, UsersAreIsolated) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("same", 1), "alice").status, 202);
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("same", 2), "bob").status, 202);
  EXPECT_EQ(Call("POST", "/app/v1/services", Sleeper("same", 1), "bob").status, 409);
  ASSERT_TRUE(WaitState("same", "STABLE", 30s, "alice"));
  ASSERT_TRUE(WaitState("same", "STABLE", 30s, "bob"));
  EXPECT_EQ(Call("GET", "/app/v1/services", json(), "alice").body.size(), 1u);
  Reply bob = Call("GET", "/app/v1/services/same", json(), "bob");
  EXPECT_EQ(bob.body["components"][0]["containers"].size(), 2u);
  EXPECT_EQ(bob.body["components"][0]["containers"][0]["hostname"], "sleeper-0.same.bob.tarn");
  // carol sees nothing of theirs and can change nothing.
  EXPECT_EQ(Call("GET", "/app/v1/services/same", json(), "carol").status, 404);
  EXPECT_EQ(Call("DELETE", "/app/v1/services/same", json(), "carol").status, 404);
  EXPECT_EQ(Call("PUT", "/app/v1/services/same", {{"state", "STOPPED"}}, "carol").status, 404);
  EXPECT_EQ(Call("GET", "/tarn/v1/services/same/events", json(), "carol").status, 404);
  EXPECT_EQ(Call("GET", "/tarn/v1/services/same/instances/sleeper-0/logs", json(), "carol").status,
            404);
  ASSERT_EQ(Call("PUT", "/app/v1/services/same", {{"state", "STOPPED"}}, "bob").status, 200);
  EXPECT_EQ(State("same", "alice"), "STABLE");
  // No credentials: 401, and user.name (Hadoop simple auth, off by default) is no credential.
  Reply anon = Call("GET", "/app/v1/services", json(), "");
  EXPECT_EQ(anon.status, 401);
  EXPECT_NE(anon.body["diagnostics"].get<std::string>().find("Bearer"), std::string::npos);
  EXPECT_EQ(Call("GET", "/app/v1/services?user.name=alice", json(), "").status, 401);
  auto live = LiveInstances(state_);
  WaitFor("bob's to stop", 20s, [&] {
    live = LiveInstances(state_);
    return live.size() == 1;
  });
  EXPECT_EQ(live.count("alice/same/sleeper-0"), 1u);
}

// Issue 8's sharing: alice and bob each launch a training gang (a ps and two workers with a
// GPU each) into their own queue with a guaranteed half of a 4-GPU node (fake GPUs); both
// run and make progress on distinct GPUs. alice's second gang does not fit: it waits, with
// the reason in its status, and starts once bob's assembly is destroyed.
TEST_F(ServerTest, TwoUsersShareGpusByQueueAndAThirdGangWaitsForRoom) {
  WriteConfig(
      {{"nodes",
        json::array({{{"name", "node-1"}, {"vcores", 16}, {"memory_mb", 16384}, {"gpus", 4}}})},
       {"queues", json::array({{{"name", "research"},
                                {"capacity", 50},
                                {"maximum-capacity", 100},
                                {"acl_submit_applications", "alice"}},
                               {{"name", "prod"},
                                {"capacity", 50},
                                {"maximum-capacity", 100},
                                {"acl_submit_applications", "bob"}}})}});
  StartServer();
  // Each instance appends a line to its own file in the assembly's shared directory every
  // 0.1 s: "progress" that the test can watch grow.
  auto gang = [](const std::string& name, const std::string& queue) {
    const std::string work =
        "while :; do echo $CUDA_VISIBLE_DEVICES >> $TARN_SHARED_DIR/$TARN_INSTANCE; sleep 0.1; "
        "done";
    return json{
        {"name", name},
        {"version", "1"},
        {"queue", queue},
        {"components",
         json::array(
             {{{"name", "ps"},
               {"number_of_containers", 1},
               {"launch_command", work},
               {"resource", {{"cpus", 1}, {"memory", "64"}}},
               {"configuration",
                {{"properties", {{"tarn.tf.role", "ps"}, {"tarn.ports", "grpc:2222"}}}}}},
              {{"name", "worker"},
               {"number_of_containers", 2},
               {"launch_command", work},
               {"resource",
                {{"cpus", 1}, {"memory", "64"}, {"additional", {{"yarn.io/gpu", {{"value", 1}}}}}}},
               {"configuration",
                {{"properties", {{"tarn.tf.role", "worker"}, {"tarn.ports", "grpc:2222"}}}}}}})}};
  };
  ASSERT_EQ(Call("POST", "/app/v1/services", gang("train", "research"), "alice").status, 202);
  ASSERT_EQ(Call("POST", "/app/v1/services", gang("train", "prod"), "bob").status, 202);
  // Queues are enforced: bob may not submit to alice's queue.
  EXPECT_EQ(Call("POST", "/app/v1/services", gang("sneaky", "research"), "bob").status, 403);
  ASSERT_TRUE(WaitState("train", "STABLE", 30s, "alice"));
  ASSERT_TRUE(WaitState("train", "STABLE", 30s, "bob"));
  auto lines = [&](const std::string& user, const std::string& name, const std::string& instance) {
    const std::string text = ReadAll(state_ + "/shared/" + user + "/" + name + "/" + instance);
    return std::count(text.begin(), text.end(), '\n');
  };
  // Both progress, on four distinct GPUs.
  for (const char* user : {"alice", "bob"}) {
    for (const char* instance : {"ps-0", "worker-0", "worker-1"}) {
      const auto before = lines(user, "train", instance);
      WaitFor(std::string(user) + "'s " + instance + " to progress", 10s,
              [&] { return lines(user, "train", instance) > before + 2; });
    }
  }
  std::set<int> gpus;
  for (const char* user : {"alice", "bob"}) {
    Reply r = Call("GET", "/app/v1/services/train", json(), user);
    for (const json& i : r.body["components"][1]["containers"]) {
      ASSERT_EQ(i["gpus"].size(), 1u) << i.dump();
      gpus.insert(i["gpus"][0].get<int>());
    }
  }
  EXPECT_EQ(gpus, (std::set<int>{0, 1, 2, 3}));
  // A third gang waits, and says why.
  ASSERT_EQ(Call("POST", "/app/v1/services", gang("more", "research"), "alice").status, 202);
  std::string reason;
  WaitFor("the third gang to say why it waits", 10s, [&] {
    Reply r = Call("GET", "/app/v1/services/more", json(), "alice");
    reason = r.body["components"][1]["containers"][0].value("diagnostics", "");
    return r.body["components"][1]["containers"][0].value("state", "") == "PENDING" &&
           reason.find("GPU") != std::string::npos;
  });
  EXPECT_NE(reason.find("GPU"), std::string::npos) << reason;
  // Who holds what, and why alice waits: the list names the reason at the assembly's level,
  // the nodes each GPU's holder, the queues each user's dominant share.
  Reply list = Call("GET", "/app/v1/services", json(), "alice");
  std::string listed;
  for (const json& s : list.body) {
    if (s.value("name", "") == "more") listed = s.value("diagnostics", "");
  }
  EXPECT_NE(listed.find("waiting for resources"), std::string::npos) << list.text;
  EXPECT_NE(listed.find("GPU"), std::string::npos) << list.text;
  CommandResult cli = RunTarn({"list"}, server_->CliEnv("alice"), dir_);
  EXPECT_NE(cli.out.find("waiting for resources"), std::string::npos) << cli.out << cli.err;
  Reply nodes = Call("GET", "/tarn/v1/nodes", json(), "alice");
  std::set<std::string> holders;
  for (const json& g : nodes.body[0]["gpus"]) holders.insert(g.value("holder", ""));
  EXPECT_EQ(holders, (std::set<std::string>{"alice/train/worker-0", "alice/train/worker-1",
                                            "bob/train/worker-0", "bob/train/worker-1"}))
      << nodes.text;
  Reply queues = Call("GET", "/tarn/v1/queues", json(), "alice");
  bool saw_alice = false;
  for (const json& q : queues.body) {
    if (q.value("name", "") != "research") continue;
    for (const json& u : q["users"]) {
      if (u.value("user", "") != "alice") continue;
      saw_alice = true;
      EXPECT_DOUBLE_EQ(u.value("dominant_share", 0.0), 0.5) << q.dump();  // 2 of 4 GPUs
      EXPECT_EQ(u.value("pending", 0), 1) << q.dump();                    // the third gang
    }
  }
  EXPECT_TRUE(saw_alice) << queues.text;
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(lines("alice", "more", "worker-0"), 0);
  // bob's assembly goes: alice's third gang starts in the room it leaves.
  ASSERT_EQ(Call("DELETE", "/app/v1/services/train", json(), "bob").status, 200);
  ASSERT_TRUE(WaitState("more", "STABLE", 30s, "alice"));
  WaitFor("the third gang to progress", 10s,
          [&] { return lines("alice", "more", "worker-1") > 2; });
  EXPECT_GT(lines("alice", "train", "worker-0"), 0);
}

TEST_F(ServerTest, BadRequestsGetClearErrors) {
  StartServer();
  auto diag = [](const Reply& r) { return r.body.value("diagnostics", std::string()); };
  Reply r = Call("POST", "/app/v1/services", json::parse(R"({"name": "x", "version": "1",
      "components": [{"name": "c", "number_of_containers": "two", "launch_command": "true",
      "resource": {"cpus": 1, "memory": "64"}}]})"));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(diag(r).find("components[0].number_of_containers"), std::string::npos) << r.text;
  // Not JSON at all.
  httplib::Client c("127.0.0.1", server_->port());
  c.set_bearer_token_auth(server_->Token("alice").c_str());
  auto raw = c.Post("/app/v1/services", "{\"name\": ", "application/json");
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->status, 400);
  EXPECT_NE(raw->body.find("not valid JSON"), std::string::npos) << raw->body;
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("ok", 1)).status, 202);
  r = Call("PUT", "/app/v1/services/ok", {{"state", "PAUSED"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(diag(r).find("state"), std::string::npos);
  r = Call("PUT", "/app/v1/services/ok", {{"color", "blue"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(diag(r).find("\"color\""), std::string::npos);
  r = Call("PUT", "/app/v1/services/ok/components/sleeper", {{"number_of_containers", "3"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(diag(r).find("number_of_containers"), std::string::npos);
  r = Call("PUT", "/app/v1/services/ok/components/sleeper", {{"number_of_containers", -2}});
  EXPECT_EQ(r.status, 400);
  r = Call("PUT", "/app/v1/services/ok", {{"lifetime", "soon"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(diag(r).find("lifetime"), std::string::npos);
  r = Call("GET", "/app/v1/services/nope");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(diag(r), "assembly nope not found");
  r = Call("GET", "/no/such/path");
  EXPECT_EQ(r.status, 404);
  auto patch = c.Patch("/app/v1/services/ok", "{}", "application/json");
  ASSERT_TRUE(patch);
  EXPECT_EQ(patch->status, 405);
  EXPECT_EQ(patch->get_header_value("Allow"), "GET, PUT, DELETE");
  // The server is still fine and nothing was stored for the bad ones.
  EXPECT_EQ(Call("GET", "/app/v1/services").body.size(), 1u);
  EXPECT_EQ(Call("GET", "/healthz", json(), "").status, 200);
  EXPECT_EQ(Call("GET", "/app/v1/services/version", json(), "").body["api"], "v1");
  Reply metrics = Call("GET", "/metrics", json(), "");
  EXPECT_NE(metrics.text.find("tarn_http_requests_total{method=\"PUT\",code=\"400\"}"),
            std::string::npos);
  EXPECT_EQ(Call("GET", "/tarn/v1/nodes").body[0]["name"], "node-1");
  EXPECT_EQ(Call("GET", "/tarn/v1/queues").body[0]["name"], "default");
}

TEST_F(ServerTest, RestartedServerAdoptsItsInstances) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("keep", 3)).status, 202);
  ASSERT_TRUE(WaitState("keep", "STABLE"));
  Reply before = Call("GET", "/app/v1/services/keep");
  auto live_before = WaitLive(3);
  server_->Kill9();
  EXPECT_EQ(LiveInstances(state_), live_before) << "instances outlive the server";
  // While the server is down, sleeper-2's workload dies.
  for (const auto& [pid, key] : LivePids(state_)) {
    if (key == "alice/keep/sleeper-2") ::kill(pid, SIGKILL);
  }
  ASSERT_TRUE(server_->Start()) << server_->log();
  WaitFor("sleeper-2 to be restarted", 20s, [&] {
    Reply s = Call("GET", "/app/v1/services/keep");
    return s.body["state"] == "STABLE" && s.body["components"][0]["containers"][2]["restarts"] == 1;
  });
  Reply after = Call("GET", "/app/v1/services/keep");
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(after.body["components"][0]["containers"][k]["id"],
              before.body["components"][0]["containers"][k]["id"])
        << "adopted, not restarted";
    EXPECT_EQ(after.body["components"][0]["containers"][k]["restarts"], 0);
  }
  const json& restarted = after.body["components"][0]["containers"][2];
  EXPECT_NE(restarted["id"], before.body["components"][0]["containers"][2]["id"]);
  // sh -c reports its killed child as 128 + 9.
  // (then sh's own last word on it: "Killed")
  EXPECT_EQ(restarted["last_exit"].get<std::string>().rfind("exited with code 137", 0), 0u)
      << restarted.dump();
  EXPECT_EQ(WaitLive(3), live_before);
}

// Each instance has its own address: two instances bind the same port, each on its own.
TEST_F(ServerTest, InstancesBindTheSamePortOnTheirOwnAddresses) {
  StartServer();
  json a = {
      {"name", "web"},
      {"version", "1"},
      {"components",
       json::array(
           {{{"name", "www"},
             {"number_of_containers", 2},
             {"launch_command", "exec /usr/bin/python3 -m http.server 8000 --bind $TARN_IP"},
             {"resource", {{"cpus", 1}, {"memory", "128"}}},
             {"readiness_check",
              {{"type", "HTTP"}, {"properties", {{"url", "http://${THIS_HOST}:8000/"}}}}}}})}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  ASSERT_TRUE(WaitState("web", "STABLE", 60s));
  Reply s = Call("GET", "/app/v1/services/web");
  std::set<std::string> ips;
  for (const json& c : s.body["components"][0]["containers"]) {
    std::string ip = c["ip"];
    ips.insert(ip);
    httplib::Client client(ip, 8000);
    auto r = client.Get("/");
    ASSERT_TRUE(r) << "nothing answers on " << ip << ":8000";
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_EQ(ips.size(), 2u);
}

// `dig` against the server's DNS: names follow instances, as YARN Registry DNS names them.
TEST_F(ServerTest, DnsAnswersForInstancesAndFollowsFlexes) {
  if (std::system("command -v dig >/dev/null 2>&1") != 0) GTEST_SKIP() << "dig is not installed";
  StartServer();
  ASSERT_GT(server_->dns_port(), 0) << server_->log();
  auto dig = [&](const std::string& args) {
    CommandResult r;
    const std::string out = dir_ + "/dig.out";
    std::string cmd = "dig @127.0.0.1 -p " + std::to_string(server_->dns_port()) +
                      " +norec +time=2 +tries=1 " + args + " > " + out + " 2>&1";
    r.exit_code = std::system(cmd.c_str());
    r.out = ReadAll(out);
    return r;
  };
  json a = Sleeper("dns", 2);
  a["components"][0]["configuration"] = {{"properties", {{"tarn.ports", "grpc:2222"}}}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  ASSERT_TRUE(WaitState("dns", "STABLE"));
  Reply s = Call("GET", "/app/v1/services/dns");
  const std::string ip0 = s.body["components"][0]["containers"][0]["ip"];
  const std::string ip1 = s.body["components"][0]["containers"][1]["ip"];

  CommandResult r = dig("sleeper-0.dns.alice.tarn A");
  EXPECT_NE(r.out.find("status: NOERROR"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" aa"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sleeper-0.dns.alice.tarn. 5\tIN\tA\t" + ip0), std::string::npos) << r.out;
  r = dig("+short sleeper.dns.alice.tarn A");
  EXPECT_NE(r.out.find(ip0), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(ip1), std::string::npos) << r.out;
  r = dig("+short _grpc._tcp.sleeper.dns.alice.tarn SRV");
  EXPECT_NE(r.out.find("2222 sleeper-1.dns.alice.tarn."), std::string::npos) << r.out;
  r = dig("+short -x " + ip1);
  EXPECT_EQ(r.out, "sleeper-1.dns.alice.tarn.\n");
  r = dig("nobody.dns.alice.tarn A");
  EXPECT_NE(r.out.find("status: NXDOMAIN"), std::string::npos) << r.out;
  r = dig("example.com A");
  EXPECT_NE(r.out.find("status: REFUSED"), std::string::npos) << r.out;

  ASSERT_EQ(
      Call("PUT", "/app/v1/services/dns/components/sleeper", {{"number_of_containers", 3}}).status,
      200);
  ASSERT_TRUE(WaitState("dns", "STABLE"));
  WaitFor("sleeper-2's name", 10s, [&] {
    return dig("+short sleeper-2.dns.alice.tarn A").out.rfind(range_prefix_ + ".", 0) == 0;
  });
  ASSERT_EQ(
      Call("PUT", "/app/v1/services/dns/components/sleeper", {{"number_of_containers", 1}}).status,
      200);
  WaitFor("sleeper-1 and sleeper-2 to lose their names", 20s, [&] {
    return dig("sleeper-1.dns.alice.tarn A").out.find("status: NXDOMAIN") != std::string::npos &&
           dig("sleeper-2.dns.alice.tarn A").out.find("status: NXDOMAIN") != std::string::npos;
  });
  EXPECT_EQ(dig("+short sleeper.dns.alice.tarn A").out, ip0 + "\n");
  Reply metrics = Call("GET", "/metrics", json(), "");
  EXPECT_NE(metrics.text.find("tarn_dns_queries_total{rcode=\"NXDOMAIN\",listener=\"127.0.0.1:"),
            std::string::npos)
      << metrics.text;
}

TEST_F(ServerTest, ADnsPortInUseIsAClearError) {
  StartServer();
  const std::string taken = "127.0.0.1:" + std::to_string(server_->dns_port());
  CommandResult r = RunTarn({"server", "--listen", "127.0.0.1:0", "--dns", taken, "--state-dir",
                             dir_ + "/second", "--config", config_},
                            {}, dir_, 30s);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--dns " + taken + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("choose another with --dns HOST:PORT"), std::string::npos) << r.err;
}

// A program in a container resolves its peers through the ordinary system resolver
// (getaddrinfo in Python's socket module, glibc's getent) and talks to them over TCP on the
// same port number, each on its own address. As root the answers come from tarn's DNS
// server on port 53 of the range's reserved address: its query counter rises, and the
// container's /etc/hosts holds no tarn name.
TEST_F(ServerTest, ContainersResolveEachOtherThroughTheSystemResolver) {
  const std::string script = dir_ + "/peer.py";
  {
    std::ofstream f(script);
    f << R"(import os, socket, sys, time
me = int(os.environ["TARN_INDEX"])
other = "peer-%d.talk.alice.tarn" % (1 - me)
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((os.environ["TARN_IP"], 7000))
server.listen(4)
deadline = time.time() + 30
while True:
    try:
        address = socket.getaddrinfo(other, 7000, socket.AF_INET, socket.SOCK_STREAM)[0][4]
        conn = socket.create_connection(address, timeout=5)
        break
    except OSError:
        if time.time() > deadline: raise
        time.sleep(0.1)
conn.sendall(("hello from %d" % me).encode())
conn.close()
peer, _ = server.accept()
got = peer.recv(100).decode()
short = socket.gethostbyname("peer-%d" % (1 - me))
print("resolved %s at %s:%d, short name at %s, got '%s'" % (other, address[0], address[1], short, got))
print("tarn names in /etc/hosts:", ".tarn" in open("/etc/hosts").read())
sys.stdout.flush()
os.execvp("sleep", ["sleep", "1000"])
)";
  }
  ::chmod(script.c_str(), 0644);
  StartServer();
  json a = {{"name", "talk"},
            {"version", "1"},
            {"components", json::array({{{"name", "peer"},
                                         {"number_of_containers", 2},
                                         {"launch_command", "exec /usr/bin/python3 " + script},
                                         {"resource", {{"cpus", 1}, {"memory", "128"}}}}})}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  ASSERT_TRUE(WaitState("talk", "STABLE", 60s));
  Reply s = Call("GET", "/app/v1/services/talk");
  const std::string names = s.body.value("name_resolution", "");
  const std::string resolver = range_prefix_ + ".0.1:53";
  EXPECT_NE(names.find("/etc/resolv.conf names tarn's DNS at " + resolver), std::string::npos)
      << names;
  std::vector<std::string> ips;
  for (const json& c : s.body["components"][0]["containers"]) ips.push_back(c["ip"]);
  ASSERT_EQ(ips.size(), 2u);
  for (int me = 0; me < 2; ++me) {
    const std::string log = state_ + "/shims/alice/talk/peer-" + std::to_string(me) + "/stdout.log";
    std::string out;
    WaitFor("peer-" + std::to_string(me) + " to talk", 30s, [&] {
      out = ReadAll(log);
      return out.find("tarn names in /etc/hosts") != std::string::npos;
    });
    const std::string other_ip = ips[1 - me];
    EXPECT_NE(out.find("resolved peer-" + std::to_string(1 - me) + ".talk.alice.tarn at " +
                       other_ip + ":7000, short name at " + other_ip + ", got 'hello from " +
                       std::to_string(1 - me) + "'"),
              std::string::npos)
        << out << ReadAll(state_ + "/shims/alice/talk/peer-" + std::to_string(me) + "/stderr.log");
    EXPECT_NE(out.find("tarn names in /etc/hosts: False"), std::string::npos) << out;
  }
  // The answers came from tarn's DNS on the reserved address.
  Reply metrics = Call("GET", "/metrics", json(), "");
  const std::string sample =
      "tarn_dns_queries_total{rcode=\"NOERROR\",listener=\"" + resolver + "\"} ";
  const size_t at = metrics.text.find(sample);
  ASSERT_NE(at, std::string::npos) << metrics.text;
  EXPECT_GE(std::stoi(metrics.text.substr(at + sample.size())), 4) << metrics.text;

  // Asking for resolv.conf when its address is taken (by this server) is a clear error.
  json second = {{"address_range", range_}, {"container_names", "resolv-conf"}};
  std::ofstream(dir_ + "/second.json") << second.dump();
  CommandResult r = RunTarn({"server", "--listen", "127.0.0.1:0", "--dns", "", "--state-dir",
                             dir_ + "/second", "--config", dir_ + "/second.json"},
                            {}, dir_, 30s);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("container_names \"resolv-conf\": tarn's DNS cannot listen on " + resolver),
            std::string::npos)
      << r.err;
}

// Where tarn cannot serve DNS on port 53 (or is told not to), each container's /etc/hosts
// carries its assembly's names, rewritten in place as instances come and go.
TEST_F(ServerTest, HostsFilesFollowFlexes) {
  WriteConfig({{"container_names", "hosts"}});
  StartServer();
  json a = Sleeper("hosts", 2);
  a["components"][0]["launch_command"] =
      "getent hosts sleeper-1.hosts.alice.tarn; until getent hosts sleeper-2 >/dev/null; do "
      "sleep 0.1; done; echo found sleeper-2; while getent hosts sleeper-1 >/dev/null; do sleep "
      "0.1; done; echo sleeper-1 gone; exec sleep 1000";
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  ASSERT_TRUE(WaitState("hosts", "STABLE"));
  Reply s = Call("GET", "/app/v1/services/hosts");
  EXPECT_NE(s.body.value("name_resolution", "").find("each container's /etc/hosts"),
            std::string::npos)
      << s.text;
  const std::string ip1 = s.body["components"][0]["containers"][1]["ip"];
  const std::string log = state_ + "/shims/alice/hosts/sleeper-0/stdout.log";
  WaitFor("sleeper-0 to see sleeper-1", 10s, [&] {
    const std::string out = ReadAll(log);
    const size_t line = out.find(ip1 + " ");  // getent pads the address to 15 characters
    return line != std::string::npos &&
           out.find("sleeper-1.hosts.alice.tarn sleeper-1\n", line) != std::string::npos;
  });
  ASSERT_EQ(Call("PUT", "/app/v1/services/hosts/components/sleeper", {{"number_of_containers", 3}})
                .status,
            200);
  WaitFor("sleeper-0 to find sleeper-2", 20s,
          [&] { return ReadAll(log).find("found sleeper-2\n") != std::string::npos; });
  ASSERT_EQ(Call("PUT", "/app/v1/services/hosts/components/sleeper", {{"number_of_containers", 1}})
                .status,
            200);
  WaitFor("sleeper-0 to lose sleeper-1", 20s,
          [&] { return ReadAll(log).find("sleeper-1 gone\n") != std::string::npos; });
  // The machine's own /etc/hosts is untouched.
  EXPECT_EQ(ReadAll("/etc/hosts").find(".tarn"), std::string::npos);
}

TEST_F(ServerTest, StatusSaysWhenNamesDoNotResolveInContainers) {
  WriteConfig({{"container_names", "none"}});
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("plain", 1)).status, 202);
  ASSERT_TRUE(WaitState("plain", "STABLE"));
  CommandResult r = RunTarn({"status", "plain"}, server_->CliEnv("alice"), dir_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("names: names do not resolve through the system resolver (container_names "
                       "is \"none\"); programs must ask tarn's DNS server at 127.0.0.1:"),
            std::string::npos)
      << r.out;
}

// A parameter-server training cluster as an assembly: the workers find the ps by its DNS
// name from TF_CONFIG (through the system resolver inside their containers), the ps binds
// its own address, the chief exports into the assembly's shared directory, and the workers
// end SUCCEEDED while the ps keeps serving.
TEST_F(ServerTest, ATrainingClusterFindsItsPsByNameAndExports) {
  StartServer();
  // By name, as users write it: instances find tarn's own binaries first on their PATH.
  const std::string train = std::string("tarn-train") +
                            " --model mlp --train_limit 3000 --threads 1"
                            " --export_base $TARN_SHARED_DIR/models"
                            " --checkpoint_dir $TARN_SHARED_DIR/checkpoints";
  auto role = [](const std::string& r) {
    return json{{"properties", {{"tarn.tf.role", r}, {"tarn.ports", "grpc:2222"}}}};
  };
  json a = {
      {"name", "train"},
      {"version", "1"},
      {"configuration", {{"env", {{"OPENBLAS_NUM_THREADS", "1"}}}}},
      {"components",
       json::array({{{"name", "ps"},
                     {"number_of_containers", 1},
                     {"launch_command", train},
                     {"resource", {{"cpus", 1}, {"memory", "1Gi"}}},
                     {"configuration", role("ps")},
                     {"readiness_check", {{"type", "PORT"}, {"properties", {{"port", "2222"}}}}}},
                    {{"name", "worker"},
                     {"number_of_containers", 2},
                     {"dependencies", json::array({"ps"})},
                     {"restart_policy", "ON_FAILURE"},
                     {"launch_command", train},
                     {"resource", {{"cpus", 1}, {"memory", "1Gi"}}},
                     {"configuration", role("worker")}}})}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  std::string worker_state;
  WaitFor("both workers to succeed", 120s, [&] {
    Reply r = Call("GET", "/app/v1/services/train");
    for (const json& c : r.body.value("components", json::array())) {
      if (c.value("name", "") == "worker") worker_state = c.value("state", "");
    }
    return worker_state == "SUCCEEDED" || worker_state == "FAILED";
  });
  const std::string logs = state_ + "/shims/alice/train/";
  const std::string chief = ReadAll(logs + "worker-0/stdout.log");
  ASSERT_EQ(worker_state, "SUCCEEDED")
      << chief << ReadAll(logs + "worker-0/stderr.log") << ReadAll(logs + "worker-1/stderr.log")
      << ReadAll(logs + "ps-0/stdout.log") << ReadAll(logs + "ps-0/stderr.log");
  EXPECT_NE(chief.find("worker 0: initialised the parameter servers"), std::string::npos) << chief;
  const std::string ps = ReadAll(logs + "ps-0/stdout.log");
  Reply s = Call("GET", "/app/v1/services/train");
  const std::string ps_ip = s.body["components"][0]["containers"][0]["ip"];
  EXPECT_NE(ps.find("serving 101770 parameters on " + ps_ip + ":2222"), std::string::npos) << ps;
  EXPECT_NE(ps.find("worker 1 joined"), std::string::npos) << ps;
  const std::string shared = s.body.value("shared_dir", "");
  EXPECT_TRUE(std::filesystem::exists(shared + "/models/fmnist/1/model.pt")) << shared;
  EXPECT_FALSE(ReadAll(shared + "/models/fmnist/1/meta.json").empty());
  EXPECT_EQ(State("train"), "STABLE") << "the ps keeps serving";
}

// Crash points in the code: the server dies exactly there, and a restart repairs it.
TEST_F(ServerTest, NamedCrashPointsLoseAndDuplicateNothing) {
  for (const std::string point : {"create-committed", "launch-committed:2", "flex-committed"}) {
    SCOPED_TRACE(point);
    server_.reset();
    StartServer({"TARN_CRASH_AT=" + point});
    const std::string name = "cp" + std::to_string(std::hash<std::string>()(point) % 1000);
    Reply r = Call("POST", "/app/v1/services", Sleeper(name, 2));
    if (point == "flex-committed") {
      ASSERT_EQ(r.status, 202);
      ASSERT_TRUE(WaitState(name, "STABLE"));
      Call("PUT", "/app/v1/services/" + name + "/components/sleeper",
           {{"number_of_containers", 4}});
    }
    int status = 0;
    ASSERT_TRUE(server_->WaitExit(10s, &status)) << "the crash point was not reached";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    server_ = std::make_unique<ServerProcess>(state_, config_);
    ASSERT_TRUE(server_->Start()) << server_->log();
    // create-committed: committed before the answer, so it exists; it runs after restart.
    EXPECT_EQ(Call("GET", "/healthz", json(), "").status, 200) << server_->log();
    ASSERT_TRUE(WaitState(name, "STABLE"));
    int want = point == "flex-committed" ? 4 : 2;
    WaitFor("every instance once", 20s, [&] {
      auto live = LiveInstances(state_);
      int n = 0;
      for (const auto& [k, count] : live) {
        if (k.rfind("alice/" + name + "/", 0) != 0) continue;
        EXPECT_EQ(count, 1) << k << " runs twice";
        n += count;
      }
      return n == want;
    });
    ASSERT_EQ(Call("DELETE", "/app/v1/services/" + name).status, 200);
    WaitFor("destroyed", 20s,
            [&] { return Call("GET", "/app/v1/services/" + name).status == 404; });
  }
}

// kill -9 at random moments while launches and flexes are in flight, many times.
TEST_F(ServerTest, RandomKillNineDuringLaunchesAndFlexes) {
  std::mt19937 rng(12345);
  // Room for every instance the rounds may ask for (30 assemblies of up to 3): which
  // requests a kill cuts off depends on timing, and an instance left waiting for resources
  // would say nothing of crash safety.
  WriteConfig(
      {{"nodes",
        json::array({{{"name", "node-1"}, {"vcores", 128}, {"memory_mb", 65536}, {"gpus", 0}}})}});
  StartServer();
  // alice's token is made now, not by the first call of a burst that a kill may cut short
  // (it is kept in the server's state across the kills).
  ASSERT_FALSE(server_->Token("alice").empty());
  std::map<std::string, int> want;  // assembly -> instances it should have
  int next = 0;
  int unanswered = 0;  // requests cut off by the kill: the test must hit work in flight
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // A burst of work, then kill -9 after a random delay inside it.
    const auto delay = std::chrono::milliseconds(rng() % 120);
    std::thread work([&] {
      for (int k = 0; k < 3; ++k) {
        std::string name = "r" + std::to_string(next++);
        int n = 1 + static_cast<int>(rng() % 3);
        Reply r = Call("POST", "/app/v1/services", Sleeper(name, n));
        if (r.status == 202) want[name] = n;
        if (r.status == 0) {
          // No answer: the server died before acknowledging; it may or may not exist.
          want[name] = -n;
          ++unanswered;
        }
      }
      for (auto& [name, n] : want) {
        if (n <= 0 || rng() % 2) continue;
        int m = 1 + static_cast<int>(rng() % 3);
        Reply r = Call("PUT", "/app/v1/services/" + name + "/components/sleeper",
                       {{"number_of_containers", m}});
        if (r.status == 200) n = m;
        if (r.status == 0) {
          n = -100 - m;  // unknown: either
          ++unanswered;
        }
      }
    });
    std::this_thread::sleep_for(delay);
    server_->Kill9();
    work.join();
    ASSERT_TRUE(server_->Start()) << server_->log();
    // Resolve the unknowns from what the server says now: whatever it has must be whole.
    for (auto& [name, n] : want) {
      if (n >= 0) continue;
      Reply s = Call("GET", "/app/v1/services/" + name);
      if (s.status == 404 && n > -100) {
        n = 0;
        continue;
      }
      ASSERT_EQ(s.status, 200) << name << " was acknowledged but is lost";
      n = s.body["components"][0]["number_of_containers"].get<int>();
    }
  }
  EXPECT_GE(unanswered, 1) << "no kill landed while requests were in flight";
  RecordProperty("unanswered_requests", unanswered);
  for (auto& [name, n] : want) {
    if (n == 0) continue;
    ASSERT_TRUE(WaitState(name, "STABLE")) << name;
    Reply s = Call("GET", "/app/v1/services/" + name);
    EXPECT_EQ(s.body["components"][0]["number_of_containers"].get<int>(), n) << name;
  }
  WaitFor("exactly the wanted instances, once each", 30s, [&] {
    auto live = LiveInstances(state_);
    std::map<std::string, int> per_assembly;
    for (const auto& [k, count] : live) {
      if (count != 1) return false;
      per_assembly[k.substr(6, k.find('/', 6) - 6)] += 1;
    }
    for (const auto& [name, n] : want) {
      if (per_assembly[name] != n) return false;
    }
    return true;
  });
  for (const auto& [k, count] : LiveInstances(state_)) EXPECT_EQ(count, 1) << k;
}

// The CLI against a real server, as a user types it.
TEST_F(ServerTest, CliDrivesARealServer) {
  StartServer();
  // Over the Unix socket, root acting as alice ($TARN_USER means --as for root).
  const std::vector<std::string> env = server_->CliEnv("alice");
  const std::string sleeper = std::string(TARN_SOURCE_DIR) + "/examples/sleeper/sleeper.yaml";
  CommandResult r = RunTarn({"launch", "--wait", "--timeout", "60", sleeper}, env, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = RunTarn({"status", "sleeper-service"}, env, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sleeper-1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("READY"), std::string::npos) << r.out;
  r = RunTarn({"flex", "sleeper-service", "sleeper", "3"}, env, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("from 2 to 3"), std::string::npos) << r.out;
  r = RunTarn({"list"}, env, dir_);
  EXPECT_NE(r.out.find("sleeper-service"), std::string::npos) << r.out;
  r = RunTarn({"status", "sleeper-service"}, server_->CliEnv("bob"), dir_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tarn: assembly sleeper-service not found (HTTP 404)\n");
  // Over TCP with alice's token (no acting as anyone: the token says who).
  const std::vector<std::string> tcp = {"TARN_ADDR=127.0.0.1:" + std::to_string(server_->port()),
                                        "TARN_TOKEN=" + server_->Token("alice")};
  r = RunTarn({"status", "sleeper-service"}, tcp, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sleeper-2"), std::string::npos) << r.out;
  r = RunTarn({"status", "sleeper-service"}, {tcp[0], "TARN_TOKEN=tarn_nonsense"}, dir_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tarn: the bearer token is malformed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(HTTP 401)"), std::string::npos) << r.err;
  r = RunTarn({"events", "sleeper-service"}, env, dir_);
  EXPECT_NE(r.out.find("FLEX"), std::string::npos) << r.out;
  r = RunTarn({"nodes"}, env, dir_);
  EXPECT_NE(r.out.find("node-1"), std::string::npos) << r.out;
  r = RunTarn({"destroy", "sleeper-service"}, env, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(ServerTest, LogsFollowStreamsUntilTheRunEnds) {
  StartServer();
  json a = {
      {"name", "talk"},
      {"version", "1"},
      {"components",
       json::array({{{"name", "t"},
                     {"number_of_containers", 1},
                     {"restart_policy", "NEVER"},
                     {"launch_command", "for i in 1 2 3 4 5; do echo line $i; sleep 0.3; done"},
                     {"resource", {{"cpus", 1}, {"memory", "64"}}}}})}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  WaitFor("t-0 to run", 20s, [&] {
    Reply s = Call("GET", "/app/v1/services/talk");
    return s.body["components"][0]["containers"][0]["state"] == "READY";
  });
  const std::vector<std::string> env = server_->CliEnv("alice");
  auto t0 = std::chrono::steady_clock::now();
  CommandResult r = RunTarn({"logs", "-f", "talk", "t-0"}, env, dir_, 30s);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("line 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("line 5\n"), std::string::npos) << r.out;
  EXPECT_GT(seconds, 0.5) << "it followed the run rather than printing what was there";
  EXPECT_TRUE(WaitState("talk", "SUCCEEDED"));
  // The streamed answers are counted with the status they were sent with.
  httplib::Client cl("127.0.0.1", server_->port());
  auto metrics = cl.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->body.find("code=\"-1\""), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("tarn_http_requests_total{method=\"GET\",code=\"200\"}"),
            std::string::npos)
      << metrics->body;
}

TEST_F(ServerTest, RunInTheForegroundUntilTheAssemblyFinishes) {
  const std::string ok = dir_ + "/job.json";
  json job = {{"name", "job"},
              {"version", "1"},
              {"components", json::array({{{"name", "step"},
                                           {"number_of_containers", 2},
                                           {"restart_policy", "NEVER"},
                                           {"launch_command", "echo hello from $TARN_INSTANCE"},
                                           {"resource", {{"cpus", 1}, {"memory", "64"}}}}})}};
  FILE* f = std::fopen(ok.c_str(), "w");
  std::fputs(job.dump().c_str(), f);
  std::fclose(f);
  CommandResult r = RunTarn({"run", ok, "--timeout", "60", "--user", "alice"}, {}, dir_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("step-1 | hello from step-1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SUCCEEDED"), std::string::npos) << r.out;

  job["components"][0]["launch_command"] = "echo failing >&2; exit 4";
  const std::string bad = dir_ + "/bad.json";
  f = std::fopen(bad.c_str(), "w");
  std::fputs(job.dump().c_str(), f);
  std::fclose(f);
  r = RunTarn({"run", bad, "--timeout", "60", "--user", "alice"}, {}, dir_);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAILED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exited with code 4"), std::string::npos) << r.out;

  // A timeout ends it with 124 and stops everything.
  job["components"][0]["launch_command"] = "sleep 1000";
  const std::string slow = dir_ + "/slow.json";
  f = std::fopen(slow.c_str(), "w");
  std::fputs(job.dump().c_str(), f);
  std::fclose(f);
  const std::string run_state = dir_ + "/run-state";
  r = RunTarn({"run", slow, "--timeout", "2", "--user", "alice", "--state-dir", run_state}, {},
              dir_);
  EXPECT_EQ(r.exit_code, 124) << r.out << r.err;
  EXPECT_TRUE(LiveInstances(run_state).empty());
}

// ---- The API's HTTP server: slow clients, large bodies, many clients, snapshot reads ----

TEST_F(ServerTest, HalfOpenConnectionsLeaveTheApiAnsweringAndCloseAtTheHeaderDeadline) {
  WriteConfig({{"http", {{"header_timeout_ms", 2000}}}});
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("calm", 1)).status, 202);
  ASSERT_TRUE(WaitState("calm", "STABLE"));
  // A slowloris: the request line and a header, then nothing, on 200 connections.
  std::vector<std::unique_ptr<tarn::http::testing::RawClient>> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<tarn::http::testing::RawClient>(server_->port()));
    ASSERT_TRUE(slow.back()->connected()) << i;
    ASSERT_TRUE(
        slow.back()->Send("GET /app/v1/services/calm HTTP/1.1\r\n"
                          "Host: x\r\n"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  Reply status = Call("GET", "/app/v1/services/calm");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(status.status, 200);
  EXPECT_EQ(status.body.value("state", ""), "STABLE");
  EXPECT_LT(took, 2s) << "the status request waited behind 200 half-open connections";
  int closed = 0;
  for (auto& c : slow) closed += c->ClosedByPeer();
  EXPECT_EQ(closed, 0) << "closed before the 2 s header deadline";
  std::this_thread::sleep_for(2s + 2s);
  closed = 0;
  for (auto& c : slow) closed += c->ClosedByPeer();
  EXPECT_EQ(closed, 200) << "the server must close them at the header deadline";
  Reply metrics = Call("GET", "/metrics", json(), "");
  EXPECT_NE(metrics.text.find("tarn_http_open_connections "), std::string::npos) << metrics.text;
}

TEST_F(ServerTest, ABodyOverTheLimitGets413ThatTheStillSendingClientReads) {
  WriteConfig({{"http", {{"max_body_bytes", 1 << 20}}}});
  StartServer();
  const std::string token = server_->Token("alice");
  tarn::http::testing::RawClient c(server_->port());
  const std::string body(8u << 20, ' ');
  ASSERT_TRUE(c.Send("POST /app/v1/services HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
                     "\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n"));
  EXPECT_TRUE(c.Send(body)) << "reset while sending the body: the answer is lost";
  ::shutdown(c.fd(), SHUT_WR);
  const std::string answer = c.ReadAll(10s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 413 ", 0), 0u) << answer.substr(0, 400);
  EXPECT_NE(answer.find("{\"diagnostics\":\"request body is over the limit of 1048576 bytes\"}"),
            std::string::npos)
      << answer.substr(0, 400);
  // Nothing was stored.
  Reply list = Call("GET", "/app/v1/services");
  EXPECT_EQ(list.status, 200);
  EXPECT_TRUE(list.body.empty()) << list.text;
}

TEST_F(ServerTest, SixtyFourClientsReadStatusForEightSecondsWithoutAnError) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleeper("busy", 2)).status, 202);
  ASSERT_TRUE(WaitState("busy", "STABLE"));
  const std::string token = server_->Token("alice");
  std::atomic<int64_t> answered{0}, failed{0};
  std::atomic<bool> stop{false};
  std::string first_failure;
  std::mutex mu;
  std::vector<std::thread> clients;
  for (int i = 0; i < 64; ++i) {
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", server_->port());  // one kept-alive connection each
      c.set_keep_alive(true);
      c.set_read_timeout(10);
      c.set_bearer_token_auth(token.c_str());
      while (!stop) {
        auto r = c.Get("/app/v1/services/busy");
        const bool ok = r && r->status == 200 &&
                        json::parse(r->body, nullptr, false).value("state", "") == "STABLE";
        ++(ok ? answered : failed);
        if (!ok) {
          std::lock_guard lock(mu);
          if (first_failure.empty()) {
            first_failure = r ? "HTTP " + std::to_string(r->status) + ": " + r->body
                              : "no answer: " + httplib::to_string(r.error());
          }
        }
      }
    });
  }
  std::this_thread::sleep_for(8s);
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0) << first_failure;
  EXPECT_GT(answered.load(), 64 * 8) << "fewer than one answer per client and second";
  RecordProperty("answered", static_cast<int>(answered.load()));
}

TEST_F(ServerTest, ReadsDuringABurstOfFlexesShowOnlyCommittedCounts) {
  StartServer();
  // A stopped assembly takes each flex at once (nothing to start), so the burst is fast.
  json a = Sleeper("burst", 1);
  a["state"] = "STOPPED";
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  const std::string token = server_->Token("alice");
  constexpr int kFlexes = 60;
  std::atomic<int> acknowledged{1};  // the newest count a PUT was answered 200 for
  std::atomic<int> in_flight{1};     // the count being written now
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, violations{0};
  std::string first_violation;
  std::mutex mu;
  auto violation = [&](const std::string& what) {
    ++violations;
    std::lock_guard lock(mu);
    if (first_violation.empty()) first_violation = what;
  };
  std::vector<std::thread> readers;
  // Lists too, which walk a whole snapshot while newer ones are published.
  readers.emplace_back([&] {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_bearer_token_auth(token.c_str());
    while (!done) {
      auto res = c.Get("/app/v1/services");
      const json list = res ? json::parse(res->body, nullptr, false) : json();
      if (!res || res->status != 200 || !list.is_array() || list.size() != 1 ||
          list[0].value("name", "") != "burst") {
        violation("GET /app/v1/services: " + (res ? res->body : std::string("no answer")));
      }
    }
  });
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      httplib::Client c("127.0.0.1", server_->port());
      c.set_bearer_token_auth(token.c_str());
      int last = 0;
      while (!done) {
        const int floor = acknowledged.load();  // acknowledged before this read began
        auto res = c.Get("/app/v1/services/burst");
        const int ceiling = in_flight.load();  // nothing past this was ever written
        if (!res || res->status != 200) {
          violation("GET failed");
          continue;
        }
        ++reads;
        const json body = json::parse(res->body, nullptr, false);
        const int n = body["components"][0]["number_of_containers"].get<int>();
        if (n < floor) {
          violation("read " + std::to_string(n) + " after " + std::to_string(floor) +
                    " was acknowledged");
        }
        if (n > ceiling) violation("read " + std::to_string(n) + ", never written");
        if (n < last)
          violation("went back from " + std::to_string(last) + " to " + std::to_string(n));
        last = n;
      }
    });
  }
  for (int n = 2; n <= kFlexes; ++n) {
    in_flight = n;
    Reply r =
        Call("PUT", "/app/v1/services/burst/components/sleeper", {{"number_of_containers", n}});
    ASSERT_EQ(r.status, 200) << r.text;
    acknowledged = n;
    // Read-your-write from the writer itself.
    Reply s = Call("GET", "/app/v1/services/burst");
    EXPECT_EQ(s.body["components"][0]["number_of_containers"], n);
  }
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(violations.load(), 0) << first_violation;
  EXPECT_GT(reads.load(), kFlexes);
  // What the readers saw last is what the store holds: a restarted server reads it back.
  server_->Kill9();
  ASSERT_TRUE(server_->Start()) << server_->log();
  Reply s = Call("GET", "/app/v1/services/burst");
  EXPECT_EQ(s.body["components"][0]["number_of_containers"], kFlexes) << s.text;
}

}  // namespace
