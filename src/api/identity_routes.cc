// The routes of who is asking: the caller itself, its tokens, the audit log (admins).
#include <set>
#include <string>

#include "api/access.h"
#include "api/routes.h"
#include "auth/token.h"
#include "common/dns_name.h"
#include "common/number.h"

namespace tarn::api {

using json = nlohmann::json;

void RegisterIdentityRoutes(Router& h, auth::AuthStore* tokens, auth::AuditLog* audit,
                            const Clock* wall) {
  h.Get("/tarn/v1/whoami", [](const ApiRequest& req, ApiResponse& res) {
    const auth::Caller& c = *req.caller;
    json out = IdentityJson(c.who);
    out["groups"] = c.who.groups;
    out["authenticated_by"] = std::string(auth::AuthMethodName(c.method));
    if (c.method == auth::AuthMethod::kToken || c.method == auth::AuthMethod::kSession) {
      out["token"] = c.token_name;
    }
    if (c.actor) out["impersonated_by"] = IdentityJson(*c.actor);
    Reply(res, 200, out);
  });

  h.Post("/tarn/v1/tokens", [tokens, wall](const ApiRequest& req, ApiResponse& res) {
    const auth::Caller& c = *req.caller;
    if (!ForOwnTenant(req, res, "a token of another tenant", "tarn token create --as NAME")) {
      return;
    }
    json body;
    if (!ParseBody(req, res, &body)) return;
    if (!OnlyFields(body, {"name", "role", "ttl_seconds"}, res)) return;
    auth::Role role = c.who.role;
    if (auto r = body.find("role"); r != body.end()) {
      if (!r->is_string()) return Error(res, 400, "role: expected user, operator or admin");
      StatusOr<auth::Role> parsed = auth::ParseRole(r->get<std::string>());
      if (!parsed.ok()) return Error(res, 400, parsed.status().message());
      role = *parsed;
    }
    std::string name;
    if (auto n = body.find("name"); n != body.end()) {
      if (!n->is_string() || !IsDnsLabel(n->get<std::string>())) {
        return Error(res, 400,
                     "name: expected a token name of letters, digits and '-' (at most 63), got " +
                         n->dump());
      }
      name = n->get<std::string>();
    } else {
      // The first free "token-N".
      std::set<std::string> taken;
      for (const auth::TokenRecord& t : tokens->Tokens(c.who.tenant)) taken.insert(t.name);
      for (int i = 1; name.empty(); ++i) {
        if (!taken.count("token-" + std::to_string(i))) name = "token-" + std::to_string(i);
      }
    }
    int64_t expires_ms = 0;
    if (auto t = body.find("ttl_seconds"); t != body.end()) {
      if (!t->is_number_integer() || t->get<int64_t>() <= 0 ||
          t->get<int64_t>() > int64_t{100} * 365 * 86400) {
        return Error(res, 400,
                     "ttl_seconds: expected whole seconds from 1 to 100 years, got " + t->dump());
      }
      expires_ms = wall->WallMillis() + t->get<int64_t>() * 1000;
    }
    res.audit_object = c.who.tenant + "/token/" + name;
    if (role > c.who.role) {
      res.denied = "a token's role cannot exceed its owner's";
      return Error(res, 403,
                   "role: a token's role cannot exceed its owner's (you are " +
                       std::string(auth::RoleName(c.who.role)) + ", the token would be " +
                       std::string(auth::RoleName(role)) + ")");
    }
    StatusOr<std::string> secret = auth::NewToken();
    if (!secret.ok()) return Error(res, secret.status());
    auth::TokenRecord record{c.who.tenant,
                             name,
                             auth::TokenHash(*secret),
                             role,
                             wall->WallMillis(),
                             expires_ms,
                             c.actor ? c.actor->account + " as " + c.who.account : c.who.account};
    if (Status st = tokens->AddToken(record); !st.ok()) return Error(res, st);
    Reply(res, 201,
          json{{"name", name},
               {"token", *secret},
               {"tenant", c.who.tenant},
               {"role", std::string(auth::RoleName(role))},
               {"expires", expires_ms > 0 ? json(auth::Rfc3339Millis(expires_ms)) : json()},
               {"diagnostics", "Token " + name + " created; it is shown this once"}});
  });

  h.Get("/tarn/v1/tokens", [tokens, wall](const ApiRequest& req, ApiResponse& res) {
    const auth::Caller& c = *req.caller;
    // ?tenant=NAME or * (admins): another tenant's tokens, or everyone's.
    std::string tenant = OwnerOf(req);
    if (tenant != c.who.tenant && c.who.role != auth::Role::kAdmin) {
      res.denied = "listing another tenant's tokens";
      return Error(res, 403, "tenant: listing another tenant's tokens needs the admin role");
    }
    json out = json::array();
    const int64_t now = wall->WallMillis();
    for (const auth::TokenRecord& t : tokens->Tokens(tenant == "*" ? "" : tenant)) {
      out.push_back({{"name", t.name},
                     {"tenant", t.tenant},
                     {"role", std::string(auth::RoleName(t.role))},
                     {"created", auth::Rfc3339Millis(t.created_ms)},
                     {"created_by", t.created_by},
                     {"expires", t.expires_ms > 0 ? json(auth::Rfc3339Millis(t.expires_ms)) : json()},
                     {"expired", t.expires_ms > 0 && now >= t.expires_ms}});
    }
    Reply(res, 200, out);
  });

  h.Delete(R"(/tarn/v1/tokens/([^/]+))", [tokens](const ApiRequest& req, ApiResponse& res) {
    const auth::Caller& c = *req.caller;
    const std::string tenant = OwnerOf(req);
    const std::string name = req.matches[1];
    res.audit_object = tenant + "/token/" + name;
    if (tenant != c.who.tenant && c.who.role != auth::Role::kAdmin) {
      res.denied = "revoking another tenant's token";
      return Error(res, 404, "no token named \"" + name + "\"");
    }
    if (Status st = tokens->RevokeToken(tenant, name); !st.ok()) return Error(res, st);
    Reply(res, 200, json{{"diagnostics", "Token " + name + " revoked"}});
  });

  h.Get(
      "/tarn/v1/audit",
      [audit](const ApiRequest& req, ApiResponse& res) {
        if (req.caller->who.role != auth::Role::kAdmin) {
          res.denied = "reading the audit log";
          return Error(res, 403, "the audit log is for admins");
        }
        int64_t since = 0;
        if (req.has_param("since")) {
          StatusOr<int64_t> t = auth::ParseTime(req.get_param_value("since"));
          if (!t.ok()) return Error(res, 400, "since: " + t.status().message());
          since = *t;
        }
        int64_t limit = 1000;
        if (req.has_param("limit")) {
          auto l = ParseInt64(req.get_param_value("limit"));
          if (!l || *l < 1 || *l > 100000) {
            return Error(res, 400,
                         "limit: expected 1 to 100000 events, got \"" +
                             req.get_param_value("limit") + "\"");
          }
          limit = *l;
        }
        json out = json::array();
        if (audit != nullptr) {
          for (json& e : audit->Read(since, static_cast<size_t>(limit))) {
            out.push_back(std::move(e));
          }
        }
        Reply(res, 200, out);
      },
      ApiServer::Routes::Runs::kPool);
}

}  // namespace tarn::api
