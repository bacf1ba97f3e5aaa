// YARN's constant substitution: ${SERVICE_NAME}, ${COMPONENT_INSTANCE_NAME}, ${WORKER-0_HOST},
// ... in launch commands, env values, config file properties, readiness checks and
// quicklinks, exactly as YARN's service AM replaces them (Configurations.md: "Constant
// variables for custom service"). A ${NAME} tarn does not know is left as written, for the
// shell, as YARN leaves it. Value types; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "spec/assembly.h"

namespace tarn::spec {

class Variables {
 public:
  void Set(std::string name, std::string value) { values_[std::move(name)] = std::move(value); }
  // A variable tarn knows whose value exists only once an instance is placed (its
  // ${CONTAINER_ID}, a peer's ${PS-0_IP}): left as written until then, and not "unknown".
  void Defer(std::string name) { deferred_.insert(std::move(name)); }

  // Makes ${<COMPONENT>-<i>_HOST} resolve for i < count (and ${..._IP} deferred), computed
  // on lookup so that an assembly of many instances costs nothing here.
  void AddInstances(const std::string& component, int64_t count);
  void SetNameSuffix(std::string suffix) { name_suffix_ = std::move(suffix); }
  // Answers ${<INSTANCE>_IP} with `lookup(instance)` ("ps-0"): the address the backend holds
  // for it, "" while it has none (not placed yet), when the value stays deferred.
  void SetAddressLookup(std::function<std::string(const std::string& instance)> lookup) {
    address_lookup_ = std::move(lookup);
  }

  std::optional<std::string> Find(const std::string& name) const;
  bool IsDeferred(const std::string& name) const;
  // The instance ("ps-0") whose address ${name} is, when name is <INSTANCE>_IP of one of the
  // assembly's instances.
  std::optional<std::string> AddressOf(const std::string& name) const {
    return InstanceOf(name, "_IP");
  }

 private:
  // The lowercase instance name when `name` is "<COMPONENT>-<i><suffix>" of a known instance.
  std::optional<std::string> InstanceOf(const std::string& name, std::string_view suffix) const;

  std::map<std::string, std::string> values_;
  std::set<std::string> deferred_;
  std::map<std::string, int64_t> instance_counts_;  // by uppercase component name
  std::string name_suffix_;                         // ".<assembly>.<user>.<domain>"
  std::function<std::string(const std::string&)> address_lookup_;
};

struct Expansion {
  std::string text;
  std::vector<std::string> unknown;   // names in ${...} that are neither set nor deferred
  std::vector<std::string> deferred;  // names left as written: their values do not exist yet
};

Expansion Substitute(std::string_view text, const Variables& vars);

// The variable that names `instance`'s address: "ps-0" -> "PS-0_IP".
std::string AddressVariable(std::string_view instance);

// The instances ("ps-0") whose ${<INSTANCE>_IP} `text` still holds after substitution with
// `vars`: addresses that did not exist yet.
std::vector<std::string> UnresolvedAddresses(std::string_view text, const Variables& vars);

// The variables every instance of the assembly shares: SERVICE_NAME(.lc), USER, DOMAIN,
// CLUSTER_FS_URI, and ${<INSTANCE>_HOST} / ${<INSTANCE>_IP} for every instance in it.
Variables AssemblyVariables(const Assembly& assembly, const std::string& user,
                            const std::string& domain);

// Adds one instance's own: COMPONENT_NAME(.lc), COMPONENT_INSTANCE_NAME, COMPONENT_ID (its
// index), CONTAINER_ID and SERVICE_HDFS_DIR (deferred) and THIS_HOST.
Variables InstanceVariables(Variables base, const Assembly& assembly, const Component& component,
                            int64_t index, const std::string& user, const std::string& domain);

// "<component>-<index>" and "<component>-<index>.<assembly>.<user>.<domain>".
std::string InstanceName(std::string_view component, int64_t index);
std::string InstanceHostname(std::string_view instance, std::string_view assembly,
                             std::string_view user, std::string_view domain);

// A hint for a ${NAME} tarn leaves alone, when there is something useful to say (YARN
// variables that need HDFS or ZooKeeper); empty otherwise.
std::string UnknownVariableHint(const std::string& name);

}  // namespace tarn::spec
