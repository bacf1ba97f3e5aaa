#include "backend/name_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file.h"
#include "common/temp_dir.h"

namespace tarn::backend {
namespace {

TEST(NameFilesTest, ResolvConfNamesOnlyTarnWithTheAssemblysSearchDomains) {
  EXPECT_EQ(RenderResolvConf("127.42.0.1", "alice", "fmnist", "tarn"),
            "# tarn: names of this machine's assemblies resolve through tarn server's DNS\n"
            "nameserver 127.42.0.1\n"
            "search fmnist.alice.tarn alice.tarn tarn\n"
            "options ndots:2\n");
}

TEST(NameFilesTest, HostsFileKeepsTheMachinesLinesFirst) {
  EXPECT_EQ(RenderHostsFile("127.0.0.1 localhost", "127.42.0.2\tps-0.fmnist.alice.tarn ps-0\n",
                            "alice", "fmnist"),
            "127.0.0.1 localhost\n"
            "# tarn: the names of assembly fmnist of alice, kept current by tarn server\n"
            "127.42.0.2\tps-0.fmnist.alice.tarn ps-0\n");
  EXPECT_EQ(RenderHostsFile("", "", "alice", "fmnist"),
            "# tarn: the names of assembly fmnist of alice, kept current by tarn server\n");
}

TEST(NameFilesTest, NameserversOfAResolvConf) {
  EXPECT_EQ(NameserversOf("# comment\nsearch example.org\nnameserver 10.0.0.2\n"
                          "nameserver   ::1  \noptions ndots:1\nnameserver\n"),
            (std::vector<std::string>{"10.0.0.2", "::1"}));
  EXPECT_TRUE(NameserversOf("").empty());
}

class RewriteInPlaceTest : public ::testing::Test {
 protected:
  TempDir temp_{"tarn-name-files"};
  const std::string dir_ = temp_.path();
};

TEST_F(RewriteInPlaceTest, KeepsTheInodeSoABindMountSeesTheNewContent) {
  const std::string path = dir_ + "/hosts";
  ASSERT_TRUE(RewriteInPlace(path, "a long first version\n").ok());
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  EXPECT_EQ(before.st_mode & 0777, 0644u);
  ASSERT_TRUE(RewriteInPlace(path, "short\n").ok());
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_EQ(ReadFileToString(path).value_or(""), "short\n");
  ASSERT_TRUE(RewriteInPlace(path, "").ok());
  EXPECT_EQ(ReadFileToString(path).value_or("x"), "");
}

TEST_F(RewriteInPlaceTest, RefusesASymlink) {
  const std::string target = dir_ + "/target";
  ASSERT_TRUE(RewriteInPlace(target, "keep\n").ok());
  ASSERT_EQ(::symlink(target.c_str(), (dir_ + "/link").c_str()), 0);
  const Status s = RewriteInPlace(dir_ + "/link", "planted\n");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir_ + "/link"), std::string::npos) << s.message();
  EXPECT_EQ(ReadFileToString(target).value_or(""), "keep\n");
}

}  // namespace
}  // namespace tarn::backend
