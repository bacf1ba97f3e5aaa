// What every client verb does first and last: pick the server and the user from the flags
// and the environment, and print results and errors the same way. Used by main's thread.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/identity.h"
#include "common/status.h"

namespace tarn::cli {

// The client for --addr / $TARN_ADDR (with the bearer token), else the Unix socket, acting as
// identity.h's ResolveActing says (which it sets in *acting when given). On a bad address or
// an account without a name prints why and returns null with *exit_code = 2.
std::unique_ptr<ApiClient> OpenClient(const ClientFlags& flags, int* exit_code,
                                      Acting* acting = nullptr);

// Prints "tarn: <message>" on stderr; returns 1.
int PrintError(const Status& status);

// Pretty JSON on stdout (invalid UTF-8 replaced, never thrown).
void PrintJson(const nlohmann::json& value);

// Milliseconds since the Unix epoch, for ages.
int64_t NowMs();

}  // namespace tarn::cli
