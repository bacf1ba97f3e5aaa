// The dashboard's sessions (docs/server.md, "The dashboard's sessions"): a token, or a
// one-time code from `tarn ui`, exchanged for an HttpOnly, SameSite=Strict cookie that
// authenticates like the token it stands for. A session is a token of its own in the auth
// store, named ui-session-XXXXXXXX, made by the login and expiring with it: `tarn token
// list` shows it, `tarn token revoke` ends it, and it never does more than its owner may.
#include <string>

#include "api/routes.h"
#include "auth/login_codes.h"
#include "auth/token.h"

namespace tarn::api {
namespace {

using json = nlohmann::json;

std::string SessionCookie(const std::string& value, int64_t max_age_s, bool tls) {
  return std::string(kSessionCookie) + "=" + value +
         "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" + std::to_string(max_age_s) +
         (tls ? "; Secure" : "");
}

}  // namespace

void RegisterSessionRoutes(Router& h, const SessionOptions& o) {
  h.OpenPost("/ui/login", [o](const ApiRequest& req, ApiResponse& res) {
    json body;
    if (!ParseBody(req, res, &body)) return;
    if (!OnlyFields(body, {"token", "code"}, res)) return;
    const bool by_token = body.contains("token"), by_code = body.contains("code");
    if (by_token == by_code) {
      return Error(res, 400, "request body: expected {\"token\": TOKEN} or {\"code\": CODE}");
    }
    const json& secret = body[by_token ? "token" : "code"];
    if (!secret.is_string()) {
      return Error(res, 400, std::string(by_token ? "token" : "code") + ": expected a string");
    }
    auth::LoginCodes::Grant grant;
    if (by_token) {
      const std::string authorization = "Bearer " + secret.get<std::string>();
      auth::Credentials cr;
      cr.authorization = authorization;
      auth::AuthFailure failure = auth::AuthFailure::kNone;
      StatusOr<auth::Caller> who = o.authenticator->Authenticate(cr, &failure);
      if (!who.ok()) {
        res.denied = who.status().message();
        Reply(res, 401,
              json{{"diagnostics", who.status().message()},
                   {"reason", std::string(auth::AuthFailureName(failure))}});
        return;
      }
      grant = {who->who.tenant, who->who.role,
               who->who.account + " (dashboard login with token " + who->token_name + ")"};
    } else {
      std::optional<auth::LoginCodes::Grant> g = o.codes->Redeem(secret.get<std::string>());
      if (!g) {
        res.denied = "an unknown, used or expired login code";
        Reply(res, 401,
              json{{"diagnostics",
                    "the login code is unknown, used or expired (a code is good once, for a "
                    "minute): run `tarn ui` again"},
                   {"reason", "unknown"}});
        return;
      }
      grant = std::move(*g);
      grant.issued_by += " (dashboard login with a code from tarn ui)";
    }
    StatusOr<std::string> token = auth::NewToken();
    if (!token.ok()) return Error(res, token.status());
    const int64_t now = o.clock->WallMillis();
    // The name: ui-session- and 8 characters of another random secret (never of this one).
    StatusOr<std::string> tag = auth::NewToken();
    if (!tag.ok()) return Error(res, tag.status());
    std::string name = "ui-session-";
    for (char c : tag->substr(auth::kTokenPrefix.size(), 8)) {
      name +=
          std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : 'x';
    }
    const auth::TokenRecord record{grant.tenant,   name, auth::TokenHash(*token),
                                   grant.role,     now,  now + o.session_ttl_ms,
                                   grant.issued_by};
    res.audit_object = grant.tenant + "/token/" + name;
    if (Status st = o.tokens->AddToken(record); !st.ok()) return Error(res, st);
    res.set_header("Set-Cookie", SessionCookie(*token, o.session_ttl_ms / 1000, req.tls));
    res.set_header("Cache-Control", "no-store");
    Reply(res, 200,
          json{{"tenant", grant.tenant},
               {"role", std::string(auth::RoleName(grant.role))},
               {"session", name},
               {"expires_ms", now + o.session_ttl_ms}});
  });

  h.Post("/ui/logout", [o](const ApiRequest& req, ApiResponse& res) {
    const auth::Caller& c = *req.caller;
    if (c.method != auth::AuthMethod::kSession) {
      return Error(res, 400,
                   "not a dashboard session: logout ends the session of the cookie it is sent "
                   "with (a token ends with `tarn token revoke`)");
    }
    res.audit_object = c.who.tenant + "/token/" + c.token_name;
    if (Status st = o.tokens->RevokeToken(c.who.tenant, c.token_name); !st.ok()) {
      return Error(res, st);
    }
    res.set_header("Set-Cookie", SessionCookie("", 0, req.tls));
    Reply(res, 200, json{{"diagnostics", "session " + c.token_name + " ended"}});
  });

  h.Post("/tarn/v1/ui/login-codes", [o](const ApiRequest& req, ApiResponse& res) {
    const auth::Caller& c = *req.caller;
    res.audit_object = c.who.tenant + "/login-code";
    StatusOr<auth::LoginCodes::Issued> issued =
        o.codes->Issue({c.who.tenant, c.who.role,
                        c.actor ? c.actor->account + " as " + c.who.account : c.who.account});
    if (!issued.ok()) return Error(res, 503, issued.status().message());
    json answer = {{"code", issued->code},
                   {"tenant", c.who.tenant},
                   {"login_path", "/ui/login?code=" + issued->code},
                   {"expires_ms", issued->expires_ms}};
    if (const std::string origin = o.ui_origin ? o.ui_origin() : ""; !origin.empty()) {
      answer["url"] = origin + answer["login_path"].get<std::string>();
    }
    Reply(res, 201, answer);
  });
}

}  // namespace tarn::api
