#include "cli/explain_format.h"

#include <map>
#include <sstream>

#include "spec/memory_size.h"

namespace tarn::cli {
namespace {

using spec::Assembly;
using spec::Component;

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

std::string Resources(const Component& c) {
  int64_t cpus = c.resource.cpus.value_or(0);
  std::string out = std::to_string(cpus) + (cpus == 1 ? " vcore, " : " vcores, ") +
                    spec::FormatMemoryMib(c.resource.memory_mib.value_or(0)) + " memory, ";
  int64_t gpus = c.resource.gpus.value_or(0);
  out += gpus == 0 ? "no GPUs" : std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
  return out;
}

std::string ArtifactText(const Component& c) {
  if (!c.artifact) return "none (runs launch_command as a process)";
  std::string out = std::string(spec::ArtifactTypeName(c.artifact->type)) + " " + c.artifact->id;
  return out;
}

std::string ReadinessText(const std::optional<spec::ReadinessCheck>& check) {
  if (!check || check->type == spec::ReadinessType::kDefault) return "its process is running";
  const auto& p = check->properties;
  auto get = [&](const char* k, const char* dflt) {
    auto it = p.find(k);
    return it == p.end() ? std::string(dflt) : it->second;
  };
  if (check->type == spec::ReadinessType::kHttp) {
    return "GET " + get("url", "?") + " answers " + get("min.success", "200") + "-" +
           get("max.success", "299");
  }
  return "TCP port " + get("port", "?") + " accepts connections";
}

std::string StartOrder(const Assembly& a, const std::string& name) {
  for (const Component& c : a.components) {
    if (c.name != name) continue;
    if (c.dependencies.empty()) return "first";
    return "after " + Join(c.dependencies, ", ") + " READY";
  }
  return "";
}

// The plan's components are the assembly's own.
const Component& ComponentOf(const Assembly& a, const std::string& name) {
  const Component* c = FindComponent(a, name);
  return c != nullptr ? *c : a.components.front();
}

}  // namespace

std::string FormatPlanText(const Assembly& a, const spec::Plan& plan, const std::string& user) {
  std::ostringstream out;
  out << "assembly    " << a.name << " (version " << a.version << ")\n";
  out << "user        " << user << "\n";
  out << "queue       " << (a.queue.empty() ? "default" : a.queue) << "\n";
  out << "lifetime    "
      << (a.lifetime_seconds ? std::to_string(*a.lifetime_seconds) + " s" : "unlimited") << "\n";
  out << "on launch   "
      << (a.desired_state == spec::DesiredState::kStopped ? "saved, not started (state STOPPED)"
                                                          : "started")
      << "\n";
  if (!plan.gang.empty()) {
    out << "gang        " << Join(plan.gang, ", ") << " (placed all together or not at all)\n";
  }
  out << "\nstart order\n";
  for (size_t w = 0; w < plan.waves.size(); ++w) {
    for (const std::string& name : plan.waves[w]) {
      const Component& c = ComponentOf(a, name);
      std::string line = "  " + std::to_string(w + 1) + "  " + name;
      line.resize(std::max<size_t>(line.size() + 1, 24), ' ');
      line += std::to_string(c.number_of_containers) +
              (c.number_of_containers == 1 ? " instance,  " : " instances, ");
      line += StartOrder(a, name);
      out << line << "\n";
    }
  }
  out << "\ninstances (" << plan.instances.size() << ")\n";
  for (const spec::InstancePlan& inst : plan.instances) {
    const Component& c = ComponentOf(a, inst.component);
    out << "  " << inst.hostname << "\n";
    out << "    component   " << c.name;
    if (c.tf_role != spec::TfRole::kNone) out << ", role " << spec::TfRoleName(c.tf_role);
    out << ", index " << inst.index << "\n";
    out << "    resources   " << Resources(c) << "\n";
    out << "    artifact    " << ArtifactText(c) << "\n";
    if (!inst.command.empty()) out << "    command     " << inst.command << "\n";
    out << "    restart     " << spec::RestartPolicyName(c.restart_policy) << "\n";
    out << "    ready when  " << ReadinessText(inst.readiness_check) << "\n";
    if (!c.ports.empty()) {
      std::vector<std::string> ports;
      for (const auto& p : c.ports) ports.push_back(p.name + ":" + std::to_string(p.port));
      out << "    ports       " << Join(ports, ", ") << "\n";
    }
    for (size_t e = 0; e < inst.env.size(); ++e) {
      out << (e == 0 ? "    env         " : "                ") << inst.env[e].first << "="
          << inst.env[e].second << "\n";
    }
    out << "    at launch   " << Join(inst.env_at_launch, ", ") << "\n";
    for (const spec::ConfigFile& f : c.configuration.files) {
      std::string dest = f.dest_file[0] == '/' ? f.dest_file : "conf/" + f.dest_file;
      out << "    file        " << dest << " (" << spec::ConfigFileTypeName(f.type) << ")\n";
    }
  }
  return out.str();
}

nlohmann::json FormatPlanJson(const Assembly& a, const spec::Plan& plan, const std::string& user) {
  nlohmann::json out;
  out["name"] = a.name;
  out["version"] = a.version;
  out["user"] = user;
  out["queue"] = a.queue.empty() ? "default" : a.queue;
  out["gang"] = plan.gang;
  out["start_order"] = plan.waves;
  nlohmann::json instances = nlohmann::json::array();
  for (const spec::InstancePlan& inst : plan.instances) {
    const Component& c = ComponentOf(a, inst.component);
    nlohmann::json j;
    j["component_instance_name"] = inst.name;
    j["hostname"] = inst.hostname;
    j["component"] = inst.component;
    j["index"] = inst.index;
    j["role"] = spec::TfRoleName(c.tf_role);
    j["resource"] = {{"cpus", c.resource.cpus.value_or(0)},
                     {"memory_mib", c.resource.memory_mib.value_or(0)},
                     {"gpus", c.resource.gpus.value_or(0)}};
    j["launch_command"] = inst.command;
    j["restart_policy"] = spec::RestartPolicyName(c.restart_policy);
    nlohmann::json env = nlohmann::json::object();
    for (const auto& [k, v] : inst.env) env[k] = v;
    j["env"] = env;
    j["env_at_launch"] = inst.env_at_launch;
    if (inst.readiness_check) {
      j["readiness_check"] = {{"type", spec::ReadinessTypeName(inst.readiness_check->type)},
                              {"properties", inst.readiness_check->properties}};
    }
    instances.push_back(std::move(j));
  }
  out["instances"] = std::move(instances);
  return out;
}

}  // namespace tarn::cli
