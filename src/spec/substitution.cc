#include "spec/substitution.h"

#include <cctype>

namespace tarn::spec {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

void Variables::AddInstances(const std::string& component, int64_t count) {
  instance_counts_[Upper(component)] = count;
}

std::optional<std::string> Variables::InstanceOf(const std::string& name,
                                                 std::string_view suffix) const {
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) return std::nullopt;
  std::string_view instance(name.data(), name.size() - suffix.size());
  size_t dash = instance.rfind('-');
  if (dash == std::string_view::npos || dash + 1 == instance.size()) return std::nullopt;
  std::string_view digits = instance.substr(dash + 1);
  if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int64_t index = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + (c - '0');
  }
  auto it = instance_counts_.find(std::string(instance.substr(0, dash)));
  if (it == instance_counts_.end() || index >= it->second) return std::nullopt;
  return Lower(instance);
}

std::optional<std::string> Variables::Find(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  if (auto instance = InstanceOf(name, "_HOST")) return *instance + name_suffix_;
  if (address_lookup_) {
    if (auto instance = InstanceOf(name, "_IP")) {
      std::string address = address_lookup_(*instance);
      if (!address.empty()) return address;
    }
  }
  return std::nullopt;
}

bool Variables::IsDeferred(const std::string& name) const {
  return deferred_.count(name) > 0 || InstanceOf(name, "_IP").has_value();
}

Expansion Substitute(std::string_view text, const Variables& vars) {
  Expansion out;
  out.text.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t open = text.find("${", i);
    if (open == std::string_view::npos) {
      out.text.append(text.substr(i));
      break;
    }
    size_t close = text.find('}', open + 2);
    if (close == std::string_view::npos) {
      out.text.append(text.substr(i));
      break;
    }
    out.text.append(text.substr(i, open - i));
    std::string name(text.substr(open + 2, close - open - 2));
    if (auto value = vars.Find(name)) {
      out.text += *value;
    } else {
      out.text.append(text.substr(open, close - open + 1));
      (vars.IsDeferred(name) ? out.deferred : out.unknown).push_back(name);
    }
    i = close + 1;
  }
  return out;
}

std::string AddressVariable(std::string_view instance) { return Upper(instance) + "_IP"; }

std::vector<std::string> UnresolvedAddresses(std::string_view text, const Variables& vars) {
  std::vector<std::string> out;
  for (const std::string& name : Substitute(text, vars).deferred) {
    if (auto instance = vars.AddressOf(name)) out.push_back(*instance);
  }
  return out;
}

std::string InstanceName(std::string_view component, int64_t index) {
  std::string out(component);
  out += '-';
  out += std::to_string(index);
  return out;
}

std::string InstanceHostname(std::string_view instance, std::string_view assembly,
                             std::string_view user, std::string_view domain) {
  std::string out(instance);
  for (std::string_view part : {assembly, user, domain}) {
    out += '.';
    out += part;
  }
  return out;
}

Variables AssemblyVariables(const Assembly& assembly, const std::string& user,
                            const std::string& domain) {
  Variables vars;
  vars.Set("SERVICE_NAME", assembly.name);
  vars.Set("SERVICE_NAME.lc", Lower(assembly.name));
  vars.Set("USER", user);
  vars.Set("DOMAIN", domain);
  // tarn's shared file system is the machine's own: TARN_SHARED_DIR lives on it.
  vars.Set("CLUSTER_FS_URI", "file:///");
  vars.SetNameSuffix(InstanceHostname("", assembly.name, user, domain));
  for (const Component& c : assembly.components) vars.AddInstances(c.name, c.number_of_containers);
  return vars;
}

Variables InstanceVariables(Variables vars, const Assembly& assembly, const Component& component,
                            int64_t index, const std::string& user, const std::string& domain) {
  std::string instance = InstanceName(component.name, index);
  vars.Set("COMPONENT_NAME", component.name);
  vars.Set("COMPONENT_NAME.lc", Lower(component.name));
  vars.Set("COMPONENT_INSTANCE_NAME", instance);
  vars.Set("COMPONENT_ID", std::to_string(index));
  vars.Set("THIS_HOST", InstanceHostname(instance, assembly.name, user, domain));
  vars.Defer("CONTAINER_ID");
  vars.Defer("SERVICE_HDFS_DIR");
  return vars;
}

std::string UnknownVariableHint(const std::string& name) {
  if (name == "CLUSTER_ZK_QUORUM" || name == "SERVICE_ZK_PATH") {
    return "tarn runs no ZooKeeper";
  }
  if (name == "CLUSTER_FS_HOST") return "tarn's cluster file system is the local one";
  if (name.size() > 5 && (name.ends_with("_HOST") || name.ends_with("_IP"))) {
    return "no instance of that name in this assembly; write <COMPONENT>-<index>_HOST in "
           "uppercase";
  }
  return "";
}

}  // namespace tarn::spec
