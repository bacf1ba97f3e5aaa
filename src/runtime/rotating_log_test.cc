#include "runtime/rotating_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/file.h"

namespace tarn::runtime {
namespace {

std::string ReadLog(const std::string& path) { return ReadFileToString(path).value_or(""); }

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

class RotatingLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tarn-log-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(RotatingLogTest, RotatesAtTheLimitAndKeepsNOldFiles) {
  auto log = RotatingLog::Open(dir_ + "/out.log", 10, 2);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE(log->Append("0123456789abcdefghijKLMNOPQRSTuvw").ok());  // 33 bytes
  // 10 bytes a file: the oldest 10 fell off the end, two full files remain behind the
  // current one.
  EXPECT_EQ(ReadLog(dir_ + "/out.log"), "uvw");
  EXPECT_EQ(ReadLog(dir_ + "/out.log.1"), "KLMNOPQRST");
  EXPECT_EQ(ReadLog(dir_ + "/out.log.2"), "abcdefghij");
  EXPECT_FALSE(Exists(dir_ + "/out.log.3"));
}

TEST_F(RotatingLogTest, ContinuesAnExistingFile) {
  {
    auto log = RotatingLog::Open(dir_ + "/out.log", 8, 1);
    ASSERT_TRUE(log->Append("abcde").ok());
  }
  auto log = RotatingLog::Open(dir_ + "/out.log", 8, 1);
  ASSERT_TRUE(log->Append("fghij").ok());
  EXPECT_EQ(ReadLog(dir_ + "/out.log.1"), "abcdefgh");
  EXPECT_EQ(ReadLog(dir_ + "/out.log"), "ij");
}

TEST_F(RotatingLogTest, KeepZeroTruncates) {
  auto log = RotatingLog::Open(dir_ + "/out.log", 4, 0);
  ASSERT_TRUE(log->Append("abcdefg").ok());
  EXPECT_EQ(ReadLog(dir_ + "/out.log"), "efg");
  EXPECT_FALSE(Exists(dir_ + "/out.log.1"));
}

TEST_F(RotatingLogTest, BadArgumentsAreErrors) {
  EXPECT_FALSE(RotatingLog::Open(dir_ + "/out.log", 0, 1).ok());
  EXPECT_FALSE(RotatingLog::Open(dir_ + "/no/such/dir/out.log", 10, 1).ok());
}

}  // namespace
}  // namespace tarn::runtime
