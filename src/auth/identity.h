// Who is asking: the identity types of tarn's API. A tenant is a local account, keyed by its
// uid; its DNS label ("Bob_dev" -> "bob-dev") names its assemblies, paths and records, and is
// bound to that uid alone (auth_store.h). A token may also belong to a remote tenant with no
// local account, whose containers run as the configured local user. Plain data; thread-
// compatible.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tarn::auth {

// What a caller may do (DESIGN.md "Who"): kUser its own assemblies; kOperator read and drive
// (stop, start, flex, destroy) every tenant's assemblies; kAdmin also tokens for others, the
// audit log, acting as another tenant. Ordered: a higher role may do what a lower one may.
enum class Role { kUser = 0, kOperator = 1, kAdmin = 2 };

std::string_view RoleName(Role role);  // "user", "operator", "admin"
// "user" | "operator" | "admin"; InvalidArgument naming the text otherwise.
StatusOr<Role> ParseRole(std::string_view text);

// A tenant as a request acts for it.
struct Identity {
  std::string tenant;        // the DNS label: the key of its assemblies
  std::optional<uid_t> uid;  // none: a remote tenant (a token user without a local account)
  std::string account;       // the local account's name (a remote tenant's given name)
  std::vector<std::string> groups;  // the account's groups by name, primary first
  Role role = Role::kUser;
};

// How the server knows who asked.
// kSession: the dashboard's session cookie, a token the server made at its login.
enum class AuthMethod { kSocket, kToken, kSimple, kSession };
std::string_view AuthMethodName(AuthMethod method);  // "socket", "token", "simple", "session"

// The authenticated caller of one request.
struct Caller {
  Identity who;                  // whom the request acts for
  std::optional<Identity> actor;  // an admin acting as `who` (Impersonate-User), if any
  AuthMethod method = AuthMethod::kSocket;
  uid_t socket_uid = 0;    // kSocket: the peer's uid and pid, from SO_PEERCRED
  pid_t socket_pid = 0;
  std::string token_name;  // kToken, kSession: the token's name
  int64_t token_expires_ms = 0;  // kToken, kSession: when it expires (ms since the epoch); 0: never
  std::string peer;        // "127.0.0.1:40312" or "unix"

  // Whoever really asked: the actor when acting as someone, else `who`.
  const Identity& asker() const { return actor ? *actor : who; }
};

}  // namespace tarn::auth
