// Authenticator: turns what a request carries into the Caller it acts for, by the rules of
// DESIGN.md's "Who":
//   - a Unix-socket peer is the uid the kernel gave (SO_PEERCRED), whatever it sends; uid 0
//     is admin;
//   - over TCP, `Authorization: Bearer <token>` names the token's owner, with the lower of the
//     token's role and the owner's role now;
//   - `?user.name=` (Hadoop simple authentication) only when the configuration turns it on,
//     only from a loopback peer, and only without a token;
//   - `Impersonate-User: NAME` makes an admin act as NAME (kubectl --as); anyone else gets a
//     denial. Nothing else (X-Remote-User, X-Forwarded-User, ...) is ever read.
// A local account's role comes from the configuration's ACLs (admins, operators); a remote
// tenant's from the user names in them. Accounts are looked up through NSS and kept for
// `account_ttl`.
//
// Errors: kUnauthenticated (401: no, or no usable, credentials) with `reason` set to what was
// wrong; kPermissionDenied (403: acting as another without being admin); FailedPrecondition
// or InvalidArgument (403: an account that cannot be a tenant, e.g. a colliding label).
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "auth/account.h"
#include "auth/auth_store.h"
#include "auth/identity.h"
#include "common/acl.h"
#include "common/clock.h"
#include "common/status.h"

namespace tarn::auth {

// The "auth" object of the server's configuration.
struct AuthConfig {
  bool simple = false;           // honour ?user.name= from loopback peers (Hadoop simple)
  std::optional<Acl> admins;     // accounts and groups with the admin role (root always)
  std::optional<Acl> operators;  // ... with the operator role
  int64_t audit_max_bytes = 16ll << 20;
  int audit_keep = 4;
};

// What a request carries that tells who sent it.
struct Credentials {
  bool unix_socket = false;  // came over the Unix socket: `uid`/`pid` are the kernel's
  uid_t uid = 0;
  pid_t pid = 0;
  std::string_view authorization;     // the Authorization header ("Bearer <token>")
  bool session_cookie = false;        // `authorization` came from the session cookie
  std::string_view impersonate;       // the Impersonate-User header
  const std::string* simple_user = nullptr;  // ?user.name=, when the request has it
  std::string peer;                   // "127.0.0.1:40312", "unix"
  bool loopback = false;              // a TCP peer on 127.0.0.0/8 or ::1
};

// Why a request was not authenticated (the 401 body's "reason").
enum class AuthFailure { kNone, kMissing, kMalformed, kUnknown, kRevoked, kExpired, kNoAccount };
std::string_view AuthFailureName(AuthFailure failure);

class Authenticator {
 public:
  using AccountByUidFn = std::function<std::optional<LocalAccount>(uid_t)>;
  using AccountByNameFn = std::function<std::optional<LocalAccount>(const std::string&)>;
  struct Options {
    AuthConfig config;
    AuthStore* store = nullptr;    // required
    const Clock* clock = nullptr;  // required
    std::chrono::milliseconds account_ttl{5000};
    AccountByUidFn by_uid = AccountByUid;
    AccountByNameFn by_name = AccountByName;
  };
  explicit Authenticator(Options options);

  // The caller of a request; on an error, `*failure` (when given) says what was wrong.
  StatusOr<Caller> Authenticate(const Credentials& credentials,
                                AuthFailure* failure = nullptr) const;

  // What one connection authenticated as, kept by it between its requests (keep-alive).
  // The next request that sends the same credentials is the same caller, without hashing
  // the token again or looking anything up, while the store has not changed (no token
  // revoked or added, no tenant bound), the token has not expired and the accounts the
  // answer rests on are no older than `account_ttl`: a revocation takes effect at once, on
  // every connection, as without it.
  struct Remembered {
    std::string authorization, impersonate;  // the credentials it was concluded from
    std::shared_ptr<const Caller> caller;
    uint64_t generation = 0;  // the store's, when concluded
    int64_t until_ms = 0;     // wall clock
  };
  // Authenticate, through `memo` (the connection's: read, and replaced by a fresh answer;
  // null: none kept). Simple authentication is never remembered (its name is per request).
  StatusOr<std::shared_ptr<const Caller>> AuthenticateRemembered(
      const Credentials& credentials, std::shared_ptr<Remembered>* memo,
      AuthFailure* failure = nullptr) const;

  // The identity of the local account `uid`, or of the account or remote tenant `name`,
  // bound to its tenant label.
  StatusOr<Identity> OfUid(uid_t uid) const;
  StatusOr<Identity> OfName(const std::string& name) const;

  const AuthConfig& config() const { return options_.config; }

 private:
  std::optional<LocalAccount> CachedByUid(uid_t uid) const;
  std::optional<LocalAccount> CachedByName(const std::string& name) const;
  StatusOr<Identity> OfAccount(const LocalAccount& account) const;
  Role RoleOf(const std::string& account, const std::vector<std::string>& groups,
              std::optional<uid_t> uid) const;
  StatusOr<Caller> FromToken(std::string_view token, AuthFailure* failure) const;

  const Options options_;
  struct Cached {
    std::optional<LocalAccount> account;
    Clock::TimePoint until;
  };
  mutable std::shared_mutex mu_;
  mutable std::map<uid_t, Cached> by_uid_;          // guarded by mu_
  mutable std::map<std::string, Cached> by_name_;   // guarded by mu_
};

}  // namespace tarn::auth
