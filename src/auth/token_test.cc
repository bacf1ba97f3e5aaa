#include "auth/token.h"

#include <gtest/gtest.h>

#include <set>

namespace tarn::auth {
namespace {

TEST(TokenTest, FreshTokensAreWellFormedAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    auto t = NewToken();
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->size(), kTokenLength);
    EXPECT_TRUE(IsWellFormedToken(*t)) << *t;
    EXPECT_TRUE(seen.insert(*t).second);
  }
}

TEST(TokenTest, ShapesThatAreNotTokens) {
  auto t = NewToken();
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(IsWellFormedToken(t->substr(0, t->size() - 1)));  // truncated
  EXPECT_FALSE(IsWellFormedToken(*t + "A"));
  EXPECT_FALSE(IsWellFormedToken("xarn_" + t->substr(5)));
  std::string bad = *t;
  bad[10] = '/';  // base64's '/' is not base64url's
  EXPECT_FALSE(IsWellFormedToken(bad));
  EXPECT_FALSE(IsWellFormedToken(""));
}

// The stored form is SHA-256 (checked against the standard's test vector), never the token.
TEST(TokenTest, HashIsSha256Hex) {
  EXPECT_EQ(TokenHash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto t = NewToken();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(TokenHash(*t).size(), 64u);
  EXPECT_EQ(TokenHash(*t).find(t->substr(5, 10)), std::string::npos);
}

TEST(TokenTest, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

}  // namespace
}  // namespace tarn::auth
