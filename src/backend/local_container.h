// From an assembly's instance and its placement to the ContainerSpec the local runtime starts:
// paths, hostname, command, environment (TF_CONFIG, TARN_*, GPUs), limits, config files
// rendered from the spec, the artifact. This is where the assembly model meets the runtime,
// which knows nothing of specs. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/container_spec.h"
#include "runtime/run_as.h"
#include "spec/assembly.h"
#include "spec/plan.h"

namespace tarn::backend {

struct LaunchContext {
  std::string state_dir;  // the server's --state-dir
  std::string user;       // the owner, as a DNS label
  std::string domain = "tarn";
  std::string bin_dir;       // where tarn's own binaries are: first on the instance's PATH
  std::string ip;            // TARN_IP: the address the instance binds
  std::string container_id;  // TARN_CONTAINER_ID / ${CONTAINER_ID}, new for every start
  runtime::RunAs run_as;
  bool restrict_devices = false;  // the node has real NVIDIA GPUs: confine each container
  int64_t pids_max = 4096;
  // SIGTERM to SIGKILL for components without tarn.stop.grace_secs.
  int64_t stop_grace_ms = spec::kDefaultStopGraceSecs * 1000;
  std::string system_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  // The ports of the assembly's instances (TARN_PORT_*, TF_CONFIG); empty: the declared ones.
  spec::PortLookup ports;
  // The address of another instance of the assembly ("ps-0") for ${PS-0_IP}: "" while it has
  // none. Unset: every such address is unknown.
  std::function<std::string(const std::string& instance)> peer_address;
  // TARN_ASSEMBLY_SECRET: the assembly's own secret, in its instances' environment alone (a
  // ps admits only the processes that hold it); "" none.
  std::string assembly_secret;
};

// The secret of each assembly: HMAC-SHA256 of "user/assembly" under the server's key.
using AssemblySecrets =
    std::function<std::string(const std::string& user, const std::string& assembly)>;

// OK unless `component` asks for an image (a DOCKER artifact) and the backend's runtime
// runs none (`runs_images`): then FailedPrecondition saying so. Such a start is refused,
// never run on the host without the image the user asked for.
Status CheckArtifactRuns(const spec::Component& component, bool runs_images);

// <state>/containers/<user>/<assembly>/<instance>, <state>/shims/..., <state>/shared/...
std::string WorkDir(const LaunchContext& c, const std::string& assembly,
                    const std::string& instance);
std::string ShimDir(const LaunchContext& c, const std::string& assembly,
                    const std::string& instance);
std::string SharedDir(const LaunchContext& c, const std::string& assembly);

// `check` with the instance's variables (${CONTAINER_ID}, ${SERVICE_HDFS_DIR}, its names)
// substituted into its properties, as its container sees them.
spec::ReadinessCheck SubstituteCheck(const spec::ReadinessCheck& check,
                                     const spec::Assembly& assembly,
                                     const spec::Component& component, int64_t index,
                                     const std::string& container_id, const LaunchContext& ctx);

// The UTS name: the instance's DNS name when it fits the kernel's 64 bytes, else its short
// name (worker-0).
std::string ContainerHostname(const std::string& fqdn, const std::string& instance);

StatusOr<runtime::ContainerSpec> BuildContainerSpec(const spec::Assembly& assembly,
                                                    const spec::Component& component, int64_t index,
                                                    const std::vector<int>& gpus,
                                                    const LaunchContext& context);

}  // namespace tarn::backend
