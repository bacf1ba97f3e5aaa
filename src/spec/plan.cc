#include "spec/plan.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/status.h"
#include "spec/substitution.h"

namespace tarn::spec {
namespace {

std::vector<std::vector<std::string>> StartWaves(const Assembly& a) {
  std::vector<std::vector<std::string>> waves;
  std::set<std::string> started;
  std::vector<bool> done(a.components.size(), false);
  size_t remaining = a.components.size();
  while (remaining > 0) {
    std::vector<std::string> wave;
    std::vector<size_t> picked;
    for (size_t i = 0; i < a.components.size(); ++i) {
      if (done[i]) continue;
      const auto& deps = a.components[i].dependencies;
      if (std::all_of(deps.begin(), deps.end(),
                      [&](const std::string& d) { return started.count(d) > 0; })) {
        wave.push_back(a.components[i].name);
        picked.push_back(i);
      }
    }
    TARN_CHECK(!picked.empty());  // the validator rejects cycles
    for (size_t i : picked) {
      done[i] = true;
      started.insert(a.components[i].name);
      --remaining;
    }
    waves.push_back(std::move(wave));
  }
  return waves;
}

// A port name as the suffix of its TARN_PORT_<NAME> variable: uppercase, '-' -> '_'.
std::string PortEnvSuffix(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c == '-') c = '_';
  }
  return s;
}

// The declared port TF_CONFIG names for the component's instances.
NamedPort TfPort(const Component& c) {
  for (const NamedPort& p : c.ports) {
    if (p.port == *c.tf_port) return p;
  }
  return {"tf", *c.tf_port};
}

}  // namespace

std::vector<NamedPort> DeclaredPorts(const Component& c) {
  std::vector<NamedPort> out = c.ports;
  if (c.tf_port) {
    NamedPort tf = TfPort(c);
    if (tf.name == "tf" && std::find(out.begin(), out.end(), tf) == out.end()) out.push_back(tf);
  }
  return out;
}

std::string TfConfigJson(const Assembly& a, const Component& component, int64_t index,
                         const std::string& user, const std::string& domain,
                         const PortLookup& ports) {
  if (component.tf_role == TfRole::kNone) return "";
  nlohmann::json cluster = nlohmann::json::object();
  for (const Component& c : a.components) {
    if (c.tf_role == TfRole::kNone || c.number_of_containers == 0 || !c.tf_port) continue;
    nlohmann::json& job = cluster[TfRoleName(c.tf_role)];
    job = nlohmann::json::array();
    const NamedPort tf = TfPort(c);
    for (int64_t i = 0; i < c.number_of_containers; ++i) {
      const std::string instance = InstanceName(c.name, i);
      const int port = ports ? ports(instance, tf) : tf.port;
      job.push_back(InstanceHostname(instance, a.name, user, domain) + ":" + std::to_string(port));
    }
  }
  nlohmann::json config = {
      {"cluster", cluster},
      {"task", {{"type", TfRoleName(component.tf_role)}, {"index", index}}},
  };
  return config.dump();
}

std::vector<std::pair<std::string, std::string>> InstanceEnv(
    const Assembly& a, const Component& c, int64_t i, const std::string& user,
    const std::string& domain, const Variables& vars, const PortLookup& ports) {
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : c.configuration.env) env[k] = Substitute(v, vars).text;
  std::string instance = InstanceName(c.name, i);
  env["TARN_ASSEMBLY"] = a.name;
  env["TARN_USER"] = user;
  env["TARN_DOMAIN"] = domain;
  env["TARN_COMPONENT"] = c.name;
  env["TARN_INSTANCE"] = instance;
  env["TARN_INDEX"] = std::to_string(i);
  env["TARN_HOSTNAME"] = InstanceHostname(instance, a.name, user, domain);
  env["TARN_VCORES"] = std::to_string(c.resource.cpus.value_or(0));
  env["TARN_MEMORY_MB"] = std::to_string(c.resource.memory_mib.value_or(0));
  for (const NamedPort& p : c.ports) {
    env["TARN_PORT_" + PortEnvSuffix(p.name)] = std::to_string(ports ? ports(instance, p) : p.port);
  }
  std::string tf = TfConfigJson(a, c, i, user, domain, ports);
  if (!tf.empty()) env["TF_CONFIG"] = tf;
  return {env.begin(), env.end()};
}

Plan MakePlan(const Assembly& a, const std::string& user, const std::string& domain) {
  Plan plan;
  plan.waves = StartWaves(a);
  for (const Component& c : a.components) {
    if (c.tf_role != TfRole::kNone) plan.gang.push_back(c.name);
  }
  if (!a.gang) plan.gang.clear();
  std::map<std::string, const Component*> by_name;
  for (const Component& c : a.components) by_name[c.name] = &c;
  Variables base = AssemblyVariables(a, user, domain);
  for (const auto& wave : plan.waves) {
    for (const std::string& name : wave) {
      const Component& c = *by_name.at(name);
      for (int64_t i = 0; i < c.number_of_containers; ++i) {
        Variables vars = InstanceVariables(base, a, c, i, user, domain);
        InstancePlan inst;
        inst.component = c.name;
        inst.index = i;
        inst.name = InstanceName(c.name, i);
        inst.hostname = InstanceHostname(inst.name, a.name, user, domain);
        inst.command = Substitute(c.launch_command, vars).text;
        inst.env = InstanceEnv(a, c, i, user, domain, vars);
        inst.env_at_launch = {"TARN_IP", "TARN_SHARED_DIR", "TARN_CONTAINER_ID",
                              "TARN_ASSEMBLY_SECRET"};
        if (c.resource.gpus.value_or(0) > 0) {
          inst.env_at_launch.push_back("CUDA_VISIBLE_DEVICES");
          inst.env_at_launch.push_back("NVIDIA_VISIBLE_DEVICES");
        }
        if (c.readiness_check) {
          ReadinessCheck check = *c.readiness_check;
          for (auto& [k, v] : check.properties) v = Substitute(v, vars).text;
          inst.readiness_check = std::move(check);
        }
        plan.instances.push_back(std::move(inst));
      }
    }
  }
  return plan;
}

}  // namespace tarn::spec
