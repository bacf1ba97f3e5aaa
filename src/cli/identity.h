// Who the CLI acts as: $TARN_USER, else the account the process runs as (never $USER, which
// may be unset or stale under sudo). Thread-compatible (reads the environment).
#pragma once

#include <string>

#include "common/status.h"

namespace tarn::cli {

StatusOr<std::string> CurrentUserName();

}  // namespace tarn::cli
