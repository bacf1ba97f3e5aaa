#include "auth/token.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "common/hmac_sha256.h"

namespace tarn::auth {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

}  // namespace

StatusOr<std::string> NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    return InternalError("cannot make a token: the system's random source failed");
  }
  // base64url without padding: 32 bytes -> 43 characters.
  std::string out(kTokenPrefix);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 63];
  OPENSSL_cleanse(bytes, sizeof bytes);
  return out;
}

bool IsWellFormedToken(std::string_view text) {
  if (text.size() != kTokenLength || text.substr(0, kTokenPrefix.size()) != kTokenPrefix) {
    return false;
  }
  for (char c : text.substr(kTokenPrefix.size())) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string TokenHash(std::string_view token) {
  // OpenSSL's own SHA-256 block functions, not the EVP interface: EVP (SHA256() included)
  // goes through the provider machinery on every call, whose shared reference counts and
  // locks the API's I/O threads contended on (8% of bench/run api's requests/s with the
  // token; these functions take no lock). Deprecated in OpenSSL 3, not removed.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  SHA256_CTX context;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256_Init(&context);
  SHA256_Update(&context, token.data(), token.size());
  SHA256_Final(digest, &context);
  OPENSSL_cleanse(&context, sizeof context);
#pragma GCC diagnostic pop
  return ToHex(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

}  // namespace tarn::auth
