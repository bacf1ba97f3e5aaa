// Bearer tokens: random secrets shown once, stored only as hashes. A token is "tarn_" and 43
// base64url characters of 32 random bytes (256 bits from OpenSSL's RAND_bytes); its stored
// form is the SHA-256 of the whole text, in hex. A secret of that strength needs no slow hash
// (there is nothing to guess from a leaked hash), and the server looks a presented token up
// by its hash, then compares in constant time. Pure but for the random source; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/hmac_sha256.h"  // ConstantTimeEquals, for tokens and their hashes
#include "common/status.h"

namespace tarn::auth {

inline constexpr std::string_view kTokenPrefix = "tarn_";
inline constexpr size_t kTokenLength = 5 + 43;

// A fresh token; Internal when the system's random source fails.
StatusOr<std::string> NewToken();

// Whether `text` has a token's shape (prefix, length, alphabet): anything else is
// "malformed", which the server says apart from "unknown".
bool IsWellFormedToken(std::string_view text);

// SHA-256 of `token`, 64 lowercase hex digits.
std::string TokenHash(std::string_view token);

// Credentials are compared with tarn::ConstantTimeEquals (common/hmac_sha256.h).

}  // namespace tarn::auth
