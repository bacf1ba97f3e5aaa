#include "serve/json_reader.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tarn::serve {
namespace {

Json Parse(std::string_view text) {
  auto j = ParseJson(text);
  EXPECT_TRUE(j.ok()) << text << ": " << j.status().ToString();
  return j.ok() ? std::move(*j) : Json();
}

TEST(JsonReaderTest, ReadsEveryKindOfValue) {
  Json j = Parse(R"( {"a": [1, -2, 0.5, -1e3, 2E+2, 1.5e-3], "b": {"c": null, "d": true,
                      "e": false}, "s": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", "empty": [], "o": {}} )");
  ASSERT_TRUE(j.is_object());
  const Json& a = *j.find("a");
  ASSERT_EQ(a.size(), 6u);
  EXPECT_TRUE(a[0].is_number_integer());
  EXPECT_EQ(a[1].integer(), -2);
  EXPECT_FALSE(a[2].is_number_integer());
  EXPECT_EQ(a[2].number(), 0.5);
  EXPECT_EQ(a[3].number(), -1000);
  EXPECT_EQ(a[4].number(), 200);
  EXPECT_DOUBLE_EQ(a[5].number(), 0.0015);
  EXPECT_TRUE(j.find("b")->find("c")->is_null());
  EXPECT_TRUE(j.find("b")->find("d")->boolean());
  EXPECT_FALSE(j.find("b")->find("e")->boolean());
  EXPECT_EQ(j.find("s")->str(), "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(j.find("empty")->is_array() && j.find("empty")->empty());
  EXPECT_TRUE(j.find("o")->is_object() && j.find("o")->empty());
  EXPECT_EQ(j.find("missing"), nullptr);
}

TEST(JsonReaderTest, NumbersMatchNlohmann) {
  for (const char* text : {"0", "-0", "123456789012345678", "9223372036854775807",
                           "-9223372036854775808", "1e-400", "-1e-400", "2.5e-324", "0.1",
                           "3.4028235e38", "2.2250738585072014e-308"}) {
    Json mine = Parse(text);
    const nlohmann::json theirs = nlohmann::json::parse(text);
    EXPECT_EQ(mine.is_number_integer(), theirs.is_number_integer()) << text;
    EXPECT_EQ(mine.number(), theirs.get<double>()) << text;
  }
  // Beyond int64: a float here (nlohmann keeps it as uint64 up to 2^64 - 1).
  EXPECT_EQ(Parse("9223372036854775808").number(), 9223372036854775808.0);
  // Beyond double: an error, in both.
  EXPECT_FALSE(ParseJson("1e400").ok());
  EXPECT_FALSE(ParseJson("-1e400").ok());
}

TEST(JsonReaderTest, RefusesWhatJsonDoesNotAllow) {
  for (const char* text :
       {"", " ", "{", "[1,]", "[1 2]", "{\"a\" 1}", "{\"a\": 1,}", "{a: 1}", "01", "1.", ".5",
        "+1", "1e", "-", "NaN", "Infinity", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"",
        "\"\\ud800\"", "\"\\udc00\"", "\"a\tb\"", "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"",
        "[1] 2", "{} {}", "'a'"}) {
    auto j = ParseJson(text);
    EXPECT_FALSE(j.ok()) << "accepted: " << text;
    if (!j.ok()) {
      EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(j.status().message().rfind("not valid JSON at byte ", 0), 0u)
          << j.status().message();
    }
  }
}

TEST(JsonReaderTest, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string deep(100000, '[');
  auto j = ParseJson(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("nested too deeply"), std::string::npos);
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(ParseJson(ok).ok());
}

TEST(JsonReaderTest, TheLastOfDuplicateKeysWinsAndDumpIsCompact) {
  Json j = Parse(R"({"a": 1, "a": [2, "x\n"], "b": 0.25})");
  EXPECT_EQ(j.find("a")->dump(), "[2,\"x\\u000a\"]");
  EXPECT_EQ(j.find("b")->dump(), "0.25");
  EXPECT_EQ(j.dump(), R"({"a":1,"a":[2,"x\u000a"],"b":0.25})");
}

}  // namespace
}  // namespace tarn::serve
