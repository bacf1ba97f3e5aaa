#include "spec/memory_size.h"

#include <gtest/gtest.h>

#include <string>

#include "spec/diagnostic_checks_for_test.h"

namespace tarn::spec {
namespace {

int64_t Mib(std::string_view text) {
  auto r = ParseMemoryMib(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : -12345;
}

std::string ErrorOf(std::string_view text) {
  auto r = ParseMemoryMib(text);
  EXPECT_FALSE(r.ok()) << text << " parsed as " << (r.ok() ? *r : 0);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(ParseMemoryMibTest, PlainNumberIsMib) {
  EXPECT_EQ(Mib("4096"), 4096);
  EXPECT_EQ(Mib("1"), 1);
  EXPECT_EQ(Mib("0"), 0);
}

TEST(ParseMemoryMibTest, BinaryUnits) {
  EXPECT_EQ(Mib("4Gi"), 4096);
  EXPECT_EQ(Mib("512Mi"), 512);
  EXPECT_EQ(Mib("1024Ki"), 1);
  EXPECT_EQ(Mib("1Ti"), 1048576);
  EXPECT_EQ(Mib("1Pi"), int64_t{1} << 30);
  EXPECT_EQ(Mib("1Ki"), 1);  // 1024 bytes rounds up to one MiB
  EXPECT_EQ(Mib("1025Ki"), 2);
}

TEST(ParseMemoryMibTest, DecimalUnitsRoundUp) {
  // 1e9 bytes / 1048576 = 953.67 -> 954
  EXPECT_EQ(Mib("1G"), 954);
  // 1e3 bytes -> 1
  EXPECT_EQ(Mib("1k"), 1);
  // 1e6 bytes = 0.954 MiB -> 1
  EXPECT_EQ(Mib("1M"), 1);
  // 4e6 bytes = 3.81 MiB -> 4
  EXPECT_EQ(Mib("4M"), 4);
  // 1048576000 bytes = exactly 1000 MiB
  EXPECT_EQ(Mib("1048576k"), 1000);
  // 1e12 bytes / 1048576 = 953674.3 -> 953675
  EXPECT_EQ(Mib("1T"), 953675);
}

TEST(ParseMemoryMibTest, UnknownUnit) {
  std::string m = ErrorOf("4X");
  EXPECT_TRUE(Contains(m, "\"4X\" is not a memory size")) << m;
  EXPECT_TRUE(Contains(m, "Ki, Mi, Gi")) << m;
}

TEST(ParseMemoryMibTest, FractionIsRefused) {
  std::string m = ErrorOf("1.5Gi");
  EXPECT_TRUE(Contains(m, "whole number")) << m;
}

TEST(ParseMemoryMibTest, NegativeIsRefused) {
  std::string m = ErrorOf("-1");
  EXPECT_TRUE(Contains(m, "negative")) << m;
}

TEST(ParseMemoryMibTest, SpaceBeforeUnitIsRefused) {
  std::string m = ErrorOf("4 Gi");
  EXPECT_TRUE(Contains(m, "right after the number")) << m;
}

TEST(ParseMemoryMibTest, LowercaseMHintsAtMilli) {
  std::string m = ErrorOf("4m");
  EXPECT_TRUE(Contains(m, "milli")) << m;
}

TEST(ParseMemoryMibTest, BytesSuffixHintsAtMib) {
  std::string m = ErrorOf("4096B");
  EXPECT_TRUE(Contains(m, "plain number is MiB")) << m;
}

TEST(ParseMemoryMibTest, EmptyAndNonNumeric) {
  std::string m = ErrorOf("");
  EXPECT_TRUE(Contains(m, "is not a memory size")) << m;
  EXPECT_TRUE(Contains(m, "\"4Gi\"")) << m;
  ErrorOf("Gi");
  ErrorOf("four");
}

TEST(ParseMemoryMibTest, HugeNumbersDoNotOverflow) {
  std::string m = ErrorOf("9999999999999999999");  // 19 digits
  EXPECT_TRUE(Contains(m, "too large")) << m;
  // 999999999999999999 Pi is far above 2^62 MiB.
  std::string m2 = ErrorOf("999999999999999999Pi");
  EXPECT_TRUE(Contains(m2, "too large")) << m2;
}

TEST(FormatMemoryMibTest, ShortestExactBinaryForm) {
  EXPECT_EQ(FormatMemoryMib(4096), "4Gi");
  EXPECT_EQ(FormatMemoryMib(1024), "1Gi");
  EXPECT_EQ(FormatMemoryMib(1536), "1536Mi");
  EXPECT_EQ(FormatMemoryMib(512), "512Mi");
  EXPECT_EQ(FormatMemoryMib(1), "1Mi");
  EXPECT_EQ(FormatMemoryMib(1048576), "1Ti");
  EXPECT_EQ(FormatMemoryMib(3 * 1048576), "3Ti");
  EXPECT_EQ(FormatMemoryMib(1048576 + 1024), "1025Gi");
  EXPECT_EQ(FormatMemoryMib(0), "0Mi");
}

TEST(FormatMemoryMibTest, RoundTripsThroughParse) {
  for (int64_t mib : {1, 100, 1024, 1536, 4096, 65536, 1048576, 2 * 1048576 + 1024}) {
    EXPECT_EQ(Mib(FormatMemoryMib(mib)), mib) << mib;
  }
}

}  // namespace
}  // namespace tarn::spec
