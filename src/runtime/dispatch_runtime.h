// DispatchRuntime: one ContainerRuntime for the local backend that runs each container the
// way its spec asks: a process (no image) through ShimRuntime, an image (a DOCKER artifact)
// through DockerRuntime. A shim directory says which holds it (DockerRuntime::Holds), so a
// restarted server finds both kinds again.
//
// The engine runtime is made at the first image start, not at server start: a server on a
// machine without podman runs processes as before, and an image start there is refused with
// the engine's reason (tried again at most every 10 s, so that installing podman needs no
// server restart). Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/container_runtime.h"

namespace tarn::runtime {

class DispatchRuntime final : public ContainerRuntime {
 public:
  using EngineFactory = std::function<StatusOr<std::unique_ptr<ContainerRuntime>>()>;

  // `processes` is not owned and must outlive this.
  DispatchRuntime(ContainerRuntime* processes, EngineFactory engine);

  StatusOr<ContainerState> Start(const ContainerSpec& spec) override;
  StatusOr<ContainerState> State(const std::string& shim_dir) const override;
  Status Stop(const std::string& shim_dir) override;
  StatusOr<ContainerState> Wait(const std::string& shim_dir,
                                std::chrono::milliseconds timeout) override;
  Status Remove(const std::string& shim_dir) override;
  void ReapEnded() override { processes_->ReapEnded(); }
  bool RunsImages() const override { return true; }

  // The engine runtime, made now if need be; FailedPrecondition with the reason when there
  // is none.
  StatusOr<ContainerRuntime*> Engine() const;

 private:
  StatusOr<ContainerRuntime*> For(const std::string& shim_dir) const;

  ContainerRuntime* processes_;
  EngineFactory factory_;
  mutable std::mutex mu_;
  mutable std::unique_ptr<ContainerRuntime> engine_;
  mutable std::string engine_error_;
  mutable std::chrono::steady_clock::time_point engine_tried_{};
};

}  // namespace tarn::runtime
