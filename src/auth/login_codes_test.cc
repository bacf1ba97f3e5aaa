#include "auth/login_codes.h"

#include <gtest/gtest.h>

#include "auth/token.h"

namespace tarn::auth {
namespace {

using namespace std::chrono_literals;

TEST(LoginCodesTest, ACodeIsGoodOnceAndOnlyUntilItExpires) {
  FakeClock clock;
  LoginCodes codes(&clock, 60000, 2);
  auto a = codes.Issue({"alice", Role::kUser, "alice"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(IsWellFormedToken(a->code));
  EXPECT_EQ(a->expires_ms, clock.WallMillis() + 60000);
  auto grant = codes.Redeem(a->code);
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->tenant, "alice");
  EXPECT_FALSE(codes.Redeem(a->code).has_value()) << "twice";

  auto b = codes.Issue({"bob", Role::kOperator, "root as bob"});
  ASSERT_TRUE(b.ok());
  clock.Advance(61s);
  EXPECT_FALSE(codes.Redeem(b->code).has_value()) << "expired";
  EXPECT_FALSE(codes.Redeem("tarn_not-a-code").has_value());
  EXPECT_FALSE(codes.Redeem("").has_value());

  // At most `capacity` outstanding; expired ones make room.
  ASSERT_TRUE(codes.Issue({"c", Role::kUser, "c"}).ok());
  ASSERT_TRUE(codes.Issue({"d", Role::kUser, "d"}).ok());
  auto full = codes.Issue({"e", Role::kUser, "e"});
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  clock.Advance(61s);
  EXPECT_TRUE(codes.Issue({"e", Role::kUser, "e"}).ok());
}

}  // namespace
}  // namespace tarn::auth
