// LoginCodes: one-time codes that let a tenant's browser log in to the dashboard without a
// token typed in, as Jupyter's login URL does: `tarn ui` (authenticated by the Unix socket,
// so by the kernel) asks for one, prints /ui/login?code=CODE, and the page exchanges it once,
// within `ttl`, for a session. A code is a token-strength secret (token.h), kept only as its
// hash, in memory (a code outlives no server restart: it lives a minute anyway), and at most
// `capacity` are outstanding. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "auth/identity.h"
#include "common/clock.h"
#include "common/status.h"

namespace tarn::auth {

class LoginCodes {
 public:
  struct Grant {
    std::string tenant;  // whom the session will act for
    Role role = Role::kUser;
    std::string issued_by;  // "alice", or "root as alice"
  };
  LoginCodes(const Clock* clock, int64_t ttl_ms = 60000, size_t capacity = 1024);

  // A fresh code for `grant`, valid until expires_ms (wall clock); ResourceExhausted when
  // `capacity` unexpired codes are outstanding.
  struct Issued {
    std::string code;
    int64_t expires_ms = 0;
  };
  StatusOr<Issued> Issue(Grant grant);
  // The grant of `code`, once: a redeemed, expired or unknown code gives nothing.
  std::optional<Grant> Redeem(const std::string& code);

 private:
  void DropExpiredLocked(int64_t now);  // REQUIRES: mu_

  const Clock* const clock_;
  const int64_t ttl_ms_;
  const size_t capacity_;
  std::mutex mu_;
  std::map<std::string, std::pair<Grant, int64_t>> codes_;  // by hash; guarded by mu_
};

}  // namespace tarn::auth
