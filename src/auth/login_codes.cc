#include "auth/login_codes.h"

#include "auth/token.h"

namespace tarn::auth {

LoginCodes::LoginCodes(const Clock* clock, int64_t ttl_ms, size_t capacity)
    : clock_(clock), ttl_ms_(ttl_ms), capacity_(capacity) {}

void LoginCodes::DropExpiredLocked(int64_t now) {
  for (auto it = codes_.begin(); it != codes_.end();) {
    it = it->second.second <= now ? codes_.erase(it) : std::next(it);
  }
}

StatusOr<LoginCodes::Issued> LoginCodes::Issue(Grant grant) {
  ASSIGN_OR_RETURN(std::string code, NewToken());
  const int64_t now = clock_->WallMillis();
  std::lock_guard<std::mutex> lock(mu_);
  DropExpiredLocked(now);
  if (codes_.size() >= capacity_) {
    return ResourceExhaustedError(std::to_string(capacity_) +
                                  " login codes are outstanding; try again within a minute");
  }
  codes_[TokenHash(code)] = {std::move(grant), now + ttl_ms_};
  return Issued{std::move(code), now + ttl_ms_};
}

std::optional<LoginCodes::Grant> LoginCodes::Redeem(const std::string& code) {
  if (!IsWellFormedToken(code)) return std::nullopt;
  const std::string hash = TokenHash(code);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = codes_.find(hash);
  if (it == codes_.end()) return std::nullopt;
  std::optional<Grant> grant;
  if (it->second.second > clock_->WallMillis()) grant = std::move(it->second.first);
  codes_.erase(it);  // once, expired or not
  return grant;
}

}  // namespace tarn::auth
