// YARN's upgrade calls (docs/upgrades.md): PUT /app/v1/services/NAME with an upgrade's
// state (UpgradeService, from api_server.cc's update route), and the calls that ask for
// instances: PUT .../component-instances, .../components/C/component-instances/I and
// .../components with state UPGRADING.
#include <string>
#include <vector>

#include "api/routes.h"
#include "api/service_loop.h"
#include "spec/parser.h"

namespace tarn::api {
namespace {

using json = nlohmann::json;

// The body as a JSON array of objects; else answers 400 saying why.
bool ParseArrayBody(const ApiRequest& req, ApiResponse& res, const char* what, json* out) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    Error(res, 400, "request body is not valid JSON");
    return false;
  }
  if (!body.is_array() || body.empty()) {
    Error(res, 400, std::string("request body: expected a non-empty JSON array of ") + what);
    return false;
  }
  for (size_t k = 0; k < body.size(); ++k) {
    if (!body[k].is_object()) {
      Error(res, 400, "request body[" + std::to_string(k) + "]: expected an object");
      return false;
    }
  }
  *out = std::move(body);
  return true;
}

// body["state"] must be UPGRADING (the only state these calls take); `where` names it.
bool StateIsUpgrading(const json& item, const std::string& where, ApiResponse& res) {
  if (!item.contains("state") || item["state"] != "UPGRADING") {
    Error(res, 400,
          where + "state: expected \"UPGRADING\", got " +
              (item.contains("state") ? item["state"].dump() : std::string("nothing")));
    return false;
  }
  return true;
}

// One string field of an array item; answers 400 when it is missing or not a string.
bool ItemName(const json& item, const char* field, const std::string& where, ApiResponse& res,
              std::string* out) {
  if (!item.contains(field) || !item[field].is_string() || item[field].get<std::string>().empty()) {
    Error(res, 400, where + field + ": expected a name");
    return false;
  }
  *out = item[field].get<std::string>();
  return true;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void RegisterUpgradeRoutes(Router& h, ServiceLoop& loop) {
  h.Put(R"(/app/v1/services/([^/]+)/component-instances)", [&loop](const ApiRequest& req,
                                                                   ApiResponse& res) {
    std::string user;
    const std::string name = req.matches[1];
    if (!Addressed(req, res, loop, name, &user)) return;
    json body;
    if (!ParseArrayBody(req, res, "containers", &body)) return;
    std::vector<std::string> instances;
    for (size_t k = 0; k < body.size(); ++k) {
      const std::string where = "request body[" + std::to_string(k) + "].";
      std::string instance;
      if (!ItemName(body[k], "component_instance_name", where, res, &instance) ||
          !StateIsUpgrading(body[k], where, res)) {
        return;
      }
      instances.push_back(instance);
    }
    Status st;
    if (!loop.Call([&](service::Manager& m) { st = m.UpgradeInstances(user, name, instances); })) {
      return Error(res, 503, "tarn server is shutting down");
    }
    if (!st.ok()) return Error(res, st);
    Reply(res, 202, json{{"diagnostics", "Upgrading " + Joined(instances) + " of " + name}});
  });

  h.Put(R"(/app/v1/services/([^/]+)/components/([^/]+)/component-instances/([^/]+))",
        [&loop](const ApiRequest& req, ApiResponse& res) {
          std::string user;
          const std::string name = req.matches[1];
          const std::string comp = req.matches[2];
          const std::string instance = req.matches[3];
          if (!Addressed(req, res, loop, name, &user)) return;
          json body;
          if (!ParseBody(req, res, &body)) return;
          if (!OnlyFields(body, {"state", "component_instance_name"}, res) ||
              !StateIsUpgrading(body, "", res)) {
            return;
          }
          if (body.contains("component_instance_name") &&
              body["component_instance_name"] != instance) {
            return Error(res, 400,
                         "component_instance_name: the body names " +
                             body["component_instance_name"].dump() + " but the path names \"" +
                             instance + "\"");
          }
          Status st;
          if (!loop.Call([&](service::Manager& m) {
                StatusOr<service::AssemblyStatus> a = m.Get(user, name);
                if (!a.ok()) {
                  st = a.status();
                  return;
                }
                for (const service::ComponentStatus& c : a->components) {
                  if (c.name != comp) continue;
                  for (const service::InstanceStatus& i : c.instances) {
                    if (i.name == instance) {
                      st = m.UpgradeInstances(user, name, {instance});
                      return;
                    }
                  }
                  st = NotFoundError("component " + comp + " of " + name + " has no instance " +
                                     instance);
                  return;
                }
                st = NotFoundError("assembly " + name + " has no component " + comp);
              })) {
            return Error(res, 503, "tarn server is shutting down");
          }
          if (!st.ok()) return Error(res, st);
          Reply(res, 202, json{{"diagnostics", "Upgrading " + instance + " of " + name}});
        });

  h.Put(R"(/app/v1/services/([^/]+)/components)", [&loop](const ApiRequest& req, ApiResponse& res) {
    std::string user;
    const std::string name = req.matches[1];
    if (!Addressed(req, res, loop, name, &user)) return;
    json body;
    if (!ParseArrayBody(req, res, "components", &body)) return;
    std::vector<std::string> components;
    for (size_t k = 0; k < body.size(); ++k) {
      const std::string where = "request body[" + std::to_string(k) + "].";
      std::string comp;
      if (!ItemName(body[k], "name", where, res, &comp) || !StateIsUpgrading(body[k], where, res)) {
        return;
      }
      components.push_back(comp);
    }
    Status st;
    if (!loop.Call(
            [&](service::Manager& m) { st = m.UpgradeComponents(user, name, components); })) {
      return Error(res, 503, "tarn server is shutting down");
    }
    if (!st.ok()) return Error(res, st);
    Reply(res, 202,
          json{{"diagnostics", "Upgrading component " + Joined(components) + " of " + name}});
  });
}

bool IsUpgradeState(const json& body) {
  if (!body.contains("state") || !body["state"].is_string()) return false;
  const std::string s = body["state"];
  return s == "UPGRADING" || s == "UPGRADING_AUTO_FINALIZE" || s == "EXPRESS_UPGRADING" ||
         s == "CANCEL_UPGRADING" || s == "STABLE";
}

void UpgradeService(ApiResponse& res, ServiceLoop& loop, const std::string& domain,
                    const std::string& user, const std::string& name, const json& body) {
  const std::string state = body["state"];
  Status st;
  if (state == "CANCEL_UPGRADING" || state == "STABLE") {
    // Cancel, or finalize (YARN's clients finalize by asking for STABLE).
    if (!OnlyFields(body, {"state", "name"}, res)) return;
    const bool cancel = state == "CANCEL_UPGRADING";
    if (!loop.Call([&](service::Manager& m) {
          st = cancel ? m.CancelUpgrade(user, name) : m.FinalizeUpgrade(user, name);
        })) {
      return Error(res, 503, "tarn server is shutting down");
    }
    if (!st.ok()) return Error(res, st);
    return Reply(res, cancel ? 202 : 200,
                 json{{"diagnostics", cancel ? "Service " + name + " is cancelling its upgrade"
                                             : "Service " + name + "'s upgrade is finalized"}});
  }
  // Initiate: the body is the new spec, with the upgrade's state.
  json spec_json = body;
  spec_json.erase("state");
  if (!spec_json.contains("name")) spec_json["name"] = name;
  if (spec_json["name"] != name) {
    return Error(res, 400,
                 "name: the body names " + spec_json["name"].dump() + " but the path names \"" +
                     name + "\"");
  }
  spec::ParseOptions po;
  po.user = user;
  po.domain = domain;
  spec::ParseResult parsed = spec::ParseAssemblyJson(spec_json, po);
  if (!parsed.ok()) {
    std::string msg;
    for (const auto& d : parsed.diagnostics) {
      if (d.severity != spec::Severity::kError) continue;
      msg += (msg.empty() ? "" : "; ") + spec::FormatDiagnostic("request body", d);
    }
    return Error(res, 400, msg);
  }
  const service::Manager::UpgradeMode mode =
      state == "EXPRESS_UPGRADING"         ? service::Manager::UpgradeMode::kExpress
      : state == "UPGRADING_AUTO_FINALIZE" ? service::Manager::UpgradeMode::kAutoFinalize
                                           : service::Manager::UpgradeMode::kManual;
  if (!loop.Call([&](service::Manager& m) {
        st = m.InitiateUpgrade(user, *parsed.assembly, spec_json.dump(), mode);
      })) {
    return Error(res, 503, "tarn server is shutting down");
  }
  if (!st.ok()) return Error(res, st);
  Reply(res, 202,
        json{{"diagnostics", "Service " + name + " is upgrading to version " +
                                 parsed.assembly->version + " (" + state + ")"}});
}

}  // namespace tarn::api
