// Preparing a container's work directory before its workload starts, shared by tarn-shim
// (process containers) and DockerRuntime (images): the spec's files (rendered config files)
// written and its TARBALL artifact unpacked, as the run user in a child process, so that a
// workload cannot redirect a write with a link it planted there. Thread-safe.
#pragma once

#include <string>

#include "runtime/container_spec.h"

namespace tarn::runtime {

// Writes spec.files and unpacks spec.tarball (at the first start) under spec.work_dir.
// Returns why it failed, or "".
std::string PrepareWorkDir(const ContainerSpec& spec);

}  // namespace tarn::runtime
