// bench/run runtime: how long tarn's runtime takes from "start these N instances" to "all
// running", and from "stop them" to "stopped and cleaned up" (no process, no cgroup left),
// for N = 1, 10, 100 (medians of 7, 3, 3), next to plain fork+exec of the same command (and kill +
// waitpid) as the floor, in the same run. Each instance is `sleep 1000` under tarn-shim with its
// own PID, mount, UTS and IPC namespaces and cgroup. N = 1 is the median of 7 starts, each 300 ms
// after the last cgroup move, as a start on a quiet machine is (the kernel's cgroup lock
// goes back to its reader-friendly state within milliseconds of a move).
//
// The starts are measured twice, round by round in turn: with the shims forked by
// tarn-shim's fork server (the default; keys without a suffix), and exec'd one by one, as
// before it (keys with _exec_each).
//
// With --favordynmods on a machine where the kernel's favordynmods is off, it measures, turns
// it on (runtime/cgroup_dynmods.h: machine-wide, until reboot) and measures again: the keys
// ending in _favordynmods. `favordynmods_at_start` says how the machine was found. Needs
// root. Prints one flat JSON object.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "runtime/cgroup_dynmods.h"
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

struct Round {
  double tarn_start_ms = 0, tarn_stop_ms = 0, fork_exec_ms = 0, kill_wait_ms = 0;
};

// Starts n containers, stops and removes them; then fork+exec of the same command n times.
bool MeasureRound(tarn::runtime::ShimRuntime& runtime, const std::string& dir, int n,
                  const std::string& tag, Round* r) {
  std::vector<ContainerSpec> specs;
  for (int i = 0; i < n; ++i) {
    ContainerSpec s;
    s.id = "bench/rt/c-" + std::to_string(i);
    s.shim_dir = dir + "/" + tag + "/shim-" + std::to_string(i);
    s.work_dir = dir + "/" + tag + "/work-" + std::to_string(i);
    s.hostname = "c-" + std::to_string(i) + ".rt.bench.tarn";
    s.argv = {"/bin/sh", "-c", "sleep 1000"};
    s.env = {"PATH=/usr/bin:/bin"};
    s.cgroup = "tarn-bench-" + std::to_string(::getpid()) + "/" + tag + "-" + std::to_string(i);
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
      return false;
    }
  }
  auto t1 = Clock::now();
  for (const ContainerSpec& s : specs) {
    if (!runtime.Stop(s.shim_dir).ok()) return false;
  }
  for (const ContainerSpec& s : specs) {
    auto st = runtime.Wait(s.shim_dir, std::chrono::seconds(60));
    if (!st.ok() || st->phase != tarn::runtime::ContainerState::Phase::kExited) {
      std::fprintf(stderr, "stop did not finish for %s\n", s.id.c_str());
      return false;
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
  *r = Round{Ms(t1 - t0), Ms(t2 - t1), Ms(f1 - f0), Ms(f2 - f1)};
  return true;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// N = 1 (median of 7, spaced), 10 and 100 (medians of 3), for each of `runtimes` in turn,
// round by round, so that the machine's drift falls on all alike; into `out` with the
// runtime's suffix and then `suffix` after each key.
using Runtimes = std::vector<std::pair<tarn::runtime::ShimRuntime*, std::string>>;
bool Measure(const Runtimes& runtimes, const std::string& dir, const std::string& suffix,
             nlohmann::json& out) {
  for (int n : {1, 10, 100}) {
    const int reps = n == 1 ? 7 : 3;
    std::vector<std::vector<Round>> rounds(runtimes.size());
    for (int rep = 0; rep < reps; ++rep) {
      for (size_t i = 0; i < runtimes.size(); ++i) {
        if (n == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        Round r;
        const std::string tag =
            std::to_string(n) + runtimes[i].second + suffix + "-" + std::to_string(rep);
        if (!MeasureRound(*runtimes[i].first, dir, n, tag, &r)) return false;
        rounds[i].push_back(r);
      }
    }
    for (size_t i = 0; i < runtimes.size(); ++i) {
      std::vector<double> start, stop, fork_exec, kill_wait;
      for (const Round& r : rounds[i]) {
        start.push_back(r.tarn_start_ms);
        stop.push_back(r.tarn_stop_ms);
        fork_exec.push_back(r.fork_exec_ms);
        kill_wait.push_back(r.kill_wait_ms);
      }
      const std::string k = std::to_string(n) + runtimes[i].second + suffix;
      out["tarn_start_ms_" + k] = Median(start);
      out["tarn_stop_cleaned_ms_" + k] = Median(stop);
      out["fork_exec_start_ms_" + k] = Median(fork_exec);
      out["kill_wait_ms_" + k] = Median(kill_wait);
      out["tarn_start_ms_all_" + k] = start;
      out["start_ratio_tarn_vs_fork_exec_" + k] = Median(start) / Median(fork_exec);
      out["stop_ratio_tarn_vs_kill_wait_" + k] = Median(stop) / Median(kill_wait);
    }
  }
  return true;
}

bool FavorsDynmodsNow() {
  auto text = tarn::ReadFileToString("/proc/self/mountinfo", 4 << 20);
  return text.ok() && tarn::runtime::FavorsDynmods(tarn::runtime::CgroupMounts(*text));
}

}  // namespace

int main(int argc, char** argv) {
  const bool favor = argc == 3 && std::string(argv[2]) == "--favordynmods";
  if (argc != 2 && !favor) {
    std::fprintf(stderr, "usage: runtime_bench PATH_OF_TARN_SHIM [--favordynmods]\n");
    return 2;
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "runtime_bench: needs root (namespaces and cgroups)\n");
    return 1;
  }
  char tmpl[] = "/tmp/tarn-runtime-bench-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  // Shims forked by tarn-shim's fork server (the default), and, as before it, exec'd each.
  tarn::runtime::ShimRuntime runtime({argv[1]});
  tarn::runtime::ShimRuntime::Options exec_each{argv[1]};
  exec_each.fork_server = false;
  tarn::runtime::ShimRuntime exec_runtime(exec_each);
  const Runtimes runtimes = {{&runtime, ""}, {&exec_runtime, "_exec_each"}};
  nlohmann::json out;
  out["benchmark"] = "runtime";
  const bool at_start = FavorsDynmodsNow();
  out["favordynmods_at_start"] = at_start;
  bool ok = Measure(runtimes, dir, "", out);
  if (ok && favor && !at_start) {
    auto turned = tarn::runtime::FavorDynmods();
    if (!turned.ok()) {
      std::fprintf(stderr, "runtime_bench: %s\n", turned.status().ToString().c_str());
      ok = false;
    } else {
      std::fprintf(stderr, "runtime_bench: %s\n", turned->c_str());
      // ext4 without a journal passes over inodes freed in the last 60 s when it allocates
      // one: the first round's thousand files would slow the second round's creates.
      std::this_thread::sleep_for(std::chrono::seconds(65));
      ok = Measure(runtimes, dir, "_favordynmods", out);
    }
  }
  std::system(("rm -rf " + dir).c_str());
  if (!ok) return 1;
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
