// The real runtime: real tarn-shim processes, namespaces and this machine's cgroups. Needs
// root (skipped otherwise, saying so). Each test names its cgroups uniquely and checks that
// nothing is left behind: no process, no cgroup.
#include "runtime/shim_runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/file.h"
#include "common/temp_dir.h"
#include "runtime/cgroups.h"

namespace tarn::runtime {
namespace {

using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) { return ReadFileToString(path).value_or(""); }

// True when some process has `token` in its environment.
bool ProcessWithToken(const std::string& token) {
  DIR* d = ::opendir("/proc");
  bool found = false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string env = ReadAll(std::string("/proc/") + e->d_name + "/environ");
    if (env.find(token) != std::string::npos) found = true;
  }
  ::closedir(d);
  return found;
}

class ShimRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: namespaces and cgroups";
    char tmpl[] = "/tmp/tarn-runtime-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0755);
    token_ = "TARN_TEST_TOKEN=" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto cg = DetectCgroups();
    ASSERT_TRUE(cg.ok()) << cg.status().ToString();
    cgroups_ = std::move(cg).value();
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }

  ContainerSpec Spec(const std::string& command) {
    ContainerSpec s;
    s.id = "alice/test/c-0";
    s.shim_dir = dir_ + "/shim";
    s.work_dir = dir_ + "/work";
    s.hostname = "c-0.test.alice.tarn";
    s.argv = {"/bin/sh", "-c", command};
    s.env = {"PATH=/usr/bin:/bin", token_};
    s.cgroup = "tarn-test-" + std::to_string(::getpid()) + "/alice/test/c-0";
    s.limits.memory_mib = 128;
    s.limits.vcores = 1;
    s.limits.pids_max = 128;
    s.stop_grace_ms = 300;
    return s;
  }

  ContainerState RunToEnd(const ContainerSpec& spec) {
    auto started = runtime_.Start(spec);
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    auto done = runtime_.Wait(spec.shim_dir, 20s);
    EXPECT_TRUE(done.ok()) << done.status().ToString();
    return done.ok() ? *done : ContainerState{};
  }

  // Makes the work dir and in it a FIFO `name` the workload (another user) may write to.
  void MakeReadyFifo(const ContainerSpec& spec, const std::string& name) {
    ::mkdir(spec.work_dir.c_str(), 0755);
    std::string path = spec.work_dir + "/" + name;
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  }

  // Blocks until the workload writes a line to the FIFO `name` in its work dir.
  void AwaitReady(const ContainerSpec& spec, const std::string& name) {
    int fd = ::open((spec.work_dir + "/" + name).c_str(), O_RDONLY | O_NONBLOCK);
    ASSERT_GE(fd, 0);
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1) << "the workload never said it was ready";
    ::close(fd);
  }

  void ExpectNothingLeft(const ContainerSpec& spec) {
    EXPECT_FALSE(cgroups_->Exists(spec.cgroup)) << spec.cgroup << " is still there";
    EXPECT_FALSE(cgroups_->Exists("tarn-test-" + std::to_string(::getpid())));
    EXPECT_FALSE(ProcessWithToken(token_)) << "a process of the container survived";
  }

  ShimRuntime runtime_{{TARN_SHIM_BINARY}};
  std::unique_ptr<Cgroups> cgroups_;
  std::string dir_;
  std::string token_;
};

TEST_F(ShimRuntimeTest, RunsIsolatedAsTheRunUserAndRecordsTheExit) {
  ContainerSpec spec = Spec(
      "echo pid=$$ host=$(hostname) uid=$(id -u) pwd=$(pwd); "
      "echo oops >&2; exit 3");
  ContainerState st = RunToEnd(spec);
  ASSERT_EQ(st.phase, ContainerState::Phase::kExited);
  EXPECT_EQ(st.exit.exit_code, 3);
  EXPECT_EQ(st.exit.signal, 0);
  EXPECT_FALSE(st.exit.oom_killed);
  EXPECT_EQ(st.diagnostics, "exited with code 3");
  // PID 1 is the shim's init; the workload is the next process of its PID namespace.
  EXPECT_EQ(ReadAll(spec.shim_dir + "/stdout.log"),
            "pid=2 host=c-0.test.alice.tarn uid=65534 pwd=" + spec.work_dir + "\n");
  EXPECT_EQ(ReadAll(spec.shim_dir + "/stderr.log"), "oops\n");
  ExpectNothingLeft(spec);
}

TEST_F(ShimRuntimeTest, MemoryHogIsOomKilledAndReportedAsSuch) {
  ContainerSpec spec = Spec("exec /usr/bin/python3 -c 'b = b\"x\" * (400 << 20); print(len(b))'");
  spec.limits.memory_mib = 64;
  ContainerState st = RunToEnd(spec);
  ASSERT_EQ(st.phase, ContainerState::Phase::kExited);
  EXPECT_TRUE(st.exit.oom_killed);
  EXPECT_EQ(st.exit.signal, 9);
  EXPECT_EQ(st.diagnostics, "killed: exceeded its 64 MiB memory limit");
  ExpectNothingLeft(spec);
}

TEST_F(ShimRuntimeTest, StopSendsSigtermToTheWorkload) {
  ContainerSpec spec = Spec(
      "trap 'echo got TERM; exit 0' TERM; echo up > ready; "
      "sleep 1000 & wait");
  MakeReadyFifo(spec, "ready");
  ASSERT_TRUE(runtime_.Start(spec).ok());
  AwaitReady(spec, "ready");
  ASSERT_TRUE(runtime_.Stop(spec.shim_dir).ok());
  auto st = runtime_.Wait(spec.shim_dir, 20s);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->phase, ContainerState::Phase::kExited);
  EXPECT_EQ(st->exit.exit_code, 0);  // it handled SIGTERM and exited cleanly
  EXPECT_EQ(st->diagnostics, "stopped (exited with code 0)");
  EXPECT_EQ(ReadAll(spec.shim_dir + "/stdout.log"), "got TERM\n");
  ExpectNothingLeft(spec);
}

TEST_F(ShimRuntimeTest, WorkloadIgnoringSigtermIsKilledAfterTheGracePeriod) {
  ContainerSpec spec = Spec(
      "exec /usr/bin/python3 -c 'import signal, subprocess, time\n"
      "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
      "subprocess.Popen([\"sleep\", \"1000\"])\n"
      "open(\"ready\", \"w\").write(\"up\\n\")\n"
      "time.sleep(1000)'");
  MakeReadyFifo(spec, "ready");
  ASSERT_TRUE(runtime_.Start(spec).ok());
  AwaitReady(spec, "ready");
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(runtime_.Stop(spec.shim_dir).ok());
  auto st = runtime_.Wait(spec.shim_dir, 20s);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->phase, ContainerState::Phase::kExited);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);  // the grace period was given
  EXPECT_EQ(st->exit.signal, 9);
  EXPECT_EQ(st->diagnostics, "stopped (killed by signal 9 (SIGKILL))");
  ExpectNothingLeft(spec);  // the child sleep went with its namespace
}

TEST_F(ShimRuntimeTest, ContainerOutlivesTheRuntimeAndIsFoundAgain) {
  ContainerSpec spec = Spec("echo up > ready; exec sleep 1000");
  MakeReadyFifo(spec, "ready");
  pid_t fork_server = -1;
  {
    ShimRuntime first({TARN_SHIM_BINARY});
    ASSERT_TRUE(first.Start(spec).ok());
    fork_server = first.fork_server_pid();
    ASSERT_GT(fork_server, 0) << "the shim was not forked by the fork server";
  }
  // The fork server ended with its runtime (and was waited for); the container did not.
  EXPECT_NE(::kill(fork_server, 0), 0) << "the fork server outlived its runtime";
  AwaitReady(spec, "ready");
  ShimRuntime second({TARN_SHIM_BINARY});  // "tarn server restarted"
  auto st = second.State(spec.shim_dir);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->phase, ContainerState::Phase::kRunning);
  EXPECT_GT(st->shim_pid, 0);
  ASSERT_TRUE(second.Stop(spec.shim_dir).ok());
  auto done = second.Wait(spec.shim_dir, 20s);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->exit.signal, 15);
  ExpectNothingLeft(spec);
  ASSERT_TRUE(second.Remove(spec.shim_dir).ok());
  EXPECT_EQ(second.State(spec.shim_dir).status().code(), StatusCode::kNotFound);
}

TEST_F(ShimRuntimeTest, AShimThatDiedIsReportedLost) {
  ContainerSpec spec = Spec("echo up > ready; exec sleep 1000");
  MakeReadyFifo(spec, "ready");
  auto started = runtime_.Start(spec);
  ASSERT_TRUE(started.ok());
  AwaitReady(spec, "ready");
  ::kill(started->shim_pid, SIGKILL);
  ASSERT_TRUE(runtime_.Wait(spec.shim_dir, 20s).ok());
  auto st = runtime_.State(spec.shim_dir);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->phase, ContainerState::Phase::kLost);
  EXPECT_NE(st->diagnostics.find("is gone without recording an exit status"), std::string::npos);
  // Cleaning up after a lost shim is the cgroup's job.
  EXPECT_TRUE(cgroups_->KillAll(spec.cgroup).ok());
  EXPECT_TRUE(cgroups_->Remove(spec.cgroup).ok());
  ExpectNothingLeft(spec);
}

// The fork server (shim.h) killed: its shims live on, and the next start forks from a new
// one.
TEST_F(ShimRuntimeTest, AForkServerThatDiedIsReplacedAndItsShimsLiveOn) {
  ContainerSpec a = Spec("echo up > ready; exec sleep 1000");
  MakeReadyFifo(a, "ready");
  ASSERT_TRUE(runtime_.Start(a).ok());
  AwaitReady(a, "ready");
  const pid_t first = runtime_.fork_server_pid();
  ASSERT_GT(first, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_EQ(::waitpid(first, nullptr, 0), first);  // ours: as the server's ReapEnded would

  ContainerSpec b = Spec("echo up > ready; exec sleep 1000");
  b.id = "alice/test/c-1";
  b.shim_dir = dir_ + "/shim-b";
  b.work_dir = dir_ + "/work-b";
  b.cgroup = "tarn-test-" + std::to_string(::getpid()) + "/alice/test/c-1";
  MakeReadyFifo(b, "ready");
  auto started = runtime_.Start(b);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  AwaitReady(b, "ready");
  EXPECT_GT(runtime_.fork_server_pid(), 0);
  EXPECT_NE(runtime_.fork_server_pid(), first);

  for (const ContainerSpec* spec : {&a, &b}) {
    auto st = runtime_.State(spec->shim_dir);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->phase, ContainerState::Phase::kRunning) << spec->id;
    ASSERT_TRUE(runtime_.Stop(spec->shim_dir).ok());
    auto done = runtime_.Wait(spec->shim_dir, 20s);
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    EXPECT_EQ(done->exit.signal, 15) << spec->id;
    EXPECT_FALSE(cgroups_->Exists(spec->cgroup)) << spec->cgroup;
  }
  ExpectNothingLeft(a);
}

// Without the fork server every shim is exec'd anew, and runs the same.
TEST_F(ShimRuntimeTest, WithoutTheForkServerEachShimIsExeced) {
  ShimRuntime::Options options{TARN_SHIM_BINARY};
  options.fork_server = false;
  ShimRuntime execs(options);
  ContainerSpec spec = Spec("echo out; exit 3");
  ASSERT_TRUE(execs.Start(spec).ok());
  auto done = execs.Wait(spec.shim_dir, 20s);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->exit.exit_code, 3);
  EXPECT_EQ(ReadAll(spec.shim_dir + "/stdout.log"), "out\n");
  EXPECT_EQ(execs.fork_server_pid(), -1);
  ExpectNothingLeft(spec);
}

TEST_F(ShimRuntimeTest, MissingProgramIsAnExitNotAHang) {
  ContainerSpec spec = Spec("");
  spec.argv = {"/no/such/program"};
  ContainerState st = RunToEnd(spec);
  ASSERT_EQ(st.phase, ContainerState::Phase::kExited);
  EXPECT_EQ(st.exit.exit_code, 127);
  EXPECT_NE(ReadAll(spec.shim_dir + "/stderr.log").find("cannot run /no/such/program"),
            std::string::npos);
  ExpectNothingLeft(spec);
}

TEST_F(ShimRuntimeTest, WritesConfigFilesAndUnpacksTheTarballAsTheRunUser) {
  // A tarball with lib/bin/hello.sh, made with tar itself.
  std::string src = dir_ + "/src";
  ASSERT_EQ(std::system(("mkdir -p " + src +
                         "/bin && printf '#!/bin/sh\necho hello from "
                         "tarball\n' > " +
                         src + "/bin/hello.sh && chmod 755 " + src + "/bin/hello.sh && tar -czf " +
                         dir_ + "/app.tar.gz -C " + src + " .")
                            .c_str()),
            0);
  ContainerSpec spec = Spec(
      "cat conf/index.html; echo; stat -c '%u %a' conf/index.html; "
      "lib/bin/hello.sh");
  spec.files = {{"conf/index.html", "Hello from c-0!"}};
  spec.tarball = dir_ + "/app.tar.gz";
  ContainerState st = RunToEnd(spec);
  ASSERT_EQ(st.phase, ContainerState::Phase::kExited);
  EXPECT_EQ(st.exit.exit_code, 0) << ReadAll(spec.shim_dir + "/stderr.log");
  EXPECT_EQ(ReadAll(spec.shim_dir + "/stdout.log"),
            "Hello from c-0!\n65534 644\nhello from tarball\n");
  ExpectNothingLeft(spec);
}

TEST_F(ShimRuntimeTest, APlantedSymlinkIsNotFollowed) {
  std::string secret = dir_ + "/secret";
  std::ofstream(secret) << "root's\n";
  ContainerSpec spec = Spec("true");
  ::mkdir(spec.work_dir.c_str(), 0755);
  ::mkdir((spec.work_dir + "/conf").c_str(), 0755);
  // The workload (uid 65534) owns its conf/ and planted a link to a file of root's there.
  ASSERT_EQ(::chown((spec.work_dir + "/conf").c_str(), 65534, 65534), 0);
  ASSERT_EQ(::symlink(secret.c_str(), (spec.work_dir + "/conf/x.txt").c_str()), 0);
  spec.files = {{"conf/x.txt", "overwritten"}};
  auto st = runtime_.Start(spec);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("conf/x.txt: Too many levels of symbolic links"),
            std::string::npos)
      << st.status().message();
  EXPECT_EQ(ReadAll(secret), "root's\n");
  spec.files = {{"../escape.txt", "x"}};
  EXPECT_FALSE(runtime_.Start(spec).ok());
}

TEST_F(ShimRuntimeTest, WithoutRootAUserNamespaceStillIsolates) {
  // The test runs as root; a child becomes nobody and uses the runtime from there.
  std::string base = dir_ + "/rootless";
  ASSERT_EQ(::mkdir(base.c_str(), 0755), 0);
  ASSERT_EQ(::chown(base.c_str(), 65534, 65534), 0);
  ContainerSpec spec = Spec("echo pid=$$ host=$(hostname) uid=$(id -u); grep tarn /etc/hosts");
  spec.shim_dir = base + "/shim";
  spec.work_dir = base + "/work";
  // The container's own /etc/hosts, bind-mounted inside the user namespace.
  spec.hosts_file = base + "/hosts";
  std::ofstream(spec.hosts_file) << "127.42.0.2\tc-0.test.alice.tarn c-0\n";
  ASSERT_EQ(::chown(spec.hosts_file.c_str(), 65534, 65534), 0);
  pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(10);
    ShimRuntime rootless({TARN_SHIM_BINARY});
    if (rootless.Warning().find("through a user namespace") == std::string::npos) _exit(11);
    auto st = rootless.Start(spec);
    if (!st.ok()) {
      std::ofstream(base + "/why") << st.status().ToString();
      _exit(12);
    }
    auto done = rootless.Wait(spec.shim_dir, 20s);
    _exit(done.ok() && done->phase == ContainerState::Phase::kExited ? done->exit.exit_code : 13);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << ReadAll(base + "/why");
  EXPECT_EQ(ReadAll(spec.shim_dir + "/stdout.log"),
            "pid=2 host=c-0.test.alice.tarn uid=65534\n127.42.0.2\tc-0.test.alice.tarn c-0\n");
  EXPECT_EQ(ReadAll("/etc/hosts").find("c-0.test.alice.tarn"), std::string::npos);
  EXPECT_FALSE(ProcessWithToken(token_));
}

TEST_F(ShimRuntimeTest, BadShimBinaryIsAClearError) {
  ShimRuntime broken({"/no/such/tarn-shim"});
  auto st = broken.Start(Spec("true"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("cannot run /no/such/tarn-shim"), std::string::npos)
      << st.status().message();
}

// A failed run's termination message: the last non-empty line of its stderr, bounded, valid
// UTF-8 (it goes into JSON), never through a link.
TEST(LastLogLineTest, TheLastLineOnlyBoundedAndClean) {
  TempDir tmp("last-log-line-test");
  const std::string f = tmp.path() + "/stderr.log";
  auto write = [&](const std::string& text) {
    std::ofstream(f, std::ios::trunc | std::ios::binary) << text;
  };
  EXPECT_EQ(LastLogLine(f), "");  // none yet
  write("");
  EXPECT_EQ(LastLogLine(f), "");
  write("Traceback\n  File x\nValueError: bad shape\n\n  \n");
  EXPECT_EQ(LastLogLine(f), "ValueError: bad shape");
  write("no newline at the end");
  EXPECT_EQ(LastLogLine(f), "no newline at the end");
  write(std::string(10000, 'x') + "\n" + std::string(500, 'y') + "\n");
  EXPECT_EQ(LastLogLine(f), std::string(200, 'y') + "...");
  write("caf\xc3\xa9 \x1b[31mred\xff\xc3\n");  // é kept; ESC, a stray byte, a cut one: '?'
  EXPECT_EQ(LastLogLine(f), "caf\xc3\xa9 ?[31mred??");
  write("\xc0\x80 \xed\xa0\x80\n");  // overlong, surrogate
  EXPECT_EQ(LastLogLine(f), "?? ???");
  const std::string link = tmp.path() + "/link.log";
  ASSERT_EQ(::symlink(f.c_str(), link.c_str()), 0);
  EXPECT_EQ(LastLogLine(link), "");
}

}  // namespace
}  // namespace tarn::runtime
