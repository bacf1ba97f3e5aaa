#include "serve/json_reader.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

namespace tarn::serve {
namespace {

// The document of `text` (of "null" when it does not parse, after a failure).
JsonDocument Parse(std::string_view text) {
  auto d = ParseJson(text);
  EXPECT_TRUE(d.ok()) << text << ": " << d.status().ToString();
  if (d.ok()) return std::move(*d);
  auto null = ParseJson("null");
  return std::move(*null);
}

TEST(JsonReaderTest, ReadsEveryKindOfValue) {
  const JsonDocument doc =
      Parse(R"( {"a": [1, -2, 0.5, -1e3, 2E+2, 1.5e-3], "b": {"c": null, "d": true,
                      "e": false}, "s": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", "empty": [], "o": {}} )");
  const Json j = doc.root();
  ASSERT_TRUE(j.is_object());
  const Json array = *j.find("a");
  ASSERT_EQ(array.size(), 6u);
  std::vector<Json> a;
  for (const Json e : array.elements()) a.push_back(e);
  ASSERT_EQ(a.size(), 6u);
  EXPECT_TRUE(a[0].is_number_integer());
  EXPECT_EQ(a[1].integer(), -2);
  EXPECT_FALSE(a[2].is_number_integer());
  EXPECT_EQ(a[2].number(), 0.5);
  EXPECT_EQ(a[3].number(), -1000);
  EXPECT_EQ(a[4].number(), 200);
  EXPECT_DOUBLE_EQ(a[5].number(), 0.0015);
  EXPECT_EQ(j.find("b")->size(), 3u);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.find("b")->members()) keys.emplace_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"c", "d", "e"}));
  // Not an array or an object: no elements, no members, no size.
  for (const Json e : j.find("s")->elements()) ADD_FAILURE() << e.dump();
  for (const auto& m : j.find("s")->members()) ADD_FAILURE() << m.first;
  EXPECT_EQ(j.find("s")->size(), 0u);
  EXPECT_FALSE(j.find("s")->find("x"));
  EXPECT_TRUE(j.find("b")->find("c")->is_null());
  EXPECT_TRUE(j.find("b")->find("d")->boolean());
  EXPECT_FALSE(j.find("b")->find("e")->boolean());
  EXPECT_EQ(j.find("s")->str(), "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(j.find("empty")->is_array() && j.find("empty")->empty());
  EXPECT_TRUE(j.find("o")->is_object() && j.find("o")->empty());
  EXPECT_FALSE(j.find("missing"));
}

TEST(JsonReaderTest, NumbersMatchNlohmann) {
  for (const char* text : {"0", "-0", "123456789012345678", "9223372036854775807",
                           "-9223372036854775808", "1e-400", "-1e-400", "2.5e-324", "0.1",
                           "3.4028235e38", "2.2250738585072014e-308"}) {
    const JsonDocument doc = Parse(text);
    const Json mine = doc.root();
    const nlohmann::json theirs = nlohmann::json::parse(text);
    EXPECT_EQ(mine.is_number_integer(), theirs.is_number_integer()) << text;
    EXPECT_EQ(mine.number(), theirs.get<double>()) << text;
  }
  // Beyond int64: a float here (nlohmann keeps it as uint64 up to 2^64 - 1).
  EXPECT_EQ(Parse("9223372036854775808").root().number(), 9223372036854775808.0);
  EXPECT_FALSE(Parse("18446744073709551615").root().is_number_integer());
  // Beyond double: an error, in both. Beyond uint64: an error here, a double in nlohmann.
  EXPECT_FALSE(ParseJson("1e400").ok());
  EXPECT_FALSE(ParseJson("-1e400").ok());
  auto big = ParseJson("123456789012345678901234567890");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("number"), std::string::npos) << big.status().message();
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
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto j = ParseJson(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("nested too deeply"), std::string::npos)
      << j.status().message();
  auto unclosed = ParseJson(std::string(100000, '['));
  ASSERT_FALSE(unclosed.ok());
  EXPECT_EQ(unclosed.status().message().rfind("not valid JSON", 0), 0u)
      << unclosed.status().message();
  const std::string too_deep =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_FALSE(ParseJson(too_deep).ok());
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(ParseJson(ok).ok());
}

TEST(JsonReaderTest, TheLastOfDuplicateKeysWinsAndDumpIsCompact) {
  const JsonDocument doc = Parse(R"({"a": 1, "a": [2, "x\n"], "b": 0.25})");
  const Json j = doc.root();
  EXPECT_EQ(j.find("a")->dump(), "[2,\"x\\n\"]");
  EXPECT_EQ(j.find("b")->dump(), "0.25");
  EXPECT_EQ(j.dump(), R"({"a":1,"a":[2,"x\n"],"b":0.25})");
}

// Errors name the byte where the text stops being JSON.
TEST(JsonReaderTest, AnErrorNamesItsByte) {
  auto j = ParseJson(R"({"instances": [[0.5, 0.25,, 1]]})");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message().rfind("not valid JSON at byte 27: ", 0), 0u)
      << j.status().message();
}

// A body above the size the threads' parsers keep is read by a parser of its own.
TEST(JsonReaderTest, ABodyOverAMegabyteIsRead) {
  std::string big = "[";
  while (big.size() < (3u << 20)) big += "0.125,";
  big += "1]";
  auto d = ParseJson(big);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  size_t n = 0;
  for (const Json e : d->root().elements()) n += e.is_number();
  EXPECT_EQ(n, d->root().size());
  EXPECT_GT(n, 500000u);
  EXPECT_TRUE(ParseJson("[1, 2]").ok());  // and the thread's parser still works
}

}  // namespace
}  // namespace tarn::serve
