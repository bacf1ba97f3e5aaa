// What ApiServer's route handlers share (internal to src/api): the request as a handler sees
// it, the answer it makes, the helpers that answer errors and check the addressed tenant,
// and the route table. api_server.cc registers the assembly routes, identity_routes.cc those
// of who is asking (whoami, tokens, the audit log).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "api/api_server.h"
#include "auth/audit_log.h"
#include "auth/auth_store.h"
#include "auth/identity.h"
#include "auth/login_codes.h"
#include "common/clock.h"
#include "common/status.h"
#include "http/server.h"

namespace tarn::api {

// What a route's handler sees: the path percent-decoded, the query's parameters (with '+'
// as a space), and the path's ([^/]+) segments in matches[1..].
struct ApiRequest {
  std::string method;  // as sent ("HEAD" runs the GET route)
  std::string path;
  std::multimap<std::string, std::string> params;
  std::vector<std::string> matches;  // [0]: the whole path
  std::string body;
  bool tls = false;                      // it came over TLS
  const auth::Caller* caller = nullptr;  // set for every route but the open ones
  bool woken = false;  // a held request (ApiResponse::hold) run again: answer it now

  bool has_param(const std::string& key) const { return params.count(key) > 0; }
  std::string get_param_value(const std::string& key) const {
    auto it = params.find(key);
    return it == params.end() ? "" : it->second;
  }
};

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<http::BodyStream> stream;  // a chunked body instead of `body`
  // For the audit log: what the request named ("alice/fmnist"), and why it was denied when it
  // was (a 404 that hides another tenant's assembly is a denial too).
  std::string audit_object;
  std::string denied;
  // Set by a blocking read (watches.h) instead of an answer: the request waits until
  // assembly `key` changes past `index` or `wait` passes, then its handler runs again with
  // ApiRequest::woken (on a thread of its own) and answers.
  struct Hold {
    std::string key;  // "user/name"
    uint64_t index = 0;
    std::chrono::milliseconds wait{0};
  };
  std::optional<Hold> hold;
  bool held = false;  // set for the answer of a request that was held (not timed in /metrics)

  void set_content(std::string text, std::string type) {
    body = std::move(text);
    content_type = std::move(type);
  }
  void set_header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
};

// The HTTP status of an error Status (InvalidArgument 400, NotFound 404, PermissionDenied 403,
// AlreadyExists / FailedPrecondition / Aborted 409, Unavailable 503, else 500).
int HttpStatus(const Status& s);
// `body` as the JSON answer with `status`.
void Reply(ApiResponse& res, int status, const nlohmann::json& body);
// {"diagnostics": ...} with `status`, or with the status HttpStatus(s) gives.
void Error(ApiResponse& res, int status, const std::string& diagnostics);
void Error(ApiResponse& res, const Status& s);

// The tenant whose assemblies the request addresses: ?tenant=, else the caller's own.
std::string OwnerOf(const ApiRequest& req);
// Whether the request is for the caller's own tenant; else answers 403 (a denial): `what`
// is made by acting as the other tenant (`how`), which admins alone may.
bool ForOwnTenant(const ApiRequest& req, ApiResponse& res, const std::string& what,
                  const std::string& how);
// Whether the caller may read and drive assembly `name` of the addressed tenant (access.h);
// sets *owner. Otherwise answers 404, exactly as for an assembly that does not exist, and
// records the denial.
bool Addressed(const ApiRequest& req, ApiResponse& res, const ServiceLoop& loop,
               const std::string& name, std::string* owner);
// The body as a JSON object; else answers 400 saying why.
bool ParseBody(const ApiRequest& req, ApiResponse& res, nlohmann::json* body);
// Rejects fields other than `allowed`, naming the first unknown one.
bool OnlyFields(const nlohmann::json& body, std::initializer_list<const char*> allowed,
                ApiResponse& res);

// The route table: paths written as the regexes httplib took (a literal, or ([^/]+) for one
// segment), matched segment by segment; openapi_test reads the registrations below.
class ApiServer::Routes {
 public:
  using Handler = std::function<void(const ApiRequest&, ApiResponse&)>;
  enum class Runs { kInline, kPool };  // on the I/O thread (reads a snapshot) or the pool

  struct Route {
    std::string method;
    std::vector<std::string> segments;  // "" stands for ([^/]+)
    Handler handler;
    Runs runs;
    bool open = false;  // answered without credentials (health, metrics, the API's description)
  };

  void Add(std::string method, const std::string& pattern, Handler handler, Runs runs,
           bool open = false) {
    Route r{std::move(method), {}, std::move(handler), runs, open};
    std::string marked = pattern;  // ([^/]+) holds a '/': mark it before splitting at '/'
    for (size_t g = marked.find(kSegment); g != std::string::npos; g = marked.find(kSegment, g)) {
      marked.replace(g, kSegment.size(), "\x01");
    }
    for (const std::string& s : Split(marked)) {
      if (s == "\x01") {
        r.segments.emplace_back();
      } else if (s.empty() || s.find_first_of("()[]*+?^$|\\") != std::string::npos) {
        throw std::logic_error("route " + pattern + ": only literals and ([^/]+) segments");
      } else {
        r.segments.push_back(s);
      }
    }
    routes_.push_back(std::move(r));
  }

  // The route for `method` (GET's for HEAD) and `path`, with the captured segments; else
  // nullptr and the methods the path allows, if any.
  const Route* Find(const std::string& method, const std::string& path,
                    std::vector<std::string>* matches, std::string* allowed) const {
    const std::vector<std::string> parts = Split(path);
    const std::string& want = method == "HEAD" ? kGet : method;
    for (const Route& r : routes_) {
      if (!Matches(r, parts)) continue;
      if (r.method == want) {
        matches->assign(1, path);
        for (size_t i = 0; i < parts.size(); ++i) {
          if (r.segments[i].empty()) matches->push_back(parts[i]);
        }
        return &r;
      }
      if (allowed->find(r.method) == std::string::npos) {
        *allowed += (allowed->empty() ? "" : ", ") + r.method;
      }
    }
    return nullptr;
  }

 private:
  inline static const std::string kGet = "GET";
  inline static const std::string kSegment = "([^/]+)";

  // "/a/b" -> {"a", "b"}; a path that does not start with '/' -> {} (matches nothing).
  static std::vector<std::string> Split(const std::string& path) {
    std::vector<std::string> out;
    if (path.empty() || path[0] != '/') return out;
    size_t start = 1;
    for (;;) {
      const size_t slash = path.find('/', start);
      out.push_back(path.substr(start, slash == std::string::npos ? slash : slash - start));
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    return out;
  }

  static bool Matches(const Route& r, const std::vector<std::string>& parts) {
    if (parts.size() != r.segments.size()) return false;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (r.segments[i].empty() ? parts[i].empty() : parts[i] != r.segments[i]) return false;
    }
    return true;
  }

  std::vector<Route> routes_;
};

// h.Get/Post/Put/Delete(path, handler): openapi_test finds the routes, their query
// parameters and their statuses in the text of the files that call these.
struct Router {
  ApiServer::Routes& routes;
  void Get(const std::string& p, ApiServer::Routes::Handler f,
           ApiServer::Routes::Runs runs = ApiServer::Routes::Runs::kInline) {
    routes.Add("GET", p, std::move(f), runs);
  }
  // A GET anyone may make, without credentials.
  void OpenGet(const std::string& p, ApiServer::Routes::Handler f) {
    routes.Add("GET", p, std::move(f), ApiServer::Routes::Runs::kInline, /*open=*/true);
  }
  // A POST without credentials: one that is itself a login.
  void OpenPost(const std::string& p, ApiServer::Routes::Handler f) {
    routes.Add("POST", p, std::move(f), ApiServer::Routes::Runs::kPool, /*open=*/true);
  }
  void Post(const std::string& p, ApiServer::Routes::Handler f) {
    routes.Add("POST", p, std::move(f), ApiServer::Routes::Runs::kPool);
  }
  void Put(const std::string& p, ApiServer::Routes::Handler f) {
    routes.Add("PUT", p, std::move(f), ApiServer::Routes::Runs::kPool);
  }
  void Delete(const std::string& p, ApiServer::Routes::Handler f) {
    routes.Add("DELETE", p, std::move(f), ApiServer::Routes::Runs::kPool);
  }
};

// The routes of who is asking: GET /tarn/v1/whoami, POST and GET /tarn/v1/tokens, DELETE
// /tarn/v1/tokens/NAME, GET /tarn/v1/audit (identity_routes.cc).
void RegisterIdentityRoutes(Router& h, auth::AuthStore* tokens, auth::AuditLog* audit,
                            const Clock* wall);
// Query parameter `key` as a whole number >= 0, or `dflt` when absent; false (answered 400,
// naming it) when it is something else.
bool QueryNumber(const ApiRequest& req, ApiResponse& res, const char* key, int64_t dflt,
                 int64_t* out);

// A blocking read's parameters (watches.h): ?index=N, a whole number >= 0 (0 or absent:
// answer at once), and ?wait=DURATION ("500ms", "30s", "5m", or a number of seconds; default
// kDefaultWatchWait, longer ones cut to kMaxWatchWait, as Consul's). False (answered 400,
// naming the parameter) when either is malformed.
inline constexpr std::chrono::milliseconds kDefaultWatchWait{5 * 60 * 1000};
inline constexpr std::chrono::milliseconds kMaxWatchWait{10 * 60 * 1000};
bool WatchParams(const ApiRequest& req, ApiResponse& res, uint64_t* index,
                 std::chrono::milliseconds* wait);

// The dashboard's session cookie, and the value of cookie `name` in a Cookie header ("" when
// absent).
inline constexpr char kSessionCookie[] = "tarn_session";
std::string CookieValue(std::string_view header, std::string_view name);

// What the session routes need (session_routes.cc): POST /ui/login, POST /ui/logout and
// POST /tarn/v1/ui/login-codes.
struct SessionOptions {
  const auth::Authenticator* authenticator = nullptr;
  auth::AuthStore* tokens = nullptr;
  auth::LoginCodes* codes = nullptr;
  const Clock* clock = nullptr;
  int64_t session_ttl_ms = 12 * 3600 * 1000;
  // The dashboard's origin for the login URL, e.g. "http://127.0.0.1:8088"; "" (or none)
  // when the server has no TCP listener.
  std::function<std::string()> ui_origin;
};
void RegisterSessionRoutes(Router& h, const SessionOptions& options);

// YARN's upgrades (upgrade_routes.cc). A PUT /app/v1/services/NAME whose state is an
// upgrade's (UPGRADING, UPGRADING_AUTO_FINALIZE, EXPRESS_UPGRADING with the new spec;
// CANCEL_UPGRADING; STABLE, which finalizes) is UpgradeService's, after the caller was
// Addressed; RegisterUpgradeRoutes adds PUT .../component-instances,
// .../components/C/component-instances/I and .../components (state UPGRADING).
bool IsUpgradeState(const nlohmann::json& body);
void UpgradeService(ApiResponse& res, ServiceLoop& loop, const std::string& domain,
                    const std::string& user, const std::string& name, const nlohmann::json& body);
void RegisterUpgradeRoutes(Router& h, ServiceLoop& loop);

// The routes of instances' metrics: GET /tarn/v1/services/NAME/metrics (metrics_routes.cc).
// `collector` may be null (the server scrapes nothing): the route says so.
void RegisterMetricsRoutes(Router& h, const ServiceLoop& loop, const metrics::Collector* collector);

}  // namespace tarn::api
