// bench/run runtime: how long tarn's runtime takes from "start these N instances" to "all
// running", and from "stop them" to "stopped and cleaned up" (no process, no cgroup left),
// for N = 1, 10, 100, next to plain fork+exec of the same command (and kill + waitpid) as
// the floor, in the same run. Each instance is `sleep 1000` under tarn-shim with its own PID,
// mount, UTS and IPC namespaces and cgroup. Needs root. Prints one flat JSON object.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/shim_runtime.h"

namespace {

using Clock = std::chrono::steady_clock;
using tarn::runtime::ContainerSpec;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Starts `sh -c "sleep 1000"` in its own process group and returns once exec has happened
// (a CLOEXEC pipe closes).
pid_t ForkExec() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) std::abort();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // so that the stop below reaches sleep too, as tarn's stop does
    ::execl("/bin/sh", "sh", "-c", "sleep 1000", nullptr);
    ::_exit(127);
  }
  ::close(p[1]);
  char c;
  while (::read(p[0], &c, 1) > 0) {
  }
  ::close(p[0]);
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: runtime_bench PATH_OF_TARN_SHIM\n");
    return 2;
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "runtime_bench: needs root (namespaces and cgroups)\n");
    return 1;
  }
  char tmpl[] = "/tmp/tarn-runtime-bench-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  tarn::runtime::ShimRuntime runtime({argv[1]});
  nlohmann::json out;
  out["benchmark"] = "runtime";
  for (int n : {1, 10, 100}) {
    std::vector<ContainerSpec> specs;
    for (int i = 0; i < n; ++i) {
      ContainerSpec s;
      s.id = "bench/rt/c-" + std::to_string(i);
      s.shim_dir = dir + "/" + std::to_string(n) + "/shim-" + std::to_string(i);
      s.work_dir = dir + "/" + std::to_string(n) + "/work-" + std::to_string(i);
      s.hostname = "c-" + std::to_string(i) + ".rt.bench.tarn";
      s.argv = {"/bin/sh", "-c", "sleep 1000"};
      s.env = {"PATH=/usr/bin:/bin"};
      s.cgroup = "tarn-bench-" + std::to_string(::getpid()) + "/c-" + std::to_string(i);
      s.limits.memory_mib = 128;
      s.limits.vcores = 1;
      s.limits.pids_max = 64;
      s.stop_grace_ms = 5000;
      specs.push_back(std::move(s));
    }
    auto t0 = Clock::now();
    for (const ContainerSpec& s : specs) {
      auto st = runtime.Start(s);
      if (!st.ok()) {
        std::fprintf(stderr, "start: %s\n", st.status().ToString().c_str());
        return 1;
      }
    }
    auto t1 = Clock::now();
    for (const ContainerSpec& s : specs) {
      if (!runtime.Stop(s.shim_dir).ok()) return 1;
    }
    for (const ContainerSpec& s : specs) {
      auto st = runtime.Wait(s.shim_dir, std::chrono::seconds(60));
      if (!st.ok() || st->phase != tarn::runtime::ContainerState::Phase::kExited) {
        std::fprintf(stderr, "stop did not finish for %s\n", s.id.c_str());
        return 1;
      }
    }
    auto t2 = Clock::now();
    for (const ContainerSpec& s : specs) runtime.Remove(s.shim_dir).ok();

    std::vector<pid_t> pids;
    auto f0 = Clock::now();
    for (int i = 0; i < n; ++i) pids.push_back(ForkExec());
    auto f1 = Clock::now();
    for (pid_t p : pids) ::kill(-p, SIGTERM);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
    auto f2 = Clock::now();

    std::string k = std::to_string(n);
    out["tarn_start_ms_" + k] = Ms(t1 - t0);
    out["tarn_stop_cleaned_ms_" + k] = Ms(t2 - t1);
    out["fork_exec_start_ms_" + k] = Ms(f1 - f0);
    out["kill_wait_ms_" + k] = Ms(f2 - f1);
    out["start_ratio_tarn_vs_fork_exec_" + k] = Ms(t1 - t0) / Ms(f1 - f0);
    out["stop_ratio_tarn_vs_kill_wait_" + k] = Ms(t2 - t1) / Ms(f2 - f1);
  }
  std::system(("rm -rf " + dir).c_str());
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
