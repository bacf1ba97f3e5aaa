// Integration tests of the slurm backend: a real Slurm 22.05 (tests/slurm/cluster.sh: one
// slurmctld and two slurmd "nodes" at 127.0.1.1 and 127.0.1.2, 4 CPUs and 2 fake GPUs each)
// and a real `tarn server` process configured with {"backend": {"type": "slurm", ...}},
// driven over its REST API and CLI, checked against Slurm's own view (squeue, scancel) and
// tarn's DNS server (dig). Needs root and slurm-wlm (skipped with the reason otherwise);
// ctest label "root", one at a time (RESOURCE_LOCK slurm_cluster).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "server_process.h"
#include "tarn_process.h"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

using tarn::testing::CallApi;
using tarn::testing::ReadAll;
using tarn::testing::Reply;
using tarn::testing::ServerProcess;

// The workloads built with ASan hold far more memory than the example assembly's limits
// allow (as in demo_test): the release build runs the Fashion-MNIST test.
#ifdef TARN_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// Runs a shell command line (fixed text and paths made by the test); returns its stdout.
std::string Shell(const std::string& cmd, int* rc = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  if (rc != nullptr) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// One job of squeue as the test reads it (squeue's own format, not tarn's parser).
struct Job {
  std::string id, name, state;
};

class SlurmBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (slurmd, cgroups, namespaces)";
    if (std::system("command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 "
                    "&& command -v sbatch >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "slurm-wlm is not installed (scripts/setup installs it)";
    }
    char tmpl[] = "/tmp/tarn-slurm-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0711);
    cluster_ = dir_ + "/cluster";
    int rc = 0;
    std::string out;
    // A second try after a failed start (a daemon that did not come up in time on a busy
    // machine); both logs are kept.
    for (int attempt = 1; attempt <= 2; ++attempt) {
      const std::string log = dir_ + "/cluster-start-" + std::to_string(attempt) + ".log";
      out = Shell("TARN_SLURM_NODE_MEMORY_MB=" + std::to_string(node_memory_mb_) + " " +
                      std::string(TARN_SOURCE_DIR) + "/tests/slurm/cluster.sh start " + cluster_ +
                      " 2 2 2>" + log,
                  &rc);
      started_cluster_ = true;
      if (rc == 0) break;
      std::cerr << "slurm_backend_test: cluster.sh start failed:\n" << ReadAll(log);
      Shell(std::string(TARN_SOURCE_DIR) + "/tests/slurm/cluster.sh stop " + cluster_ +
            " >/dev/null 2>&1");
    }
    ASSERT_EQ(rc, 0) << "tests/slurm/cluster.sh start failed twice (logs above)";
    slurm_conf_ = cluster_ + "/slurm.conf";
    ASSERT_NE(out.find("export SLURM_CONF=" + slurm_conf_), std::string::npos) << out;
    shared_ = dir_ + "/shared";
    std::filesystem::create_directories(shared_);
    state_ = dir_ + "/state";
    range_lock_ = tarn::testing::LockAddressRange(&range_);
    ASSERT_GE(range_lock_, 0) << "no free test address range";
    WriteConfig(json::object());
  }

  // The server's config: the slurm backend on this test's cluster, plus `backend_extra`,
  // plus the top-level keys of `extra`.
  void WriteConfig(const json& backend_extra, const json& extra = json::object()) {
    json backend = {{"type", "slurm"},
                    {"slurm_conf", slurm_conf_},
                    {"shared_dir", shared_},
                    // Not the default 20000-29999: cluster.sh derives slurmd's ports from there.
                    {"port_range", "12000-12999"},
                    {"poll_interval_ms", 200}};
    for (auto it = backend_extra.begin(); it != backend_extra.end(); ++it) {
      backend[it.key()] = it.value();
    }
    json config = {{"restart", {{"initial_backoff_ms", 200}, {"max_backoff_ms", 2000}}},
                   {"probe_interval_ms", 200},
                   {"address_range", range_},
                   {"dns_upstream", json::array()},
                   {"backend", backend}};
    for (auto it = extra.begin(); it != extra.end(); ++it) config[it.key()] = it.value();
    config_ = dir_ + "/config.json";
    std::FILE* f = std::fopen(config_.c_str(), "w");
    std::fputs(config.dump(2).c_str(), f);
    std::fclose(f);
  }

  void TearDown() override {
    if (server_ && server_->pid() <= 0 && !server_->Start()) ADD_FAILURE() << "no restart";
    if (server_ && server_->pid() > 0) {
      Reply list = Call("GET", "/app/v1/services");
      if (list.status == 200) {
        for (const json& a : list.body) {
          const std::string path = "/app/v1/services/" + a["name"].get<std::string>();
          Call("DELETE", path);
          WaitFor(path + " to be destroyed", 60s, [&] { return Call("GET", path).status == 404; });
        }
      }
      EXPECT_TRUE(server_->Terminate()) << server_->log();
    }
    server_.reset();
    if (started_cluster_) {
      Shell(std::string(TARN_SOURCE_DIR) + "/tests/slurm/cluster.sh stop " + cluster_ +
            " >/dev/null 2>&1");
    }
    // Kept after a failure, with the server's and Slurm's logs, for whoever looks into it.
    if (!dir_.empty() && HasFailure()) std::cerr << "slurm_backend_test: kept " << dir_ << "\n";
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
    if (range_lock_ >= 0) ::close(range_lock_);
  }

  void StartServer() {
    server_ = std::make_unique<ServerProcess>(state_, config_);
    ASSERT_TRUE(server_->Start()) << server_->log();
  }

  Reply Call(const std::string& method, const std::string& path, const json& body = json()) {
    return CallApi(*server_, method, path, body);
  }

  bool WaitFor(const std::string& what, std::chrono::milliseconds timeout,
               const std::function<bool()>& done) {
    return tarn::testing::WaitFor(what, timeout, done, 100ms);
  }

  bool WaitState(const std::string& name, const std::string& state,
                 std::chrono::milliseconds timeout = 90s) {
    std::string last;
    bool ok = WaitFor(name + " to be " + state, timeout, [&] {
      Reply r = Call("GET", "/app/v1/services/" + name);
      last = r.text;
      return r.status == 200 && r.body.value("state", "") == state;
    });
    if (!ok) ADD_FAILURE() << "last: " << last << "\nserver log:\n" << server_->log();
    return ok;
  }

  // Every instance of `name` by its name, from tarn's status.
  std::map<std::string, json> Instances(const std::string& name) {
    std::map<std::string, json> out;
    Reply r = Call("GET", "/app/v1/services/" + name);
    if (r.status != 200) return out;
    for (const json& c : r.body["components"]) {
      for (const json& i : c["containers"]) out[i["component_instance_name"]] = i;
    }
    return out;
  }

  // squeue's own listing of every job (ended ones within MinJobAge included).
  std::vector<Job> Jobs() {
    std::vector<Job> out;
    std::stringstream in(Shell("SLURM_CONF=" + slurm_conf_ + " squeue -h -a -t all -o '%i|%j|%T'"));
    std::string line;
    while (std::getline(in, line)) {
      Job j;
      std::stringstream f(line);
      std::getline(f, j.id, '|');
      std::getline(f, j.name, '|');
      std::getline(f, j.state, '|');
      out.push_back(j);
    }
    return out;
  }
  // The tarn jobs of assembly `a` that run (or wait), by job name.
  std::map<std::string, std::string> LiveJobs(const std::string& a) {
    std::map<std::string, std::string> out;
    for (const Job& j : Jobs()) {
      if (j.name.rfind("tarn.alice." + a + ".", 0) != 0) continue;
      if (j.state == "RUNNING" || j.state == "PENDING") out[j.name] = j.id;
    }
    return out;
  }
  std::set<std::string> AllJobIds() {
    std::set<std::string> out;
    for (const Job& j : Jobs()) {
      if (j.name.rfind("tarn.alice.", 0) == 0) out.insert(j.id);
    }
    return out;
  }

  // The host pid of the process named `comm` that container `cid` runs; 0 when none.
  static int WorkloadPid(const std::string& cid, const std::string& comm) {
    for (auto& p : tarn::testing::WorkloadProcesses(comm)) {
      if (p.env["TARN_CONTAINER_ID"] == cid) return p.pid;
    }
    return 0;
  }

  std::string Dig(const std::string& name) {
    std::string out = Shell("dig @127.0.0.1 -p " + std::to_string(server_->dns_port()) +
                            " +short +time=2 +tries=1 " + name + " A");
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  static json Sleepers() {
    // 2 CPUs each: two instances fill a 4-CPU node, so the four land on both nodes.
    const std::string cmd =
        "echo \"ip=$TARN_IP gpus=$CUDA_VISIBLE_DEVICES uid=$(id -u)\"; exec sleep 1000";
    return {{"name", "sl"},
            {"version", "1"},
            {"components", json::array({{{"name", "a"},
                                         {"number_of_containers", 2},
                                         {"launch_command", cmd},
                                         {"resource", {{"cpus", 2}, {"memory", "128"}}}},
                                        {{"name", "b"},
                                         {"number_of_containers", 2},
                                         {"launch_command", cmd},
                                         {"resource",
                                          {{"cpus", 2},
                                           {"memory", "128"},
                                           {"additional", {{"yarn.io/gpu", {{"value", 1}}}}}}}}})}};
  }

  std::string dir_, cluster_, slurm_conf_, shared_, state_, config_, range_;
  int64_t node_memory_mb_ = 4096;  // each node's RealMemory
  int range_lock_ = -1;
  bool started_cluster_ = false;
  std::unique_ptr<ServerProcess> server_;
};

const std::map<std::string, std::string> kNodeAddr = {{"node1", "127.0.1.1"},
                                                      {"node2", "127.0.1.2"}};

// The whole life of an assembly on Slurm: STABLE on both nodes with the right addresses in
// status, DNS and the instances' own TARN_IP; logs; a job cancelled behind tarn's back is
// restarted by policy; flex up (pending with Slurm's reason) and down; kill -9 of the
// server adopts every job and submits none; stop and start.
TEST_F(SlurmBackendTest, AnAssemblyLivesOnSlurm) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Sleepers()).status, 202);
  ASSERT_TRUE(WaitState("sl", "STABLE"));

  // Addresses: tarn's status, its DNS and the instance's own TARN_IP agree with the node's
  // NodeAddr, and the four instances use both nodes.
  std::set<std::string> nodes;
  for (const auto& [name, i] : Instances("sl")) {
    const std::string node = i["bare_host"];
    const std::string ip = i["ip"];
    ASSERT_TRUE(kNodeAddr.count(node)) << name << " on \"" << node << "\": " << i.dump();
    nodes.insert(node);
    EXPECT_EQ(ip, kNodeAddr.at(node)) << name;
    EXPECT_EQ(Dig(name + ".sl.alice.tarn"), ip) << name;
    const std::string out_file = shared_ + "/alice/sl/" + name + "/stdout.log";
    WaitFor(name + " to print its address", 20s,
            [&] { return ReadAll(out_file).find("ip=") != std::string::npos; });
    EXPECT_NE(ReadAll(out_file).find("ip=" + ip + " "), std::string::npos) << ReadAll(out_file);
    if (name[0] == 'b') {  // one GPU from Slurm's GRES
      EXPECT_NE(ReadAll(out_file).find("gpus=0 "), std::string::npos) << ReadAll(out_file);
    }
    // alice has no account here: her jobs run as the local user, never as the server's root.
    EXPECT_NE(ReadAll(out_file).find("uid=65534\n"), std::string::npos) << ReadAll(out_file);
  }
  EXPECT_EQ(nodes.size(), 2u);
  std::map<std::string, std::string> live = LiveJobs("sl");
  EXPECT_EQ(live.size(), 4u);
  for (const char* n : {"a-0", "a-1", "b-0", "b-1"}) {
    EXPECT_TRUE(live.count(std::string("tarn.alice.sl.") + n + ".1")) << n;
  }

  // tarn logs shows the job's stdout.
  const std::vector<std::string> env = server_->CliEnv("alice");
  tarn::testing::CommandResult logs = tarn::testing::RunTarn({"logs", "sl", "a-0"}, env, dir_);
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("ip=" + Instances("sl")["a-0"]["ip"].get<std::string>()),
            std::string::npos)
      << logs.out;

  // scancel behind tarn's back: restarted by the restart policy, as a new job.
  const std::string old_job = live.at("tarn.alice.sl.a-0.1");
  ASSERT_EQ(std::system(("SLURM_CONF=" + slurm_conf_ + " scancel " + old_job).c_str()), 0);
  WaitFor("a-0 to run again as a new job", 60s, [&] {
    json i = Instances("sl")["a-0"];
    return i.value("state", "") == "READY" && i.value("id", "") == "alice_sl_a-0_2";
  });
  live = LiveJobs("sl");
  ASSERT_TRUE(live.count("tarn.alice.sl.a-0.2"));
  EXPECT_NE(live.at("tarn.alice.sl.a-0.2"), old_job);
  EXPECT_NE(Instances("sl")["a-0"]["last_exit"].get<std::string>().find("Slurm: CANCELLED"),
            std::string::npos)
      << Instances("sl")["a-0"].dump();
  ASSERT_TRUE(WaitState("sl", "STABLE"));

  // Flex up: both nodes are full, so a-2 waits in Slurm and says why.
  ASSERT_EQ(Call("PUT", "/app/v1/services/sl/components/a", {{"number_of_containers", 3}}).status,
            200);
  WaitFor("a-2 to wait for resources", 30s, [&] {
    return Instances("sl")["a-2"].value("diagnostics", "").find("Slurm: PENDING (Resources)") !=
           std::string::npos;
  });
  EXPECT_EQ(Instances("sl")["a-2"]["state"], "PENDING");
  EXPECT_TRUE(LiveJobs("sl").count("tarn.alice.sl.a-2.1"));
  // ... and down again: its job goes.
  ASSERT_EQ(Call("PUT", "/app/v1/services/sl/components/a", {{"number_of_containers", 2}}).status,
            200);
  WaitFor("a-2's job to go", 30s, [&] { return !LiveJobs("sl").count("tarn.alice.sl.a-2.1"); });
  // Flex b down: b-1's job ends; up: a new one.
  ASSERT_EQ(Call("PUT", "/app/v1/services/sl/components/b", {{"number_of_containers", 1}}).status,
            200);
  WaitFor("b-1's job to go", 30s, [&] { return !LiveJobs("sl").count("tarn.alice.sl.b-1.1"); });
  ASSERT_TRUE(WaitState("sl", "STABLE"));
  ASSERT_EQ(Call("PUT", "/app/v1/services/sl/components/b", {{"number_of_containers", 2}}).status,
            200);
  ASSERT_TRUE(WaitState("sl", "STABLE"));
  EXPECT_EQ(LiveJobs("sl").size(), 4u);

  // kill -9 of the server: the restarted one adopts every job and submits none.
  const std::map<std::string, std::string> before = LiveJobs("sl");
  const std::set<std::string> ids_before = AllJobIds();
  server_->Kill9();
  ASSERT_TRUE(server_->Start()) << server_->log();
  ASSERT_TRUE(WaitState("sl", "STABLE"));
  std::this_thread::sleep_for(2s);  // time for a wrong duplicate to show
  EXPECT_EQ(LiveJobs("sl"), before);
  EXPECT_EQ(AllJobIds(), ids_before) << "a restarted server submitted jobs";
  for (const auto& [name, i] : Instances("sl")) {
    EXPECT_EQ(Dig(name + ".sl.alice.tarn"), i["ip"].get<std::string>()) << name;
  }

  // Stop: every job ends; start: new jobs, STABLE again.
  ASSERT_EQ(Call("PUT", "/app/v1/services/sl", {{"state", "STOPPED"}}).status, 200);
  ASSERT_TRUE(WaitState("sl", "STOPPED"));
  WaitFor("every job to end", 30s, [&] { return LiveJobs("sl").empty(); });
  // Start is refused (409) until every instance's end has been seen.
  Reply started;
  WaitFor("start to be accepted", 30s, [&] {
    started = Call("PUT", "/app/v1/services/sl", {{"state", "STARTED"}});
    return started.status != 409;
  });
  ASSERT_EQ(started.status, 200) << started.text;
  ASSERT_TRUE(WaitState("sl", "STABLE"));
  EXPECT_EQ(LiveJobs("sl").size(), 4u);
}

// A tenant with an account here: its jobs are submitted as that account (Slurm lists them
// as its), run as it, and their directories are its alone; a link the job puts at its log's
// name is not followed by `tarn logs`.
TEST_F(SlurmBackendTest, ATenantsJobsAreItsOwn) {
  const std::string name = "tsl" + std::to_string(::getpid() % 100000);
  ASSERT_EQ(::getpwnam(name.c_str()), nullptr) << "account " << name << " exists already";
  ASSERT_EQ(std::system(("useradd -M -s /bin/sh " + name + " >/dev/null 2>&1").c_str()), 0);
  struct Remove {
    std::string name;
    ~Remove() { std::system(("userdel " + name + " >/dev/null 2>&1").c_str()); }
  } remove{name};
  const passwd* pw = ::getpwnam(name.c_str());
  ASSERT_NE(pw, nullptr);
  const uid_t uid = pw->pw_uid;
  // Its priority, 2 of its queue's 5, is Slurm's nice 3: a tenant may lower its own.
  WriteConfig(json::object(),
              {{"queues", json::array({{{"name", "default"}, {"max-application-priority", 5}}})}});
  StartServer();
  json a = {
      {"name", "own"},
      {"version", "1"},
      {"configuration", {{"properties", {{"tarn.priority", "2"}}}}},
      {"components", json::array({{{"name", "c"},
                                   {"number_of_containers", 1},
                                   {"launch_command", "echo \"uid=$(id -u)\"; exec sleep 1000"},
                                   {"resource", {{"cpus", 1}, {"memory", "128"}}}}})}};
  const std::string path = "/app/v1/services/own";
  ASSERT_EQ(CallApi(*server_, "POST", "/app/v1/services", a, name).status, 202);
  WaitFor("own to be STABLE", 90s, [&] {
    return CallApi(*server_, "GET", path, {}, name).body.value("state", "") == "STABLE";
  });
  const std::string inst = shared_ + "/" + name + "/own/c-0";
  WaitFor("c-0 to print its uid", 20s,
          [&] { return ReadAll(inst + "/stdout.log").find("uid=") != std::string::npos; });
  EXPECT_NE(ReadAll(inst + "/stdout.log").find("uid=" + std::to_string(uid) + "\n"),
            std::string::npos)
      << ReadAll(inst + "/stdout.log");
  const std::string users = Shell("SLURM_CONF=" + slurm_conf_ +
                                  " squeue -h -o '%j %u %y' -n tarn." + name + ".own.c-0.1");
  EXPECT_EQ(users, "tarn." + name + ".own.c-0.1 " + name + " 3\n");
  struct stat st {};
  for (const std::string& d : {inst, shared_ + "/.tarn/shared/" + name + "/own"}) {
    ASSERT_EQ(::stat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_uid, uid) << d;
    EXPECT_EQ(st.st_mode & 07, 0u) << d << ": other accounts may not enter";
  }
  // The records a restarted server trusts are not in the job's directory.
  ASSERT_EQ(::stat((shared_ + "/" + name + "/own/.jobs").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // As the job could: its stdout.log a link to a file only root may read.
  ASSERT_EQ(::unlink((inst + "/stdout.log").c_str()), 0);
  ASSERT_EQ(::symlink("/etc/shadow", (inst + "/stdout.log").c_str()), 0);
  Reply logs = CallApi(*server_, "GET", "/tarn/v1/services/own/instances/c-0/logs", {}, name);
  EXPECT_EQ(logs.text.find("root:"), std::string::npos) << logs.text;

  ASSERT_EQ(CallApi(*server_, "DELETE", path, {}, name).status, 200);
  WaitFor("own to be destroyed", 60s,
          [&] { return CallApi(*server_, "GET", path, {}, name).status == 404; });
}

// What Slurm could never run is a clear failure that says why, before anything is
// submitted.
TEST_F(SlurmBackendTest, ARequestNoNodeCanHoldSaysWhy) {
  StartServer();
  json a = {{"name", "big"},
            {"version", "1"},
            {"components", json::array({{{"name", "g"},
                                         {"number_of_containers", 1},
                                         {"launch_command", "sleep 1000"},
                                         {"resource",
                                          {{"cpus", 1},
                                           {"memory", "128"},
                                           {"additional", {{"yarn.io/gpu", {{"value", 9}}}}}}}}})}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  std::string why;
  WaitFor("g-0 to say why it cannot run", 20s, [&] {
    why = Instances("big")["g-0"].value("diagnostics", "");
    return why.find("can never be placed") != std::string::npos;
  });
  EXPECT_NE(why.find("9 GPUs"), std::string::npos) << why;
  EXPECT_NE(why.find("the largest have 4 CPUs, 4096 MiB, 2 GPUs"), std::string::npos) << why;
  // sbatch --test-only's own words.
  EXPECT_NE(why.find("; Slurm: allocation failure: Requested node configuration is not available"),
            std::string::npos)
      << why;
  EXPECT_TRUE(LiveJobs("big").empty());
}

// How a job ended reaches the user in Slurm's words: its state, its reason, the exit code,
// an OOM kill by the job's cgroup (over --mem, inside the srun step).
TEST_F(SlurmBackendTest, EndsCarrySlurmsStateAndReason) {
  StartServer();
  // One assembly each: the first failure fails its assembly, which stops the rest.
  auto one = [](const std::string& name, const std::string& cmd, const std::string& memory) {
    return json{{"name", name},
                {"version", "1"},
                {"components", json::array({{{"name", "c"},
                                             {"number_of_containers", 1},
                                             {"restart_policy", "NEVER"},
                                             {"launch_command", cmd},
                                             {"resource", {{"cpus", 1}, {"memory", memory}}}}})}};
  };
  ASSERT_EQ(Call("POST", "/app/v1/services", one("three", "exit 3", "64")).status, 202);
  ASSERT_EQ(
      Call("POST", "/app/v1/services",
           one("oom", "python3 -c 'x = bytearray(400 << 20); import time; time.sleep(9)'", "100"))
          .status,
      202);
  ASSERT_TRUE(WaitState("three", "FAILED", 60s));
  ASSERT_TRUE(WaitState("oom", "FAILED", 60s));
  json three = Instances("three")["c-0"], oom = Instances("oom")["c-0"];
  // Then the job's last line of stderr: srun's or slurmstepd's own words, here.
  EXPECT_EQ(three["last_exit"].get<std::string>().rfind(
                "Slurm: FAILED (NonZeroExitCode), exited with code 3; its last stderr line: ", 0),
            0u)
      << three.dump();
  EXPECT_EQ(oom["last_exit"].get<std::string>().rfind(
                "Slurm: FAILED (NonZeroExitCode), killed: out of memory (over its --mem); its "
                "last stderr line: ",
                0),
            0u)
      << oom.dump();
}

// sbatch refusing a job (here: a constraint no node has, from the configured extra
// options) is a start failure in sbatch's own words.
TEST_F(SlurmBackendTest, SbatchRefusalIsAStartFailureInSlurmsWords) {
  WriteConfig({{"sbatch_options", json::array({"--constraint=nosuch"})}});
  StartServer();
  json a = {{"name", "refused"},
            {"version", "1"},
            {"components", json::array({{{"name", "c"},
                                         {"number_of_containers", 1},
                                         {"restart_policy", "NEVER"},
                                         {"launch_command", "sleep 1000"},
                                         {"resource", {{"cpus", 1}, {"memory", "64"}}}}})}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  ASSERT_TRUE(WaitState("refused", "FAILED", 30s));
  const std::string last = Instances("refused")["c-0"].value("last_exit", "");
  EXPECT_EQ(last,
            "could not start: sbatch: Batch job submission failed: Invalid feature "
            "specification")
      << last;
}

// A shared_dir that is missing is refused at server start, naming the key.
TEST_F(SlurmBackendTest, AMissingSharedDirIsAClearError) {
  std::filesystem::remove_all(shared_);
  ServerProcess server(state_, config_);
  EXPECT_FALSE(server.Start());
  EXPECT_NE(server.log().find("backend.shared_dir \"" + shared_ + "\": No such file or directory"),
            std::string::npos)
      << server.log();
}

// A gang (the components with a tarn.tf.role) is one heterogeneous job: all of it or none
// is allocated; its members are srun steps in it that start in dependency order, restart
// alone inside the allocation, and end with it; a restarted server adopts them.
TEST_F(SlurmBackendTest, AGangIsOneHeterogeneousJob) {
  const std::string cmd = "echo \"gpus=$CUDA_VISIBLE_DEVICES\"; exec sleep 1000";
  auto component = [&](const std::string& name, const std::string& role, int gpus) {
    json c = {
        {"name", name},
        {"number_of_containers", 2},
        {"launch_command", cmd},
        {"resource", {{"cpus", 1}, {"memory", "64"}}},
        {"configuration", {{"properties", {{"tarn.tf.role", role}, {"tarn.ports", "grpc:2222"}}}}}};
    if (gpus > 0) c["resource"]["additional"] = {{"yarn.io/gpu", {{"value", gpus}}}};
    return c;
  };
  json worker = component("worker", "worker", 1);
  worker["dependencies"] = {"ps"};
  json a = {{"name", "g"},
            {"version", "1"},
            {"components", json::array({component("ps", "ps", 0), worker})}};
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  ASSERT_TRUE(WaitState("g", "STABLE"));

  // One job, two components (squeue: <id>+0, <id>+1), on distinct nodes; no job of its own.
  auto gang_rows = [&] {
    std::map<std::string, std::string> rows;  // "<id>+<n>" -> state
    for (const Job& j : Jobs()) {
      if (j.name.rfind("tarn.alice.g.", 0) != 0) continue;
      EXPECT_NE(j.name.find(".gang."), std::string::npos) << "a job of its own: " << j.name;
      rows[j.id] = j.state;
    }
    return rows;
  };
  std::map<std::string, std::string> rows = gang_rows();
  ASSERT_EQ(rows.size(), 2u);
  const std::string leader = rows.begin()->first.substr(0, rows.begin()->first.find('+'));
  EXPECT_EQ(rows.begin()->first, leader + "+0");
  for (const auto& [id, state] : rows) EXPECT_EQ(state, "RUNNING") << id;
  std::map<std::string, json> inst = Instances("g");
  EXPECT_EQ(inst["ps-0"]["bare_host"], inst["ps-1"]["bare_host"]);
  EXPECT_EQ(inst["worker-0"]["bare_host"], inst["worker-1"]["bare_host"]);
  EXPECT_NE(inst["ps-0"]["bare_host"], inst["worker-0"]["bare_host"]);
  std::set<int> ports;
  for (const auto& [name, i] : inst) ports.insert(i["ports"].value("grpc", 0));
  EXPECT_EQ(ports.size(), 4u);
  // A GPU each, from the component's GRES. READY comes from the step's state, so the line
  // may reach the shared file after it: wait for it, as the tests above do.
  for (const std::string w : {"worker-0", "worker-1"}) {
    const std::string out_file = shared_ + "/alice/g/" + w + "/stdout.log";
    WaitFor(w + " to print its GPUs", 20s,
            [&] { return ReadAll(out_file).find("gpus=") != std::string::npos; });
    EXPECT_NE(ReadAll(out_file).find("gpus=0\n"), std::string::npos)
        << w << ": " << ReadAll(out_file);
  }

  // ps-0's workload is killed: it restarts alone, as a new step of the same job.
  const int pid = WorkloadPid("alice_g_ps-0_1", "sleep");
  ASSERT_GT(pid, 1);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(WaitFor("ps-0 to run again", 60s,
                      [&] {
                        json i = Instances("g")["ps-0"];
                        return i.value("state", "") == "READY" &&
                               i.value("id", "") == "alice_g_ps-0_2";
                      }))
      << json(Instances("g")).dump(1) << "\nserver log:\n"
      << server_->log();
  EXPECT_NE(Instances("g")["ps-0"]["last_exit"].get<std::string>().find("signal 9"),
            std::string::npos)
      << Instances("g")["ps-0"].dump();
  EXPECT_EQ(gang_rows(), rows) << "the restart stayed inside the allocation";
  ASSERT_TRUE(WaitState("g", "STABLE"));

  // kill -9 of the server: the restarted one adopts every member and submits nothing.
  const std::set<std::string> ids_before = AllJobIds();
  server_->Kill9();
  ASSERT_TRUE(server_->Start()) << server_->log();
  ASSERT_TRUE(WaitState("g", "STABLE"));
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(AllJobIds(), ids_before) << "a restarted server submitted jobs";
  // ... and still stops a member by signalling its step: flex worker down to 1.
  ASSERT_EQ(
      Call("PUT", "/app/v1/services/g/components/worker", {{"number_of_containers", 1}}).status,
      200);
  ASSERT_TRUE(WaitFor("worker-1 to go", 30s, [&] { return !Instances("g").count("worker-1"); }));
  ASSERT_TRUE(WaitState("g", "STABLE"));
  EXPECT_EQ(gang_rows(), rows);

  // Stop: every member ends, and with the last one the allocation is given back.
  ASSERT_EQ(Call("PUT", "/app/v1/services/g", {{"state", "STOPPED"}}).status, 200);
  ASSERT_TRUE(WaitState("g", "STOPPED"));
  EXPECT_TRUE(WaitFor("the gang's job to end", 30s, [&] {
    for (const auto& [id, state] : gang_rows()) {
      if (state == "RUNNING" || state == "PENDING" || state == "COMPLETING") return false;
    }
    return true;
  }));
  // Start: a new allocation.
  Reply started;
  WaitFor("start to be accepted", 30s, [&] {
    started = Call("PUT", "/app/v1/services/g", {{"state", "STARTED"}});
    return started.status != 409;
  });
  ASSERT_EQ(started.status, 200) << started.text;
  ASSERT_TRUE(WaitState("g", "STABLE"));
  int live = 0;
  for (const auto& [id, state] : gang_rows()) {
    if (state == "RUNNING") {
      ++live;
      EXPECT_NE(id.substr(0, id.find('+')), leader) << "the old allocation runs again";
    }
  }
  EXPECT_EQ(live, 2);
}

// Issue 9's done-when: examples/fashion-mnist/assembly-gpu.json (2 ps, 2 workers and 2
// serving replicas, one GPU each for workers and replicas; one epoch here) trains and serves
// on two Slurm nodes. Slurm assigns the GPUs from GRES; tarn assigns the ports: every
// instance of a node shares its address, so TF_CONFIG, TARN_PORT_HTTP, the DNS SRV records,
// the readiness checks and `tarn status` all carry numbers from the configured port_range.
class SlurmFashionMnistTest : public SlurmBackendTest {
 protected:
  // 2 ps (1 GiB), 2 workers (2 GiB) and 2 replicas (1 GiB): 8 GiB in all, on 2 nodes.
  SlurmFashionMnistTest() { node_memory_mb_ = 8192; }
};

TEST_F(SlurmFashionMnistTest, TrainsAndServesOnTwoNodesWithGresGpus) {
  if (kSanitized) GTEST_SKIP() << "sanitized workloads outgrow the assembly's memory limits";
  json a = json::parse(ReadAll(TARN_SOURCE_DIR "/examples/fashion-mnist/assembly-gpu.json"));
  for (json& c : a["components"]) {
    std::string cmd = c["launch_command"];
    const size_t epochs = cmd.find("--epochs 6");
    if (epochs != std::string::npos) cmd.replace(epochs, 10, "--epochs 1");
    c["launch_command"] = "echo \"gpus=$CUDA_VISIBLE_DEVICES ip=$TARN_IP\"; exec " + cmd;
  }
  StartServer();
  Reply launched = Call("POST", "/app/v1/services", a);
  ASSERT_EQ(launched.status, 202) << launched.text;

  // Until the chief has finished and both replicas serve a version.
  std::map<std::string, json> inst;
  std::map<std::string, int64_t> served;  // replica -> newest AVAILABLE version
  bool srv_checked = false;
  const bool done = WaitFor("training to finish and both replicas to serve", 600s, [&] {
    inst = Instances("fmnist");
    if (!srv_checked && inst["ps-0"].value("state", "") == "READY") {
      // The ps's SRV record names its assigned port (the worker found it by TF_CONFIG).
      const int grpc = inst["ps-0"]["ports"].value("grpc", 0);
      const std::string srv =
          Shell("dig @127.0.0.1 -p " + std::to_string(server_->dns_port()) +
                " +short +time=2 +tries=1 _grpc._tcp.ps-0.fmnist.alice.tarn SRV");
      EXPECT_NE(srv.find(" " + std::to_string(grpc) + " ps-0.fmnist.alice.tarn."),
                std::string::npos)
          << srv << inst["ps-0"].dump();
      srv_checked = true;
    }
    for (const char* r : {"serving-0", "serving-1"}) {
      const json& i = inst[r];
      if (i.value("state", "") != "READY") continue;
      httplib::Client http(i["ip"].get<std::string>(), i["ports"].value("http", 0));
      http.set_connection_timeout(2s);
      auto res = http.Get("/v1/models/fmnist");
      if (!res || res->status != 200) continue;
      json body = json::parse(res->body, nullptr, false);
      if (!body.is_object()) continue;
      for (const json& v : body["model_version_status"]) {
        if (v.value("state", "") == "AVAILABLE") {
          served[r] = std::max<int64_t>(served[r], std::stoll(v["version"].get<std::string>()));
        }
      }
    }
    return inst["worker-0"].value("state", "") == "SUCCEEDED" && served.size() == 2;
  });
  ASSERT_TRUE(done) << json(inst).dump(1) << "\nserver log:\n" << server_->log();
  EXPECT_TRUE(srv_checked);

  // Two nodes, each instance at its node's address; the workers and replicas each hold
  // one of the four GRES GPUs (their node's minor, counted from 0 within the job).
  std::set<std::string> nodes;
  for (const auto& [name, i] : inst) {
    const std::string node = i["bare_host"];
    ASSERT_TRUE(kNodeAddr.count(node)) << name << ": " << i.dump();
    nodes.insert(node);
    // An instance that has ended (the workers) holds no address any more.
    if (i["state"] != "SUCCEEDED") {
      EXPECT_EQ(i["ip"], kNodeAddr.at(node)) << name;
    }
    const std::string out = ReadAll(shared_ + "/alice/fmnist/" + name + "/stdout.log");
    EXPECT_NE(out.find("ip=" + kNodeAddr.at(node)), std::string::npos) << name << ": " << out;
    if (name.rfind("ps-", 0) == 0) {
      EXPECT_NE(out.find("gpus= "), std::string::npos) << name << " has no GPU: " << out;
    } else {
      EXPECT_TRUE(out.find("gpus=0 ") != std::string::npos ||
                  out.find("gpus=1 ") != std::string::npos)
          << name << " got no GPU from Slurm: " << out.substr(0, 200);
    }
  }
  EXPECT_EQ(nodes.size(), 2u);
  // The gang (ps and workers) is one heterogeneous job, a component per tarn component on
  // nodes of its own, its members steps in it; the replicas are jobs of their own.
  std::set<std::string> gang_components, own_jobs;
  for (const Job& j : Jobs()) {
    if (j.name.rfind("tarn.alice.fmnist.gang.", 0) == 0) gang_components.insert(j.id);
    if (j.name.rfind("tarn.alice.fmnist.", 0) == 0 && j.name.find(".gang.") == std::string::npos) {
      own_jobs.insert(j.name.substr(0, j.name.rfind('.')));
    }
  }
  EXPECT_EQ(gang_components.size(), 2u) << "expected <id>+0 and <id>+1";
  for (const std::string& id : gang_components) EXPECT_NE(id.find('+'), std::string::npos) << id;
  EXPECT_EQ(own_jobs,
            (std::set<std::string>{"tarn.alice.fmnist.serving-0", "tarn.alice.fmnist.serving-1"}));
  EXPECT_EQ(inst["ps-0"]["bare_host"], inst["ps-1"]["bare_host"]);
  EXPECT_EQ(inst["worker-0"]["bare_host"], inst["worker-1"]["bare_host"]);
  EXPECT_NE(inst["ps-0"]["bare_host"], inst["worker-0"]["bare_host"]);
  // Replicas on one node cannot share a port: tarn gave each its own from the range.
  const int p0 = inst["serving-0"]["ports"].value("http", 0);
  const int p1 = inst["serving-1"]["ports"].value("http", 0);
  EXPECT_NE(p0, p1);
  for (int p : {p0, p1}) {
    EXPECT_GE(p, 12000);
    EXPECT_LE(p, 12999);
  }

  // The model the chief exported, as it measured it, answers through each replica.
  Reply status = Call("GET", "/app/v1/services/fmnist");
  const int64_t version = std::max(served["serving-0"], served["serving-1"]);
  json meta = json::parse(ReadAll(status.body["shared_dir"].get<std::string>() + "/models/fmnist/" +
                                  std::to_string(version) + "/meta.json"),
                          nullptr, false);
  ASSERT_TRUE(meta.is_object()) << "no meta.json of version " << version;
  EXPECT_GE(meta.value("accuracy", 0.0), 0.8) << meta.dump();
  json image = json::array();
  for (int r = 0; r < 28; ++r) image.push_back(std::vector<double>(28, r >= 8 && r < 20 ? 0.8 : 0));
  for (const char* r : {"serving-0", "serving-1"}) {
    httplib::Client http(inst[r]["ip"].get<std::string>(), inst[r]["ports"].value("http", 0));
    auto res = http.Post("/v1/models/fmnist:predict", json{{"instances", {image}}}.dump(),
                         "application/json");
    ASSERT_TRUE(res) << r;
    EXPECT_EQ(res->status, 200) << r << ": " << res->body;
    json body = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << res->body;
    ASSERT_EQ(body["predictions"].size(), 1u) << res->body;
    EXPECT_EQ(body["predictions"][0].size(), 10u) << res->body;
  }
}

}  // namespace
