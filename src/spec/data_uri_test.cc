#include "spec/data_uri.h"

#include <gtest/gtest.h>

#include <string>

namespace tarn::spec {
namespace {

std::string DecodeOk(std::string_view uri) {
  auto r = DecodeDataUri(uri);
  EXPECT_TRUE(r.ok()) << uri << ": " << r.status().ToString();
  return r.ok() ? *r : std::string("<error>");
}

TEST(DataUriTest, IsDataUri) {
  EXPECT_TRUE(IsDataUri("data:,x"));
  EXPECT_TRUE(IsDataUri("data:"));
  EXPECT_FALSE(IsDataUri("dat"));
  EXPECT_FALSE(IsDataUri("http://example.com/"));
  EXPECT_FALSE(IsDataUri("/tmp/data:x"));
}

TEST(DataUriTest, DecodesBase64) {
  EXPECT_EQ(DecodeOk("data:;base64,SGVsbG8="), "Hello");
  EXPECT_EQ(DecodeOk("data:text/plain;base64,SGk="), "Hi");
  EXPECT_EQ(DecodeOk("data:application/octet-stream;base64,Zm9vYmFy"), "foobar");
  EXPECT_EQ(DecodeOk("data:;base64,"), "");
  // '+' and '/' are the last two symbols: 0xfb 0xff 0xbf -> "+/+/"
  EXPECT_EQ(DecodeOk("data:;base64,+/+/"), std::string("\xfb\xff\xbf"));
}

TEST(DataUriTest, DecodesPercentForm) {
  EXPECT_EQ(DecodeOk("data:,Hello%20World"), "Hello World");
  EXPECT_EQ(DecodeOk("data:text/plain,a%2Cb"), "a,b");
  EXPECT_EQ(DecodeOk("data:,a,b"), "a,b");  // only the first ',' ends the header
  EXPECT_EQ(DecodeOk("data:,%0a%0A"), "\n\n");
  EXPECT_EQ(DecodeOk("data:,"), "");
  // Without ";base64" the data is not base64 even if it looks like it.
  EXPECT_EQ(DecodeOk("data:,SGk="), "SGk=");
}

TEST(DataUriTest, RejectsInvalidBase64) {
  for (const char* uri : {
           "data:;base64,SGV$bG8=",  // '$' is not a base64 symbol
           "data:;base64,S",         // one symbol is only 6 bits
           "data:;base64,SGVsb",     // 5 symbols: 30 bits, 6 left over
           "data:;base64,SG=k",      // a symbol after padding
           "data:;base64,S===",      // more than two '='
           "data:;base64,SGk=\n",    // a newline is not a symbol
       }) {
    auto r = DecodeDataUri(uri);
    EXPECT_FALSE(r.ok()) << uri;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << uri;
      EXPECT_NE(r.status().message().find("base64"), std::string::npos) << uri;
    }
  }
}

TEST(DataUriTest, RejectsBadPercentEscapes) {
  auto truncated = DecodeDataUri("data:,abc%4");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos);
  auto truncated2 = DecodeDataUri("data:,%");
  EXPECT_FALSE(truncated2.ok());
  auto invalid = DecodeDataUri("data:,%zz");
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find("invalid %-escape"), std::string::npos);
}

TEST(DataUriTest, RejectsMalformedUris) {
  auto not_data = DecodeDataUri("http://example.com/x");
  ASSERT_FALSE(not_data.ok());
  EXPECT_EQ(not_data.status().message(), "not a data: URI");
  auto no_comma = DecodeDataUri("data:text/plain;base64");
  ASSERT_FALSE(no_comma.ok());
  EXPECT_NE(no_comma.status().message().find("','"), std::string::npos);
}

TEST(DataUriTest, EncodeMatchesRfc4648Vectors) {
  EXPECT_EQ(EncodeDataUri(""), "data:;base64,");
  EXPECT_EQ(EncodeDataUri("f"), "data:;base64,Zg==");
  EXPECT_EQ(EncodeDataUri("fo"), "data:;base64,Zm8=");
  EXPECT_EQ(EncodeDataUri("foo"), "data:;base64,Zm9v");
  EXPECT_EQ(EncodeDataUri("foob"), "data:;base64,Zm9vYg==");
  EXPECT_EQ(EncodeDataUri("fooba"), "data:;base64,Zm9vYmE=");
  EXPECT_EQ(EncodeDataUri("foobar"), "data:;base64,Zm9vYmFy");
}

TEST(DataUriTest, RoundTripLengthsZeroToFive) {
  const std::string source = "\x01\xfftarn";
  for (size_t n = 0; n <= 5; ++n) {
    std::string bytes = source.substr(0, n);
    std::string uri = EncodeDataUri(bytes);
    EXPECT_TRUE(IsDataUri(uri));
    // Length: 13-char prefix plus 4 symbols per started group of 3 bytes.
    EXPECT_EQ(uri.size(), 13 + 4 * ((n + 2) / 3)) << n;
    auto back = DecodeDataUri(uri);
    ASSERT_TRUE(back.ok()) << n << ": " << back.status().ToString();
    EXPECT_EQ(*back, bytes) << n;
  }
}

TEST(DataUriTest, RoundTripAllByteValues) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  bytes += std::string("\0\0\0", 3);
  auto back = DecodeDataUri(EncodeDataUri(bytes));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, bytes);
}

}  // namespace
}  // namespace tarn::spec
