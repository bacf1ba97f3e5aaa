// Who the CLI acts as: $TARN_USER, else the account the process runs as (never $USER, which
// may be unset or stale under sudo). Thread-compatible (reads the environment).
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace tarn::cli {

StatusOr<std::string> CurrentUserName();

// The user a verb acts as: `flag` (--user) when set, else CurrentUserName(). On failure
// prints "tarn: <why>" on stderr and returns nullopt (the verb exits 2).
std::optional<std::string> ActingUser(const std::string& flag);

}  // namespace tarn::cli
