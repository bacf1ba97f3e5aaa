#include "train/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>

#include "common/temp_dir.h"

namespace tarn::train {
namespace {

std::string Header(uint8_t type, std::vector<uint32_t> dims) {
  std::string h = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) h.push_back(static_cast<char>(d >> shift));
  }
  return h;
}

class IdxTest : public ::testing::Test {
 protected:
  void WritePlain(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << bytes;
  }
  void WriteGz(const std::string& name, const std::string& bytes) {
    gzFile f = gzopen((dir_ + "/" + name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(f);
  }
  // Three 2x2 images and their labels.
  void WriteSet(const std::string& prefix, const std::string& labels = {1, 9, 0}) {
    WriteGz(
        prefix + "-images-idx3-ubyte.gz",
        Header(8, {3, 2, 2}) + std::string("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b", 12));
    WriteGz(prefix + "-labels-idx1-ubyte.gz",
            Header(8, {static_cast<uint32_t>(labels.size())}) + labels);
  }
  TempDir temp_{"tarn-idx"};
  const std::string dir_ = temp_.path();
};

TEST_F(IdxTest, ReadsPlainAndGzippedFiles) {
  const std::string bytes = Header(8, {2, 3}) + "abcdef";
  WritePlain("plain", bytes);
  WriteGz("zipped.gz", bytes);
  for (const char* name : {"plain", "zipped.gz"}) {
    auto a = ReadIdx(dir_ + "/" + name);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(std::string(a->data.begin(), a->data.end()), "abcdef");
  }
}

TEST_F(IdxTest, ReadsAnImageSet) {
  WriteSet("train");
  auto set = ReadImageSet(dir_, "train");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->count, 3);
  EXPECT_EQ(set->rows, 2);
  EXPECT_EQ(set->cols, 2);
  EXPECT_EQ(set->pixels.size(), 12u);
  EXPECT_EQ(set->pixels[11], 11);
  EXPECT_EQ(set->labels, (std::vector<uint8_t>{1, 9, 0}));
}

TEST_F(IdxTest, BadFilesAreClearErrors) {
  struct Case {
    std::string bytes;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"", "too short for an IDX header"},
      {std::string("\x01\x00\x08\x01", 4), "not an IDX file"},
      {Header(0x0d, {1}) + "x", "element type 0x0d is not unsigned bytes"},
      {Header(8, {}), "unsupported number of dimensions 0"},
      {Header(8, {2, 2}).substr(0, 9), "truncated header"},
      {Header(8, {0}), "dimension 0 has size 0"},
      {Header(8, {2, 3}) + "abc", "holds 3 bytes of data, its header says 6 (truncated)"},
      {Header(8, {1}) + "ab", "holds 2 bytes of data, its header says 1"},
  };
  for (const Case& c : cases) {
    WriteGz("bad.gz", c.bytes);
    auto a = ReadIdx(dir_ + "/bad.gz");
    ASSERT_FALSE(a.ok()) << c.error;
    EXPECT_EQ(a.status().message().rfind(dir_ + "/bad.gz: " + c.error, 0), 0u)
        << a.status().message();
  }
}

// A label file holding images (or the other way round) is named by its magic number, not
// reported as a shape that happens not to add up.
TEST_F(IdxTest, AFileOfTheWrongKindIsNamedByItsMagicNumber) {
  WriteSet("train");
  WriteGz("train-labels-idx1-ubyte.gz", Header(8, {3, 2, 2}) + std::string(12, '\0'));
  auto set = ReadImageSet(dir_, "train");
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(),
            dir_ +
                "/train-labels-idx1-ubyte.gz: its magic number 0x00000803 gives 3 dimensions; "
                "expected 1 (magic 0x00000801)");
}

TEST_F(IdxTest, TruncatedOrCorruptGzipIsAnError) {
  const std::string path = dir_ + "/cut.gz";
  WriteGz("cut.gz", Header(8, {1000}) + std::string(1000, 'x'));
  std::string whole;
  {
    std::ifstream in(path, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  WritePlain("cut.gz", whole.substr(0, whole.size() / 2));
  auto a = ReadIdx(path);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find(path + ": "), std::string::npos);
  EXPECT_NE(a.status().message().find("gzip"), std::string::npos) << a.status().message();

  std::string flipped = whole;
  flipped[flipped.size() - 6] ^= 0x55;  // the CRC no longer matches
  WritePlain("cut.gz", flipped);
  a = ReadIdx(path);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("gzip"), std::string::npos) << a.status().message();

  EXPECT_EQ(ReadIdx(dir_ + "/missing").status().code(), StatusCode::kNotFound);
}

TEST_F(IdxTest, ImagesAndLabelsMustBelongTogether) {
  WriteSet("t10k", std::string{1, 2});
  auto set = ReadImageSet(dir_, "t10k");
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("holds 3 images but"), std::string::npos)
      << set.status().message();
  WriteSet("t10k", std::string{1, 10, 2});
  set = ReadImageSet(dir_, "t10k");
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("label 1 is 10, not below 10"), std::string::npos)
      << set.status().message();
}

}  // namespace
}  // namespace tarn::train
