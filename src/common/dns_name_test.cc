#include "common/dns_name.h"

#include <gtest/gtest.h>

#include <string>

namespace tarn {
namespace {

TEST(IsDnsLabelTest, AcceptsLowercaseLettersDigitsAndInnerHyphens) {
  EXPECT_TRUE(IsDnsLabel("a"));
  EXPECT_TRUE(IsDnsLabel("web"));
  EXPECT_TRUE(IsDnsLabel("worker-0"));
  EXPECT_TRUE(IsDnsLabel("0abc"));  // RFC 1123 allows a leading digit
  EXPECT_TRUE(IsDnsLabel("123"));
  EXPECT_TRUE(IsDnsLabel("a--b"));
}

TEST(IsDnsLabelTest, RejectsBadCharactersAndEdges) {
  EXPECT_FALSE(IsDnsLabel(""));
  EXPECT_FALSE(IsDnsLabel("-a"));
  EXPECT_FALSE(IsDnsLabel("a-"));
  EXPECT_FALSE(IsDnsLabel("-"));
  EXPECT_FALSE(IsDnsLabel("Web"));
  EXPECT_FALSE(IsDnsLabel("a_b"));
  EXPECT_FALSE(IsDnsLabel("a.b"));
  EXPECT_FALSE(IsDnsLabel("a b"));
  EXPECT_FALSE(IsDnsLabel("caf\xc3\xa9"));
}

TEST(IsDnsLabelTest, LengthLimitIs63) {
  EXPECT_TRUE(IsDnsLabel(std::string(63, 'a')));
  EXPECT_FALSE(IsDnsLabel(std::string(64, 'a')));
  EXPECT_TRUE(IsDnsLabel(std::string(62, 'a') + "0"));
}

TEST(IsDnsNameTest, AcceptsOneOrMoreLabels) {
  EXPECT_TRUE(IsDnsName("tarn"));
  EXPECT_TRUE(IsDnsName("ml.example.com"));
  EXPECT_TRUE(IsDnsName("a.b-c.d0"));
}

TEST(IsDnsNameTest, RejectsEmptyLabelsAndBadLabels) {
  EXPECT_FALSE(IsDnsName(""));
  EXPECT_FALSE(IsDnsName("."));
  EXPECT_FALSE(IsDnsName(".tarn"));
  EXPECT_FALSE(IsDnsName("tarn."));
  EXPECT_FALSE(IsDnsName("a..b"));
  EXPECT_FALSE(IsDnsName("Example.com"));
  EXPECT_FALSE(IsDnsName("a.-b.c"));
  EXPECT_FALSE(IsDnsName("a." + std::string(64, 'b')));
}

TEST(IsDnsNameTest, LengthLimitIs253) {
  const std::string l63(63, 'a');
  // 63 + 1 + 63 + 1 + 63 + 1 + 61 = 253
  const std::string n253 = l63 + "." + l63 + "." + l63 + "." + std::string(61, 'b');
  ASSERT_EQ(n253.size(), 253u);
  EXPECT_TRUE(IsDnsName(n253));
  const std::string n254 = l63 + "." + l63 + "." + l63 + "." + std::string(62, 'b');
  ASSERT_EQ(n254.size(), 254u);
  EXPECT_FALSE(IsDnsName(n254));
}

TEST(UserToDnsLabelTest, LowercasesAndMapsUnderscore) {
  EXPECT_EQ(UserToDnsLabel("Bob_dev"), "bob-dev");
  EXPECT_EQ(UserToDnsLabel("alice"), "alice");
  EXPECT_EQ(UserToDnsLabel("ALICE_B_2"), "alice-b-2");
  EXPECT_EQ(UserToDnsLabel(""), "");
  EXPECT_TRUE(IsDnsLabel(UserToDnsLabel("Bob_dev")));
}

TEST(UserToDnsLabelTest, LeavesOtherCharactersForTheCallerToCheck) {
  EXPECT_EQ(UserToDnsLabel("a.b"), "a.b");
  EXPECT_FALSE(IsDnsLabel(UserToDnsLabel("a.b")));
  EXPECT_EQ(UserToDnsLabel("_x"), "-x");
  EXPECT_FALSE(IsDnsLabel(UserToDnsLabel("_x")));
}

}  // namespace
}  // namespace tarn
