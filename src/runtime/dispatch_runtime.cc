#include "runtime/dispatch_runtime.h"

#include "runtime/docker_runtime.h"

namespace tarn::runtime {

namespace {
constexpr std::chrono::seconds kRetryEngine{10};
}  // namespace

DispatchRuntime::DispatchRuntime(ContainerRuntime* processes, EngineFactory engine)
    : processes_(processes), factory_(std::move(engine)) {}

StatusOr<ContainerRuntime*> DispatchRuntime::Engine() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (engine_) return engine_.get();
  const auto now = std::chrono::steady_clock::now();
  if (engine_error_.empty() || now - engine_tried_ >= kRetryEngine) {
    engine_tried_ = now;
    auto made = factory_ ? factory_() : UnavailableError("this server runs no container engine");
    if (made.ok()) {
      engine_ = std::move(made).value();
      engine_error_.clear();
      return engine_.get();
    }
    engine_error_ = made.status().message();
  }
  return FailedPreconditionError(engine_error_);
}

StatusOr<ContainerRuntime*> DispatchRuntime::For(const std::string& shim_dir) const {
  if (DockerRuntime::Holds(shim_dir)) return Engine();
  return processes_;
}

StatusOr<ContainerState> DispatchRuntime::Start(const ContainerSpec& spec) {
  if (spec.image.empty()) return processes_->Start(spec);
  ASSIGN_OR_RETURN(ContainerRuntime * engine, Engine());
  return engine->Start(spec);
}

StatusOr<ContainerState> DispatchRuntime::State(const std::string& shim_dir) const {
  ASSIGN_OR_RETURN(ContainerRuntime * rt, For(shim_dir));
  return rt->State(shim_dir);
}

Status DispatchRuntime::Stop(const std::string& shim_dir) {
  ASSIGN_OR_RETURN(ContainerRuntime * rt, For(shim_dir));
  return rt->Stop(shim_dir);
}

StatusOr<ContainerState> DispatchRuntime::Wait(const std::string& shim_dir,
                                               std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(ContainerRuntime * rt, For(shim_dir));
  return rt->Wait(shim_dir, timeout);
}

Status DispatchRuntime::Remove(const std::string& shim_dir) {
  ASSIGN_OR_RETURN(ContainerRuntime * rt, For(shim_dir));
  return rt->Remove(shim_dir);
}

}  // namespace tarn::runtime
