// What every client verb does first and last: pick the server and the user from the flags
// and the environment, read or change something, and print results and errors the same way.
// Used by main's thread.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

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

// GETs `path` (with `query`) and prints the answer as JSON or through `format`; the verb's
// exit status.
int Show(const std::string& path, const ClientFlags& flags,
         const std::function<std::string(const nlohmann::json&)>& format,
         const Query& query = {});

// Sends a change and prints the server's diagnostics (or the JSON answer), or `done` when it
// gave none; the verb's exit status.
int Change(const std::function<StatusOr<nlohmann::json>(ApiClient&)>& request,
           const std::string& done, const ClientFlags& flags);

// Prints "tarn: <message>" on stderr; returns 1.
int PrintError(const Status& status);

// Pretty JSON on stdout (invalid UTF-8 replaced, never thrown).
void PrintJson(const nlohmann::json& value);

// Milliseconds since the Unix epoch, for ages.
int64_t NowMs();

}  // namespace tarn::cli
