// ShimRuntime: containers as processes under tarn-shim, isolated with PID, mount, UTS and
// IPC namespaces and a cgroup (memory, CPU, pids, devices) when tarn runs as root. Without
// root it runs a plain process group and says so in Warning(). As its shims' subreaper it
// waits for every shim that ends (State() and ReapEnded(), which may run on different
// threads and race harmlessly); otherwise thread-compatible.
#pragma once

#include <memory>
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
  };
  explicit ShimRuntime(Options options);

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

 private:
  Options options_;
  std::string shim_comm_;  // the shim's command name in /proc (its file name, 15 bytes)
};

}  // namespace tarn::runtime
