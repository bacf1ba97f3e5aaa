// The plan of an assembly: what tarn will start, in which order, with which command and
// environment, before any placement happens. `tarn explain` prints it; the service layer
// starts instances from it. Pure functions of a validated Assembly; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spec/assembly.h"
#include "spec/substitution.h"

namespace tarn::spec {

struct InstancePlan {
  std::string component;
  int64_t index = 0;
  std::string name;      // worker-0
  std::string hostname;  // worker-0.fmnist.alice.tarn
  std::string command;   // launch_command after substitution
  // The environment tarn gives the instance: the assembly's env after substitution and
  // tarn's own variables, sorted by name.
  std::vector<std::pair<std::string, std::string>> env;
  // Variables whose values exist only once the instance is placed (TARN_IP, GPUs...).
  std::vector<std::string> env_at_launch;
  std::optional<ReadinessCheck> readiness_check;  // properties after substitution
};

struct Plan {
  // Components in start order: every component of wave k depends only on components of
  // earlier waves. Declaration order inside a wave.
  std::vector<std::vector<std::string>> waves;
  // Components with a tarn.tf.role, placed as one gang when Assembly::gang.
  std::vector<std::string> gang;
  std::vector<InstancePlan> instances;  // by wave, then component, then index
};

// The ports an instance of `component` listens on, by name: tarn.ports, and tarn.tf.port as
// "tf" when it is not one of them.
std::vector<NamedPort> DeclaredPorts(const Component& component);

// The number instance `instance` ("worker-1") listens on for its declared port `declared`,
// where a backend assigned numbers of its own (Slurm: instances share their node's address).
// Without one, every instance listens on the declared numbers.
using PortLookup = std::function<int(const std::string& instance, const NamedPort& declared)>;

// The environment tarn gives instance `index` of `component` before placement: the
// component's env after substitution with `vars`, TARN_ASSEMBLY, TARN_USER, TARN_DOMAIN,
// TARN_COMPONENT, TARN_INSTANCE, TARN_INDEX, TARN_HOSTNAME, TARN_VCORES, TARN_MEMORY_MB,
// TARN_PORT_<NAME> and TF_CONFIG (their numbers through `ports` when given); sorted by name.
std::vector<std::pair<std::string, std::string>> InstanceEnv(
    const Assembly& assembly, const Component& component, int64_t index, const std::string& user,
    const std::string& domain, const Variables& vars, const PortLookup& ports = nullptr);

// REQUIRES: `assembly` came out of ParseAssembly without errors.
Plan MakePlan(const Assembly& assembly, const std::string& user, const std::string& domain);

// TF_CONFIG for instance `index` of `component`, exactly as TensorFlow reads it:
// {"cluster":{"ps":["ps-0.a.u.d:2222",...],"worker":[...]},"task":{"type":"worker","index":1}}.
// Empty when the component has no tarn.tf.role. Each member's port is its tf port, through
// `ports` when given.
std::string TfConfigJson(const Assembly& assembly, const Component& component, int64_t index,
                         const std::string& user, const std::string& domain,
                         const PortLookup& ports = nullptr);

}  // namespace tarn::spec
