// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written from the standards so that the
// workloads (tarn-train, which also builds on machines without OpenSSL's headers) can answer
// the parameter servers' challenge. Not for bulk hashing: the server's tokens use OpenSSL.
// Thread-safe (no state).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tarn {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256(std::string_view data);
Sha256Digest HmacSha256(std::string_view key, std::string_view message);

// Equal contents, in time that depends on the lengths alone: for secrets (tokens, digests),
// never memcmp.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

std::string DigestBytes(const Sha256Digest& d);  // the 32 bytes as a string
std::string ToHex(std::string_view bytes);       // lower-case hex

}  // namespace tarn
