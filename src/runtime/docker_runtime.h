// DockerRuntime: containers of DOCKER artifacts, run by a Docker or Podman engine through its
// command line, with the same hostname, environment, limits (memory without swap, CPUs,
// pids), GPUs (--gpus device=...) and bind-mounted directories as ShimRuntime gives a
// process. `--init` puts a signal-forwarding PID 1 in front of the workload, as tarn-shim
// does. The engine's container id is kept in the shim directory, so a restarted server
// finds the container again. Thread-compatible.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "runtime/container_runtime.h"

namespace tarn::runtime {

class DockerRuntime final : public ContainerRuntime {
 public:
  struct Options {
    // "docker", "podman", or a path. Empty: docker, else podman, whichever answers.
    std::string engine;
    std::chrono::milliseconds command_timeout{60000};
  };

  // Fails with a clear message when no engine answers (`<engine> info`).
  static StatusOr<std::unique_ptr<DockerRuntime>> Create(Options options);

  const std::string& engine() const { return engine_; }

  StatusOr<ContainerState> Start(const ContainerSpec& spec) override;
  StatusOr<ContainerState> State(const std::string& shim_dir) const override;
  Status Stop(const std::string& shim_dir) override;
  StatusOr<ContainerState> Wait(const std::string& shim_dir,
                                std::chrono::milliseconds timeout) override;
  Status Remove(const std::string& shim_dir) override;
  bool RunsImages() const override { return true; }

  // The `run` command line for a spec (exposed for tests and `tarn explain`).
  static std::vector<std::string> RunArgs(const std::string& engine, const ContainerSpec& spec);

 private:
  DockerRuntime(std::string engine, Options options);
  StatusOr<std::string> ContainerId(const std::string& shim_dir) const;

  std::string engine_;
  Options options_;
};

}  // namespace tarn::runtime
