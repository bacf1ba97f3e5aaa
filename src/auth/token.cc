#include "auth/token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

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
  // The algorithm fetched once and a context per thread: OpenSSL 3's SHA256() looks the
  // algorithm up and allocates a context on every call, a measurable share of an
  // authenticated request (bench/run api).
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  struct Context {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Context() { EVP_MD_CTX_free(ctx); }
  };
  thread_local Context context;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  unsigned int length = 0;
  if (sha256 == nullptr || context.ctx == nullptr ||
      EVP_DigestInit_ex2(context.ctx, sha256, nullptr) != 1 ||
      EVP_DigestUpdate(context.ctx, token.data(), token.size()) != 1 ||
      EVP_DigestFinal_ex(context.ctx, digest, &length) != 1) {
    SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof digest);
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tarn::auth
