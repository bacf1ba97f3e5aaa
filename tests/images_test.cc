// DOCKER artifacts through a real `tarn server` and the real podman, from tarn's base image
// (scripts/images base, which scripts/test runs before any test): an instance sees the
// image, not the host; runs as its tenant; sees its own shared directory and not another
// tenant's; logs through `tarn logs -f`; is adopted, never started twice, after kill -9 of
// the server; leaves no container behind when destroyed. An image that cannot be pulled
// keeps its instance PENDING with the engine's words; a server without an engine refuses.
// Where podman or the image is missing, each test is skipped and says why: never faked.
// Needs root (ctest label "e2e").
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "common/hmac_sha256.h"
#include "common/subprocess.h"
#include "server_process.h"
#include "tarn_process.h"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using tarn::testing::CallApi;
using tarn::testing::Reply;
using tarn::testing::ServerProcess;

constexpr const char* kImage = "localhost/tarn-base:latest";

std::string Unavailable() {
  if (::geteuid() != 0) return "needs root";
  auto info = tarn::RunCommand({"podman", "info", "--format", "{{.Version.Version}}"}, 30s);
  if (!info.ok() || !info->success()) return "podman does not answer (scripts/setup installs it)";
  auto image = tarn::RunCommand({"podman", "image", "exists", kImage}, 30s);
  if (!image.ok() || !image->success()) {
    return std::string(kImage) + " is missing (scripts/images base makes it)";
  }
  return "";
}

// The engine's containers labelled `label` ("tarn.id=alice/a/c-0"): running only, or all.
int Containers(const std::string& label, bool all = true) {
  std::vector<std::string> argv = {"podman", "ps", "--quiet", "--filter", "label=" + label};
  if (all) argv.insert(argv.begin() + 2, "--all");
  auto r = tarn::RunCommand(argv, 30s);
  if (!r.ok() || !r->success()) return -1;
  int n = 0;
  for (char c : r->out) n += c == '\n';
  return n;
}

class ImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = Unavailable(); !why.empty()) GTEST_SKIP() << why;
    char tmpl[] = "/tmp/tarn-images-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0711);
    state_ = dir_ + "/state";
    lock_ = tarn::testing::LockAddressRange(&range_);
    ASSERT_GE(lock_, 0) << "no free test address range";
    WriteConfig(json::object());
  }
  void TearDown() override {
    if (server_) {
      if (server_->pid() <= 0) (void)server_->Start();
      for (const char* user : {"alice", "bob"}) {
        Reply list = Call("GET", "/app/v1/services", json(), user);
        if (list.status != 200) continue;
        for (const json& a : list.body) {
          const std::string path = "/app/v1/services/" + a["name"].get<std::string>();
          Call("DELETE", path, json(), user);
          tarn::testing::WaitFor(path + " to be destroyed", 60s,
                                 [&] { return Call("GET", path, json(), user).status == 404; });
        }
      }
      EXPECT_TRUE(server_->Terminate()) << server_->log();
    }
    // Whatever a failed test left: no container of this server outlives it.
    const std::string label =
        "label=tarn.server=" + tarn::ToHex(tarn::DigestBytes(tarn::Sha256(state_))).substr(0, 16);
    auto left = tarn::RunCommand({"podman", "ps", "--all", "--quiet", "--filter", label}, 30s);
    if (left.ok() && !left->out.empty()) {
      ADD_FAILURE() << "containers left behind:\n" << left->out;
      (void)tarn::RunCommand(
          {"sh", "-c", "podman ps -aq --filter " + label + " | xargs -r podman rm -f -t 0"}, 60s);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    if (lock_ >= 0) ::close(lock_);
  }

  void WriteConfig(json extra) {
    json config = {
        {"restart", {{"initial_backoff_ms", 200}, {"max_backoff_ms", 2000}}},
        {"probe_interval_ms", 100},
        {"address_range", range_},
        {"dns_upstream", json::array()},
        {"nodes",
         json::array({{{"name", "node-1"}, {"vcores", 16}, {"memory_mb", 16384}, {"gpus", 0}}})}};
    for (auto it = extra.begin(); it != extra.end(); ++it) config[it.key()] = it.value();
    config_ = dir_ + "/config.json";
    std::ofstream(config_) << config.dump(2);
  }

  void StartServer() {
    server_ = std::make_unique<ServerProcess>(state_, config_, std::vector<std::string>{});
    ASSERT_TRUE(server_->Start()) << server_->log();
  }

  Reply Call(const std::string& method, const std::string& path, const json& body = json(),
             const std::string& user = "alice") {
    return CallApi(*server_, method, path, body, user);
  }

  // One component `c` of `n` instances running `command` from `image` ("" : a process).
  static json Assembly(const std::string& name, const std::string& command, int n = 1,
                       const std::string& image = kImage, const std::string& policy = "ALWAYS") {
    json c = {{"name", "c"},
              {"number_of_containers", n},
              {"launch_command", command},
              {"restart_policy", policy},
              {"resource", {{"cpus", 1}, {"memory", "128"}}}};
    if (!image.empty()) c["artifact"] = {{"type", "DOCKER"}, {"id", image}};
    return {{"name", name}, {"version", "1"}, {"components", json::array({c})}};
  }

  json Instance(const std::string& name, int k = 0, const std::string& user = "alice") {
    Reply r = Call("GET", "/app/v1/services/" + name, json(), user);
    if (r.status != 200) return json::object();
    return r.body["components"][0]["containers"][k];
  }

  bool WaitInstance(const std::string& name, const std::string& state,
                    const std::string& user = "alice", std::chrono::seconds timeout = 60s) {
    json last;
    bool ok = tarn::testing::WaitFor(name + " c-0 to be " + state, timeout, [&] {
      last = Instance(name, 0, user);
      return last.value("state", "") == state;
    });
    if (!ok) ADD_FAILURE() << last.dump() << "\n" << server_->log();
    return ok;
  }

  std::string Stdout(const std::string& name, const std::string& user = "alice") {
    auto r = tarn::testing::RunTarn({"logs", name, "c-0"}, server_->CliEnv(user), dir_, 30s);
    return r.out;
  }

  std::string dir_, state_, config_, range_;
  int lock_ = -1;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ImagesTest, AnInstanceRunsInItsImageAsItsTenantWithItsOwnSharedDirectoryOnly) {
  StartServer();
  ASSERT_NE(::access("/etc/tarn-image", F_OK), 0) << "the host has the image's marker file";
  // alice's process and image instances, then bob's image instance looking for alice's files.
  const std::string report =
      "cat /etc/tarn-image 2>&1 || echo NO-MARKER; id -u; echo shared=$TARN_SHARED_DIR; "
      "touch $TARN_SHARED_DIR/mine && echo wrote-shared; "
      "ls " +
      state_ + "/shared/alice 2>&1 | head -1; hostname; sleep 100";
  ASSERT_EQ(Call("POST", "/app/v1/services", Assembly("img", report)).status, 202);
  ASSERT_EQ(Call("POST", "/app/v1/services", Assembly("proc", "id -u; sleep 100", 1, "")).status,
            202);
  ASSERT_TRUE(WaitInstance("img", "READY"));
  ASSERT_TRUE(WaitInstance("proc", "READY"));
  ASSERT_EQ(Call("POST", "/app/v1/services", Assembly("peek", report), "bob").status, 202);
  ASSERT_TRUE(WaitInstance("peek", "READY", "bob"));
  std::string img, proc, peek;
  tarn::testing::WaitFor("the three to report", 20s, [&] {
    img = Stdout("img");
    proc = Stdout("proc");
    peek = Stdout("peek", "bob");
    return img.find("img.alice") != std::string::npos && !proc.empty() &&
           peek.find("peek.bob") != std::string::npos;
  });
  EXPECT_EQ(img.find("NO-MARKER"), std::string::npos) << img;
  EXPECT_NE(img.find("localhost/tarn-base:"), std::string::npos) << img;
  // The same account as a process instance of the same tenant gets.
  const std::string uid = proc.substr(0, proc.find('\n'));
  EXPECT_NE(img.find("\n" + uid + "\n"), std::string::npos) << img << " vs " << proc;
  EXPECT_NE(img.find("wrote-shared"), std::string::npos) << img;
  EXPECT_TRUE(std::filesystem::exists(state_ + "/shared/alice/img/mine"));
  EXPECT_NE(img.find("c-0.img.alice"), std::string::npos) << img;
  // bob's container has its own shared directory and no path to alice's.
  EXPECT_NE(peek.find("No such file or directory"), std::string::npos) << peek;
  EXPECT_TRUE(std::filesystem::exists(state_ + "/shared/bob/peek/mine"));
  EXPECT_EQ(Containers("tarn.id=alice/img/c-0", /*all=*/false), 1);
}

TEST_F(ImagesTest, LogsFollowAContainerUntilItsRunEnds) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services",
                 Assembly("talk", "for i in 1 2 3 4 5; do echo line $i; sleep 0.4; done", 1, kImage,
                          "NEVER"))
                .status,
            202);
  ASSERT_TRUE(tarn::testing::WaitFor("c-0 to start", 60s, [&] {
    const std::string s = Instance("talk").value("state", "");
    return s == "READY" || s == "SUCCEEDED";
  }));
  auto t0 = std::chrono::steady_clock::now();
  auto r =
      tarn::testing::RunTarn({"logs", "-f", "talk", "c-0"}, server_->CliEnv("alice"), dir_, 60s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("line 1\nline 2\nline 3\nline 4\nline 5\n"), std::string::npos) << r.out;
  EXPECT_GT(took, 0.5) << "it followed the run rather than printing what was there";
}

TEST_F(ImagesTest, AnOomKillIsReportedAndTheRestartPolicyApplies) {
  StartServer();
  json a = Assembly("oom", "echo try; x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived",
                    1, kImage, "NEVER");
  a["components"][0]["resource"]["memory"] = "64";
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);
  json i;
  ASSERT_TRUE(tarn::testing::WaitFor("c-0 to fail", 90s, [&] {
    i = Instance("oom");
    return i.value("state", "") == "FAILED";
  })) << i.dump();
  EXPECT_EQ(i.value("last_exit", "").rfind("killed: exceeded its 64 MiB memory limit", 0), 0u)
      << i.dump();
}

TEST_F(ImagesTest, KillNineOfTheServerAdoptsRunningContainersAndReportsEndedOnes) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services", Assembly("keep", "sleep 1000", 2)).status, 202);
  ASSERT_TRUE(WaitInstance("keep", "READY"));
  ASSERT_TRUE(tarn::testing::WaitFor(
      "c-1 READY", 60s, [&] { return Instance("keep", 1).value("state", "") == "READY"; }));
  const json before0 = Instance("keep", 0), before1 = Instance("keep", 1);
  server_->Kill9();
  // While the server is down, c-1's container ends.
  auto name = tarn::ReadFileToString(state_ + "/shims/alice/keep/c-1/container.name");
  ASSERT_TRUE(name.ok());
  std::string n = *name;
  while (!n.empty() && n.back() == '\n') n.pop_back();
  auto killed = tarn::RunCommand({"podman", "kill", n}, 60s);
  ASSERT_TRUE(killed.ok() && killed->success()) << (killed.ok() ? killed->err : "");
  ASSERT_TRUE(server_->Start()) << server_->log();
  json after1;
  ASSERT_TRUE(tarn::testing::WaitFor("c-1 to be restarted", 60s, [&] {
    after1 = Instance("keep", 1);
    return after1.value("state", "") == "READY" && after1.value("restarts", 0) == 1;
  })) << after1.dump();
  const json after0 = Instance("keep", 0);
  EXPECT_EQ(after0["id"], before0["id"]) << "adopted, not restarted";
  EXPECT_EQ(after0.value("restarts", -1), 0);
  EXPECT_NE(after1["id"], before1["id"]);
  EXPECT_EQ(after1.value("last_exit", "").rfind("killed by signal 9", 0), 0u) << after1.dump();
  // Never two: one running container per instance.
  EXPECT_EQ(Containers("tarn.id=alice/keep/c-0", false), 1);
  EXPECT_EQ(Containers("tarn.id=alice/keep/c-1", false), 1);
  EXPECT_EQ(Containers("tarn.id=alice/keep/c-1"), 1) << "the ended container was removed";
  ASSERT_LT(Call("DELETE", "/app/v1/services/keep").status, 300);
  ASSERT_TRUE(tarn::testing::WaitFor("keep to be destroyed", 60s, [&] {
    return Call("GET", "/app/v1/services/keep").status == 404;
  }));
  tarn::testing::WaitFor("its containers to go", 30s, [&] {
    return Containers("tarn.id=alice/keep/c-0") == 0 && Containers("tarn.id=alice/keep/c-1") == 0;
  });
  EXPECT_EQ(Containers("tarn.id=alice/keep/c-0"), 0) << "destroy leaves no container";
  EXPECT_EQ(Containers("tarn.id=alice/keep/c-1"), 0) << "destroy leaves no container";
}

TEST_F(ImagesTest, AnImageThatCannotBePulledWaitsPendingWithTheEnginesWords) {
  StartServer();
  ASSERT_EQ(Call("POST", "/app/v1/services",
                 Assembly("ghost", "sleep 100", 1, "localhost/tarn-no-such-image:1"))
                .status,
            202);
  json i;
  tarn::testing::WaitFor("c-0 to say why it waits", 30s, [&] {
    i = Instance("ghost");
    return i.value("diagnostics", "").find("cannot be pulled") != std::string::npos;
  });
  EXPECT_EQ(i.value("state", ""), "PENDING") << i.dump();
  EXPECT_NE(i.value("diagnostics", "").find("localhost/tarn-no-such-image:1 is not present"),
            std::string::npos)
      << i.dump();
  std::this_thread::sleep_for(5s);  // it is tried again, and that is no restart
  i = Instance("ghost");
  EXPECT_EQ(i.value("state", ""), "PENDING") << i.dump();
  EXPECT_EQ(i.value("restarts", -1), 0) << i.dump();
  EXPECT_EQ(Containers("tarn.id=alice/ghost/c-0"), 0);
}

TEST_F(ImagesTest, AServerWithoutAnEngineRefusesImagesAndNeverRunsThemOnTheHost) {
  WriteConfig({{"container_engine", dir_ + "/no-such-podman"}});
  StartServer();
  const std::string marker = dir_ + "/ran-on-the-host";
  ASSERT_EQ(Call("POST", "/app/v1/services",
                 Assembly("imaged", "touch " + marker + "; sleep 100", 1, kImage, "NEVER"))
                .status,
            202);
  json i;
  tarn::testing::WaitFor("c-0 to say why it cannot start", 30s, [&] {
    i = Instance("imaged");
    return (i.value("diagnostics", "") + i.value("last_exit", "")).find("does not answer") !=
           std::string::npos;
  });
  const std::string why = i.value("diagnostics", "") + " " + i.value("last_exit", "");
  EXPECT_NE(why.find("DOCKER artifacts need a container engine"), std::string::npos) << i.dump();
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the command ran on the host";
}

}  // namespace
