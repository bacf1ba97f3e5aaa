#include "auth/authenticator.h"

#include <strings.h>

#include <algorithm>

#include "auth/audit_log.h"
#include "auth/token.h"

namespace tarn::auth {
namespace {

Status Unauthenticated(AuthFailure why, AuthFailure* failure, std::string message) {
  if (failure != nullptr) *failure = why;
  return Status(StatusCode::kUnauthenticated, std::move(message));
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kUser:
      return "user";
    case Role::kOperator:
      return "operator";
    case Role::kAdmin:
      return "admin";
  }
  return "user";
}

StatusOr<Role> ParseRole(std::string_view text) {
  if (text == "user") return Role::kUser;
  if (text == "operator") return Role::kOperator;
  if (text == "admin") return Role::kAdmin;
  return InvalidArgumentError("role: \"" + std::string(text) +
                              "\" is not a role (user, operator or admin)");
}

std::string_view AuthMethodName(AuthMethod method) {
  switch (method) {
    case AuthMethod::kSocket:
      return "socket";
    case AuthMethod::kToken:
      return "token";
    case AuthMethod::kSimple:
      return "simple";
    case AuthMethod::kSession:
      return "session";
  }
  return "socket";
}

std::string_view AuthFailureName(AuthFailure failure) {
  switch (failure) {
    case AuthFailure::kNone:
      return "";
    case AuthFailure::kMissing:
      return "missing";
    case AuthFailure::kMalformed:
      return "malformed";
    case AuthFailure::kUnknown:
      return "unknown";
    case AuthFailure::kRevoked:
      return "revoked";
    case AuthFailure::kExpired:
      return "expired";
    case AuthFailure::kNoAccount:
      return "no_account";
  }
  return "";
}

Authenticator::Authenticator(Options options) : options_(std::move(options)) {}

namespace {

// `key`'s account from `cache` while fresh, else from `lookup` (NSS), kept for `ttl`. The
// lookup runs without the lock: NSS may be slow (LDAP), and two racing lookups agree.
template <class Key, class Map, class Lookup>
std::optional<LocalAccount> CachedAccount(const Key& key, Map& cache, std::shared_mutex& mu,
                                          const Lookup& lookup, const Clock& clock,
                                          std::chrono::milliseconds ttl) {
  const Clock::TimePoint now = clock.Now();
  {
    std::shared_lock lock(mu);  // the I/O threads' lookups do not wait for each other
    auto it = cache.find(key);
    if (it != cache.end() && it->second.until > now) return it->second.account;
  }
  std::optional<LocalAccount> a = lookup(key);
  std::lock_guard lock(mu);
  cache[key] = {a, now + ttl};
  return a;
}

}  // namespace

std::optional<LocalAccount> Authenticator::CachedByUid(uid_t uid) const {
  return CachedAccount(uid, by_uid_, mu_, options_.by_uid, *options_.clock, options_.account_ttl);
}

std::optional<LocalAccount> Authenticator::CachedByName(const std::string& name) const {
  return CachedAccount(name, by_name_, mu_, options_.by_name, *options_.clock,
                       options_.account_ttl);
}

Role Authenticator::RoleOf(const std::string& account, const std::vector<std::string>& groups,
                           std::optional<uid_t> uid) const {
  if (uid && *uid == 0) return Role::kAdmin;
  const AuthConfig& c = options_.config;
  if (c.admins && c.admins->Admits(account, groups)) return Role::kAdmin;
  if (c.operators && c.operators->Admits(account, groups)) return Role::kOperator;
  return Role::kUser;
}

StatusOr<Identity> Authenticator::OfAccount(const LocalAccount& a) const {
  ASSIGN_OR_RETURN(std::string label, options_.store->TenantOfAccount(a.uid, a.name));
  return Identity{std::move(label), a.uid, a.name, a.groups, RoleOf(a.name, a.groups, a.uid)};
}

StatusOr<Identity> Authenticator::OfUid(uid_t uid) const {
  std::optional<LocalAccount> a = CachedByUid(uid);
  if (!a) {
    return FailedPreconditionError("uid " + std::to_string(uid) +
                                   " has no account name on this machine, so it cannot be a "
                                   "tarn tenant");
  }
  return OfAccount(*a);
}

StatusOr<Identity> Authenticator::OfName(const std::string& name) const {
  if (std::optional<LocalAccount> a = CachedByName(name)) return OfAccount(*a);
  ASSIGN_OR_RETURN(std::string label, options_.store->TenantOfRemote(name));
  return Identity{std::move(label), std::nullopt, name, {}, RoleOf(name, {}, std::nullopt)};
}

StatusOr<Caller> Authenticator::FromToken(std::string_view token, AuthFailure* failure) const {
  if (!IsWellFormedToken(token)) {
    return Unauthenticated(AuthFailure::kMalformed, failure,
                           "the bearer token is malformed (a tarn token is \"tarn_\" and 43 "
                           "more characters; was it cut when copied?)");
  }
  TokenRecord t;
  switch (options_.store->FindToken(token, &t)) {
    case AuthStore::Found::kValid:
      break;
    case AuthStore::Found::kUnknown:
      return Unauthenticated(AuthFailure::kUnknown, failure,
                             "the bearer token is not known to this server (mistyped, or made "
                             "by another server)");
    case AuthStore::Found::kRevoked:
      return Unauthenticated(AuthFailure::kRevoked, failure,
                             "the bearer token was revoked; make a new one with `tarn token "
                             "create`");
    case AuthStore::Found::kExpired:
      return Unauthenticated(AuthFailure::kExpired, failure,
                             "the bearer token expired at " + Rfc3339Millis(t.expires_ms) +
                                 "; make a new one with `tarn token create`");
  }
  std::optional<TenantRecord> owner = options_.store->Tenant(t.tenant);
  if (!owner) {
    return Unauthenticated(AuthFailure::kNoAccount, failure,
                           "the bearer token's owner is no tenant of this server");
  }
  Identity who;
  if (owner->uid) {
    std::optional<LocalAccount> a = CachedByUid(*owner->uid);
    if (!a) {
      return Unauthenticated(AuthFailure::kNoAccount, failure,
                             "the bearer token's owner no longer has an account on this machine");
    }
    who = Identity{owner->label, a->uid, a->name, a->groups, RoleOf(a->name, a->groups, a->uid)};
  } else {
    who = Identity{owner->label, std::nullopt, owner->name, {},
                   RoleOf(owner->name, {}, std::nullopt)};
  }
  // A token never does more than its owner may do now (a demoted owner demotes its tokens).
  who.role = std::min(who.role, t.role);
  Caller c;
  c.who = std::move(who);
  c.method = AuthMethod::kToken;
  c.token_name = t.name;
  c.token_expires_ms = t.expires_ms;
  return c;
}

StatusOr<Caller> Authenticator::Authenticate(const Credentials& cr, AuthFailure* failure) const {
  if (failure != nullptr) *failure = AuthFailure::kNone;
  Caller caller;
  if (cr.unix_socket) {
    ASSIGN_OR_RETURN(caller.who, OfUid(cr.uid));
    caller.method = AuthMethod::kSocket;
    caller.socket_uid = cr.uid;
    caller.socket_pid = cr.pid;
  } else if (!cr.authorization.empty()) {
    std::string_view a = cr.authorization;
    if (a.size() < 7 || ::strncasecmp(a.data(), "Bearer ", 7) != 0) {
      return Unauthenticated(AuthFailure::kMalformed, failure,
                             "the Authorization header is not \"Bearer <token>\" (tarn takes "
                             "bearer tokens only)");
    }
    a.remove_prefix(7);
    while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
    while (!a.empty() && a.back() == ' ') a.remove_suffix(1);
    ASSIGN_OR_RETURN(caller, FromToken(a, failure));
    if (cr.session_cookie) caller.method = AuthMethod::kSession;
  } else if (options_.config.simple && cr.simple_user != nullptr && !cr.simple_user->empty()) {
    if (!cr.loopback) {
      return Unauthenticated(AuthFailure::kMissing, failure,
                             "user.name (simple authentication) is taken from loopback clients "
                             "only; send Authorization: Bearer <token>");
    }
    ASSIGN_OR_RETURN(caller.who, OfName(*cr.simple_user));
    caller.method = AuthMethod::kSimple;
  } else {
    return Unauthenticated(
        AuthFailure::kMissing, failure,
        options_.config.simple
            ? "no credentials: send Authorization: Bearer <token> (see `tarn token create`) or, "
              "from this machine, ?user.name=NAME"
            : "no credentials: send Authorization: Bearer <token> (see `tarn token create`), or "
              "use tarn's Unix socket, where the kernel says who you are");
  }
  caller.peer = cr.peer;
  if (!cr.impersonate.empty()) {
    if (caller.who.role != Role::kAdmin) {
      return PermissionDeniedError("acting as another tenant (Impersonate-User, --as) needs the "
                                   "admin role; you are " +
                                   std::string(RoleName(caller.who.role)));
    }
    ASSIGN_OR_RETURN(Identity target, OfName(std::string(cr.impersonate)));
    caller.actor = std::move(caller.who);
    caller.who = std::move(target);
  }
  return caller;
}

StatusOr<std::shared_ptr<const Caller>> Authenticator::AuthenticateRemembered(
    const Credentials& cr, std::shared_ptr<Remembered>* memo, AuthFailure* failure) const {
  if (failure != nullptr) *failure = AuthFailure::kNone;
  const int64_t now = options_.clock->WallMillis();
  const uint64_t generation = options_.store->generation();  // before what it vouches for
  if (memo != nullptr && *memo != nullptr) {
    const Remembered& m = **memo;
    if (m.generation == generation && now < m.until_ms &&
        ConstantTimeEquals(m.authorization, cr.authorization) && m.impersonate == cr.impersonate) {
      return m.caller;
    }
  }
  ASSIGN_OR_RETURN(Caller c, Authenticate(cr, failure));
  auto caller = std::make_shared<const Caller>(std::move(c));
  if (memo != nullptr) {
    memo->reset();
    if (caller->method != AuthMethod::kSimple) {
      auto m = std::make_shared<Remembered>();
      m->authorization = std::string(cr.authorization);
      m->impersonate = std::string(cr.impersonate);
      m->caller = caller;
      m->generation = generation;
      m->until_ms = now + options_.account_ttl.count();
      if (caller->token_expires_ms > 0) m->until_ms = std::min(m->until_ms, caller->token_expires_ms);
      *memo = std::move(m);
    }
  }
  return caller;
}

}  // namespace tarn::auth
