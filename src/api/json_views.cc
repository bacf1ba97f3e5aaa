#include "api/json_views.h"

namespace tarn::api {
namespace {

using json = nlohmann::json;

json ContainerJson(const service::InstanceStatus& i) {
  return json{{"id", i.container_id},
              {"component_instance_name", i.name},
              {"hostname", i.hostname},
              {"ip", i.ip},
              {"bare_host", i.node},
              {"state", i.state},
              {"launch_time", i.launch_time},
              {"diagnostics", i.diagnostics},
              {"gpus", i.gpus},
              {"ports", i.ports},
              {"restarts", i.restarts},
              {"last_exit", i.last_exit},
              {"version", i.version},
              {"ready", i.ready}};
}

json ResourcesJson(const scheduler::Resources& r) {
  return json{{"vcores", r.vcores}, {"memory_mb", r.memory_mib}, {"gpus", r.gpus}};
}

}  // namespace

json ServiceJson(const service::AssemblyStatus& a) {
  json out = json::parse(a.spec_json, nullptr, /*allow_exceptions=*/false);
  if (!out.is_object()) out = json::object();
  out["name"] = a.name;
  out["user"] = a.user;
  out["queue"] = a.queue;
  out["priority"] = a.priority;
  out["state"] = a.state;
  out["diagnostics"] = a.diagnostics;
  out["launch_time"] = a.created_ms;
  out["lifetime"] = a.lifetime_remaining_s;
  out["shared_dir"] = a.shared_dir;
  out["name_resolution"] = a.name_resolution;
  out["network_walls"] = a.network_walls;
  // YARN's `version` is the spec's, which stays the old one until the upgrade is finalized.
  if (!a.upgrade_version.empty()) out["upgrade_version"] = a.upgrade_version;
  json components = json::array();
  const json spec_components = out.contains("components") && out["components"].is_array()
                                   ? out["components"]
                                   : json::array();
  for (const service::ComponentStatus& c : a.components) {
    json comp = json::object();
    for (const json& sc : spec_components) {
      if (sc.is_object() && sc.value("name", "") == c.name) comp = sc;
    }
    comp["name"] = c.name;
    comp["number_of_containers"] = c.number_of_containers;
    comp["state"] = c.state;
    comp["diagnostics"] = c.diagnostics;
    comp["ready_containers"] = c.ready;
    json containers = json::array();
    for (const auto& i : c.instances) containers.push_back(ContainerJson(i));
    comp["containers"] = std::move(containers);
    components.push_back(std::move(comp));
  }
  out["components"] = std::move(components);
  return out;
}

json ServiceSummaryJson(const service::AssemblyStatus& a) {
  json comps = json::array();
  for (const auto& c : a.components) {
    comps.push_back(json{{"name", c.name},
                         {"state", c.state},
                         {"number_of_containers", c.number_of_containers},
                         {"ready_containers", c.ready}});
  }
  return json{{"name", a.name},
              {"user", a.user},
              {"queue", a.queue},
              {"priority", a.priority},
              {"state", a.state},
              {"diagnostics", a.diagnostics},
              {"launch_time", a.created_ms},
              {"lifetime", a.lifetime_remaining_s},
              {"components", std::move(comps)}};
}

json NodesJson(const std::vector<scheduler::NodeUsage>& nodes) {
  json out = json::array();
  for (const auto& n : nodes) {
    // Each GPU and who holds it ("<user>/<assembly>/<instance>"; null: free), so that whoever
    // waits for one sees whose work is in the way.
    json gpus = json::array();
    for (const auto& g : n.gpus) {
      gpus.push_back(
          json{{"index", g.index}, {"holder", g.holder.empty() ? json(nullptr) : json(g.holder)}});
    }
    out.push_back(json{{"name", n.name},
                       {"capacity", ResourcesJson(n.capacity)},
                       {"free", ResourcesJson(n.free)},
                       {"free_gpus", n.free_gpus},
                       {"gpus", std::move(gpus)}});
  }
  return out;
}

json QueuesJson(const std::vector<scheduler::QueueUsage>& queues) {
  json out = json::array();
  for (const auto& q : queues) {
    // DRF's view of the queue: each user's dominant share, the smallest served first.
    json users = json::array();
    for (const auto& u : q.users) {
      users.push_back(json{{"user", u.user},
                           {"used", ResourcesJson(u.used)},
                           {"dominant_share", u.share},
                           {"pending", u.pending}});
    }
    out.push_back(json{{"name", q.config.name},
                       {"capacity", q.config.guaranteed_share * 100},
                       {"maximum_capacity", q.config.maximum_share * 100},
                       {"used", ResourcesJson(q.used)},
                       {"share", q.share},
                       {"pending", q.pending},
                       {"users", std::move(users)}});
  }
  return out;
}

json EventsJson(const std::vector<service::Event>& events) {
  json out = json::array();
  for (const auto& e : events) {
    out.push_back(json{{"time", e.time_ms},
                       {"component", e.component},
                       {"instance", e.instance},
                       {"type", e.type},
                       {"message", e.message}});
  }
  return out;
}

}  // namespace tarn::api
