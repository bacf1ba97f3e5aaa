// ShimRuntime: containers as processes under tarn-shim, isolated with PID, mount, UTS and
// IPC namespaces and a cgroup (memory, CPU, pids, devices) when tarn runs as root. Without
// root it runs a plain process group and says so in Warning(). Each shim is forked by
// tarn-shim's fork server (shim.h), which it starts with the first container and again if
// it died, or, when that cannot be, exec'd anew. As its shims' subreaper it waits for every
// shim that ends and was re-parented to it (State() and ReapEnded(), which may run on
// different threads and race harmlessly). Start() may run on several threads at once;
// otherwise thread-compatible.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>

#include "runtime/container_runtime.h"

namespace tarn::runtime {

class ShimRuntime final : public ContainerRuntime {
 public:
  struct Options {
    std::string shim_binary;  // path of tarn-shim
    // Make this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so that detached
    // shims are re-parented to it, not to PID 1, and it reaps them when they exit. When this
    // process dies, the shims go on under the next subreaper or PID 1.
    bool reap_shims = true;
    // Fork shims from one `tarn-shim --fork-server` instead of exec'ing each.
    bool fork_server = true;
  };
  explicit ShimRuntime(Options options);
  ~ShimRuntime() override;  // closes the fork server's socket: it exits, the shims go on

  // Empty when containers are isolated; else what is missing and why.
  std::string Warning() const;

  // What containers started now get: namespaces and cgroups (root), namespaces through a
  // user namespace (no root), or nothing but a process group.
  enum class Isolation { kFull, kUserNamespace, kNone };
  Isolation isolation() const;

  StatusOr<ContainerState> Start(const ContainerSpec& spec) override;
  StatusOr<ContainerState> State(const std::string& shim_dir) const override;
  Status Stop(const std::string& shim_dir) override;
  StatusOr<ContainerState> Wait(const std::string& shim_dir,
                                std::chrono::milliseconds timeout) override;
  Status Remove(const std::string& shim_dir) override;
  // Waits for every shim that has ended and is a zombie of this process (its subreaper),
  // however its end was seen, or not seen (its directory removed first).
  void ReapEnded() override;

  // The fork server's pid, -1 before the first start or after it was found dead (tests).
  pid_t fork_server_pid() const;

 private:
  // Has the fork server fork a shim for `shim_dir` with `ready_fd` as its ready pipe;
  // the shim's pid, or 0 when the request was taken but not answered (the ready pipe then
  // says whether a shim runs). Starts the fork server first when none runs, and once more
  // when the one running is gone before it took the request. Unavailable: no fork server
  // can take it, exec the shim instead; any other error: the start fails.
  StatusOr<pid_t> ForkShim(const std::string& shim_dir, int ready_fd);
  Status StartForkServer();  // under fork_mu_; Unavailable when it cannot be run
  // Execs tarn-shim for `shim_dir` with `ready_fd` as its fd 3 (no fork server).
  Status SpawnShim(const std::string& shim_dir, int ready_fd, pid_t* pid);
  void StopForkServer();  // under fork_mu_

  Options options_;
  std::string shim_comm_;  // the shim's command name in /proc (its file name, 15 bytes)
  mutable std::mutex fork_mu_;
  pid_t fork_pid_ = -1;  // guarded by fork_mu_
  int fork_sock_ = -1;   // guarded by fork_mu_: our end of its socket
  int fork_pidfd_ = -1;  // guarded by fork_mu_
};

}  // namespace tarn::runtime
