// DockerRuntime against the real podman and tarn's base image (scripts/images base, which
// scripts/test runs first). Where podman or the image is missing, each test is skipped and
// says why; nothing here fakes an engine. Needs root (ctest label "root").
#include "runtime/docker_runtime.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/file.h"
#include "common/subprocess.h"

namespace tarn::runtime {
namespace {

using namespace std::chrono_literals;

constexpr const char* kImage = "localhost/tarn-base:latest";

// Why the engine tests cannot run here, or "".
std::string Unavailable() {
  if (::geteuid() != 0) return "needs root";
  auto info = RunCommand({"podman", "info", "--format", "{{.Version.Version}}"}, 30s);
  if (!info.ok() || !info->success()) return "podman does not answer (scripts/setup installs it)";
  auto image = RunCommand({"podman", "image", "exists", kImage}, 30s);
  if (!image.ok() || !image->success()) {
    return std::string(kImage) + " is missing (scripts/images base makes it)";
  }
  return "";
}

// The containers of one server label, as the engine lists them (running or not).
int CountContainers(const std::string& label) {
  auto r = RunCommand(
      {"podman", "ps", "--all", "--quiet", "--filter", "label=tarn.server=" + label}, 30s);
  if (!r.ok()) return -1;
  int n = 0;
  for (char c : r->out) n += c == '\n';
  return n;
}

class DockerRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = Unavailable(); !why.empty()) GTEST_SKIP() << why;
    char tmpl[] = "/tmp/tarn-podman-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0755);
    label_ = "test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++);
    DockerRuntime::Options o;
    o.server_label = label_;
    o.dev_dir = dir_ + "/dev";
    o.cdi_dirs = {dir_ + "/cdi"};
    auto rt = DockerRuntime::Create(o);
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    rt_ = std::move(rt).value();
  }
  void TearDown() override {
    if (dir_.empty()) return;
    auto r = RunCommand(
        {"podman", "ps", "--all", "--quiet", "--filter", "label=tarn.server=" + label_}, 30s);
    if (r.ok()) {
      std::vector<std::string> rm = {"podman", "rm", "--force", "--time", "0"};
      size_t start = 0;
      for (size_t nl; (nl = r->out.find('\n', start)) != std::string::npos; start = nl + 1) {
        rm.push_back(r->out.substr(start, nl - start));
      }
      if (rm.size() > 5) (void)RunCommand(rm, 60s);
    }
    std::filesystem::remove_all(dir_);
  }

  ContainerSpec Spec(const std::string& name, const std::string& command) {
    ContainerSpec s;
    s.id = "alice/imaged/" + name;
    s.shim_dir = dir_ + "/shims/" + name;
    s.work_dir = dir_ + "/work/" + name;
    s.hostname = name + ".imaged.alice.tarn";
    s.argv = {"/bin/sh", "-c", command};
    s.env = {"TARN_CONTAINER_ID=c-" + name, "GREETING=hello from the env file"};
    s.image = kImage;
    s.bind_paths = {s.work_dir};
    s.cgroup = "tarn-test/" + label_ + "/" + name;
    s.stop_grace_ms = 2000;
    return s;
  }

  // Runs `command` to its end; returns its state and stdout.
  std::pair<ContainerState, std::string> RunToEnd(const ContainerSpec& s) {
    auto started = rt_->Start(s);
    EXPECT_TRUE(started.ok()) << started.status().message();
    auto st = rt_->Wait(s.shim_dir, 60s);
    EXPECT_TRUE(st.ok()) << st.status().message();
    return {st.ok() ? *st : ContainerState{},
            ReadFileToString(s.shim_dir + "/stdout.log").value_or("")};
  }

  static inline int counter_ = 0;
  std::string dir_, label_;
  std::unique_ptr<DockerRuntime> rt_;
};

TEST_F(DockerRuntimeTest, RunsTheImageNotTheHostWithItsEnvironmentAndLogs) {
  ASSERT_NE(::access("/etc/tarn-image", F_OK), 0) << "the host has the image's marker file";
  ContainerSpec s = Spec("marker",
                         "cat /etc/tarn-image; echo \"$GREETING\"; hostname; echo oops >&2; "
                         "printf 'no newline'; exit 3");
  auto [st, out] = RunToEnd(s);
  ASSERT_EQ(st.phase, ContainerState::Phase::kExited) << st.diagnostics;
  EXPECT_EQ(st.exit.exit_code, 3);
  EXPECT_EQ(st.exit.diagnostics, "exited with code 3");
  EXPECT_NE(out.find("localhost/tarn-base:"), std::string::npos) << out;
  EXPECT_NE(out.find("hello from the env file\n"), std::string::npos) << out;
  EXPECT_NE(out.find("marker.imaged.alice.tarn\n"), std::string::npos) << out;
  EXPECT_NE(out.find("no newline"), std::string::npos) << out;
  EXPECT_EQ(ReadFileToString(s.shim_dir + "/stderr.log").value_or(""), "oops\n");
  // The environment (the assembly's secret among it) is in a root-only file, not on the
  // engine's command line.
  struct stat env {};
  ASSERT_EQ(::stat((s.shim_dir + "/env").c_str(), &env), 0);
  EXPECT_EQ(env.st_mode & 0777, 0600u);
  // A restarted server (a new runtime) reads the same exit and pumps nothing twice.
  DockerRuntime::Options o;
  o.server_label = label_;
  auto again = DockerRuntime::Create(o);
  ASSERT_TRUE(again.ok());
  auto st2 = (*again)->State(s.shim_dir);
  ASSERT_TRUE(st2.ok());
  EXPECT_EQ(st2->exit.exit_code, 3);
  EXPECT_EQ(ReadFileToString(s.shim_dir + "/stdout.log").value_or(""), out);
  ASSERT_TRUE(rt_->Remove(s.shim_dir).ok());
  EXPECT_EQ(CountContainers(label_), 0) << "Remove leaves no container";
  EXPECT_FALSE(std::filesystem::exists(s.shim_dir));
}

TEST_F(DockerRuntimeTest, RunsAsTheRunUserWithTheServersUlimits) {
  ContainerSpec s = Spec("ids", "id -u; id -g; ulimit -n; ulimit -Hn");
  s.run_uid = 65534;
  s.run_gid = 65534;
  auto [st, out] = RunToEnd(s);
  EXPECT_EQ(st.exit.exit_code, 0) << st.diagnostics
                                  << ReadFileToString(s.shim_dir + "/stderr.log").value_or("");
  rlimit nofile{};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  EXPECT_EQ(out, "65534\n65534\n" + std::to_string(nofile.rlim_cur) + "\n" +
                     std::to_string(nofile.rlim_max) + "\n");
}

TEST_F(DockerRuntimeTest, AMemoryLimitOomKillIsReported) {
  ContainerSpec s = Spec("oom", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived");
  s.limits.memory_mib = 64;
  auto [st, out] = RunToEnd(s);
  ASSERT_EQ(st.phase, ContainerState::Phase::kExited);
  EXPECT_TRUE(st.exit.oom_killed) << st.diagnostics;
  EXPECT_EQ(st.exit.diagnostics, "killed: exceeded its 64 MiB memory limit");
  EXPECT_EQ(out.find("survived"), std::string::npos);
}

TEST_F(DockerRuntimeTest, StopEndsAContainerThatIgnoresSigtermWithinTheGracePeriod) {
  ContainerSpec s = Spec("stubborn", "trap '' TERM; echo up; while :; do sleep 0.1; done");
  auto started = rt_->Start(s);
  ASSERT_TRUE(started.ok()) << started.status().message();
  EXPECT_EQ(started->phase, ContainerState::Phase::kRunning);
  EXPECT_GT(started->shim_pid, 0);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(rt_->Stop(s.shim_dir).ok());
  auto st = rt_->Wait(s.shim_dir, 30s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->phase, ContainerState::Phase::kExited);
  EXPECT_EQ(st->exit.signal, 9) << st->diagnostics;
  // The grace period (2 s), then SIGKILL; the engine's own steps add well under 5 s.
  EXPECT_GE(took, 1.5);
  EXPECT_LT(took, 7.0);
}

TEST_F(DockerRuntimeTest, GetsItsGpusDeviceNodesAndNoOthers) {
  std::filesystem::create_directories(dir_ + "/dev");
  for (int minor : {0, 1, 2, 3}) {
    const std::string node = dir_ + "/dev/nvidia" + std::to_string(minor);
    ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(195, minor)), 0) << node;
  }
  ASSERT_EQ(::mknod((dir_ + "/dev/nvidiactl").c_str(), S_IFCHR | 0666, makedev(195, 255)), 0);
  ContainerSpec s = Spec("gpus", "ls /dev | grep nvidia; echo \"$NVIDIA_VISIBLE_DEVICES\"");
  s.gpus = {1, 3};
  s.env.push_back("NVIDIA_VISIBLE_DEVICES=1,3");
  auto [st, out] = RunToEnd(s);
  EXPECT_EQ(st.exit.exit_code, 0) << ReadFileToString(s.shim_dir + "/stderr.log").value_or("");
  EXPECT_EQ(out, "nvidia1\nnvidia3\nnvidiactl\n1,3\n");
}

TEST_F(DockerRuntimeTest, AnImageThatCannotBePulledIsUnavailableAndStartsNothing) {
  ContainerSpec s = Spec("nope", "true");
  s.image = "localhost/tarn-no-such-image:1";
  auto started = rt_->Start(s);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(started.status().message().find("localhost/tarn-no-such-image:1 is not present"),
            std::string::npos)
      << started.status().message();
  EXPECT_EQ(CountContainers(label_), 0);
  // What is left says it never ran, and goes.
  auto st = rt_->State(s.shim_dir);
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->phase, ContainerState::Phase::kLost);
  EXPECT_EQ(st->shim_pid, 0) << st->diagnostics;
  EXPECT_TRUE(rt_->Remove(s.shim_dir).ok());
  EXPECT_FALSE(std::filesystem::exists(s.shim_dir));
}

TEST_F(DockerRuntimeTest, ARestartedServerFindsTheRunningContainerByItsDirectory) {
  ContainerSpec s = Spec("keep", "echo first; sleep 100");
  auto started = rt_->Start(s);
  ASSERT_TRUE(started.ok()) << started.status().message();
  DockerRuntime::Options o;
  o.server_label = label_;
  auto again = DockerRuntime::Create(o);
  ASSERT_TRUE(again.ok());
  auto st = (*again)->State(s.shim_dir);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->phase, ContainerState::Phase::kRunning);
  EXPECT_EQ(CountContainers(label_), 1);
  // Without its conmon pid file (a server that died inside `run`), the engine is asked.
  ::unlink((s.shim_dir + "/conmon.pid").c_str());
  st = (*again)->State(s.shim_dir);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->phase, ContainerState::Phase::kRunning);
  ASSERT_TRUE((*again)->Stop(s.shim_dir).ok());
  st = (*again)->Wait(s.shim_dir, 30s);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->phase, ContainerState::Phase::kExited);
  EXPECT_EQ(ReadFileToString(s.shim_dir + "/stdout.log").value_or(""), "first\n");
}

}  // namespace
}  // namespace tarn::runtime
