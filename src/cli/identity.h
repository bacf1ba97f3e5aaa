// Who the CLI acts as, and how it proves who it is. Thread-compatible (reads the environment).
//
// Over tarn's Unix socket the kernel tells the server who the caller is; over TCP the CLI
// sends a bearer token: $TARN_TOKEN, else the token file (TokenFilePath()). Acting as another
// tenant is `--as NAME`, which the server allows admins alone (root, or its admin group);
// for root, --user and $TARN_USER keep their old meaning and are taken as --as. Everyone
// else's --user/$TARN_USER are ignored with a one-line warning: they never chose the tenant.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace tarn::cli {

// The account the process runs as (never $USER, which may be unset or stale under sudo).
StatusOr<std::string> AccountName();

// $TARN_USER, else AccountName(): the user a local plan (validate, explain) is made for.
StatusOr<std::string> CurrentUserName();

// The user a local plan is made for: `flag` (--user) when set, else CurrentUserName(). On
// failure prints "tarn: <why>" on stderr and returns nullopt (the verb exits 2).
std::optional<std::string> ActingUser(const std::string& flag);

struct Acting {
  std::string as;    // the tenant to act as (sent as Impersonate-User); "" for oneself
  std::string name;  // the name the request acts for: `as`, else the account's
};
// From --as, --user and $TARN_USER by the rules above; prints the warning where it ignores
// them. nullopt (with "tarn: <why>" printed) when the account has no name.
std::optional<Acting> ResolveActing(const std::string& as_flag, const std::string& user_flag);

// $XDG_CONFIG_HOME/tarn/token, else ~/.config/tarn/token.
std::string TokenFilePath();
// $TARN_TOKEN, else the token file's first line; "" when neither has one.
std::string BearerToken();
// Writes `token` to TokenFilePath() (the directory 0700, the file 0600, replaced by rename).
Status SaveToken(const std::string& token);

// Where a local `tarn server` listens: `flag` (--socket), else $TARN_SOCKET, else root's
// server's /run/tarn/tarn.sock, else (not root) one's own server's in its default state
// directory; the first of those last two that exists, or root's.
std::string SocketPath(const std::string& flag);

}  // namespace tarn::cli
