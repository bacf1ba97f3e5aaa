// ContainerRuntime: the seam between the service layer and "how containers run" (Mesos'
// isolator contract, leveldb's Env). ShimRuntime (shim_runtime.h) runs each container under
// tarn-shim with namespaces and cgroups; the service layer's tests use a fake.
//
// A container is named by its shim directory, which holds everything the runtime knows of
// it, so a restarted tarn server finds its containers again from the directories alone.
// Implementations are thread-compatible.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

#include "common/status.h"
#include "runtime/container_spec.h"

namespace tarn::runtime {

struct ContainerState {
  enum class Phase { kRunning, kExited, kLost };
  Phase phase = Phase::kRunning;
  pid_t shim_pid = 0;
  ExitInfo exit;            // kExited
  std::string diagnostics;  // kExited: how it ended; kLost: why nothing is known
};

class ContainerRuntime {
 public:
  virtual ~ContainerRuntime() = default;
  // Starts the container and returns once its workload runs (or why it could not start).
  virtual StatusOr<ContainerState> Start(const ContainerSpec& spec) = 0;
  // What the container is doing now; also how a restarted server re-attaches.
  virtual StatusOr<ContainerState> State(const std::string& shim_dir) const = 0;
  // Asks the container to stop: SIGTERM, then SIGKILL after the spec's grace period.
  // Returns at once; State() reports kExited when it is gone.
  virtual Status Stop(const std::string& shim_dir) = 0;
  // Waits until the container is no longer running, at most `timeout`.
  virtual StatusOr<ContainerState> Wait(const std::string& shim_dir,
                                        std::chrono::milliseconds timeout) = 0;
  // Deletes what is left of an exited container (its shim directory and logs).
  virtual Status Remove(const std::string& shim_dir) = 0;
  // Waits for the processes of containers that have ended and whose parent this process is
  // (a runtime whose supervisors are its children, or re-parented to it), so that none stays
  // a zombie. Callers call it from time to time; State() may do it too.
  virtual void ReapEnded() {}
  // Whether it runs a DOCKER artifact's image. A backend whose runtime does not refuses such
  // a start, never runs its command on the host without the image.
  virtual bool RunsImages() const { return false; }
};

}  // namespace tarn::runtime
