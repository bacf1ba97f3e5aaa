#include "api/routes.h"

#include "api/access.h"
#include "api/service_loop.h"
#include "api/state_snapshot.h"
#include "common/number.h"

namespace tarn::api {

using json = nlohmann::json;

int HttpStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

void Reply(ApiResponse& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void Error(ApiResponse& res, int status, const std::string& diagnostics) {
  Reply(res, status, json{{"diagnostics", diagnostics}});
}

void Error(ApiResponse& res, const Status& s) { Error(res, HttpStatus(s), s.message()); }

std::string OwnerOf(const ApiRequest& req) {
  std::string t = req.get_param_value("tenant");
  return t.empty() ? req.caller->who.tenant : t;
}

bool ForOwnTenant(const ApiRequest& req, ApiResponse& res, const std::string& what,
                  const std::string& how) {
  const std::string owner = OwnerOf(req);
  if (owner == req.caller->who.tenant) return true;
  res.denied = what + ": " + owner;
  Error(res, 403, "tenant: " + what + " needs acting as it (" + how + ", admins only)");
  return false;
}

bool ParseBody(const ApiRequest& req, ApiResponse& res, json* body) {
  try {
    *body = json::parse(req.body);
  } catch (const json::parse_error& e) {
    Error(res, 400, std::string("request body is not valid JSON: ") + e.what());
    return false;
  }
  if (!body->is_object()) {
    Error(res, 400, "request body: expected a JSON object");
    return false;
  }
  return true;
}

bool OnlyFields(const json& body, std::initializer_list<const char*> allowed, ApiResponse& res) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    bool ok = false;
    for (const char* a : allowed) ok |= it.key() == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      Error(res, 400, "request body: unknown field \"" + it.key() + "\" (expected " + list + ")");
      return false;
    }
  }
  return true;
}

// Whether the caller may read and drive assembly `name` of the addressed tenant (access.h);
// sets *owner. Otherwise answers 404, exactly as for an assembly that does not exist, and
// records the denial.
bool Addressed(const ApiRequest& req, ApiResponse& res, const ServiceLoop& loop,
               const std::string& name, std::string* owner) {
  *owner = OwnerOf(req);
  res.audit_object = *owner + "/" + name;
  if (*owner == req.caller->who.tenant || req.caller->who.role >= auth::Role::kOperator) {
    return true;
  }
  const std::shared_ptr<const StateSnapshot> snapshot = loop.Snapshot();
  const AssemblyView* view = snapshot->Find(*owner, name);
  if (view != nullptr && MayAccess(*req.caller, *owner, view->status().queue, snapshot->queues)) {
    return true;
  }
  res.denied = "tenant " + *owner +
               "'s assembly: the caller is not its owner, an operator or an administrator of "
               "its queue";
  res.status = 404;
  res.set_content(json{{"diagnostics", service::AssemblyNotFoundError(name).message()}}.dump(),
                  "application/json");
  return false;
}

std::string CookieValue(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const size_t semi = header.find(';');
    std::string_view pair = header.substr(0, semi);
    header.remove_prefix(semi == std::string_view::npos ? header.size() : semi + 1);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == name) {
      std::string_view value = pair.substr(eq + 1);
      while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
      return std::string(value);
    }
  }
  return "";
}

bool QueryNumber(const ApiRequest& req, ApiResponse& res, const char* key, int64_t dflt,
                 int64_t* out) {
  *out = dflt;
  if (!req.has_param(key)) return true;
  auto v = ParseInt64(req.get_param_value(key));
  if (!v || *v < 0) {
    Error(res, 400,
          std::string(key) + ": expected a whole number >= 0, got \"" + req.get_param_value(key) +
              "\"");
    return false;
  }
  *out = *v;
  return true;
}

bool WatchParams(const ApiRequest& req, ApiResponse& res, uint64_t* index,
                 std::chrono::milliseconds* wait) {
  int64_t n = 0;
  if (!QueryNumber(req, res, "index", 0, &n)) return false;
  *index = static_cast<uint64_t>(n);
  *wait = kDefaultWatchWait;
  if (!req.has_param("wait")) return true;
  const std::string text = req.get_param_value("wait");
  std::string_view number = text;
  double scale = 1000;  // seconds, unless a unit says otherwise
  for (auto [suffix, ms] :
       {std::pair{"ms", 1.0}, std::pair{"s", 1000.0}, std::pair{"m", 60000.0}}) {
    const std::string_view unit = suffix;
    if (number.size() > unit.size() && number.ends_with(unit)) {
      number.remove_suffix(unit.size());
      scale = ms;
      break;
    }
  }
  const std::optional<double> value = ParseFiniteDouble(number);
  if (!value || *value < 0) {
    Error(res, 400,
          "wait: expected a duration such as 500ms, 30s or 5m (at most 10m), got \"" + text + "\"");
    return false;
  }
  const double ms = std::min(*value * scale, static_cast<double>(kMaxWatchWait.count()));
  *wait = std::chrono::milliseconds(static_cast<int64_t>(ms));
  return true;
}

}  // namespace tarn::api
