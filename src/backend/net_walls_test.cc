#include "backend/net_walls.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/temp_dir.h"

namespace tarn::backend {
namespace {

TEST(NetWallsTest, RenderReplacesTheWholeTableAndMatchesNewFlowsOnly) {
  std::map<std::string, Wall> walls = {{"alice/fm/ps-0", {"127.42.0.2", 1001, {}}},
                                       {"alice/fm/serving-0", {"127.42.0.3", 1001, {8501}}},
                                       {"root/x/c-0", {"127.42.0.4", 0, {}}}};
  EXPECT_EQ(RenderWalls("tarn", walls),
            "table inet tarn {}\n"
            "delete table inet tarn\n"
            "table inet tarn {\n"
            "  chain output {\n"
            "    type filter hook output priority filter; policy accept;\n"
            "    # alice/fm/ps-0\n"
            "    ip daddr 127.42.0.2 ct state new meta skuid != { 0, 1001 } meta l4proto tcp "
            "reject with tcp reset\n"
            "    ip daddr 127.42.0.2 ct state new meta skuid != { 0, 1001 } reject\n"
            "    # alice/fm/serving-0\n"
            "    ip daddr 127.42.0.3 ct state new tcp dport { 8501 } accept\n"
            "    ip daddr 127.42.0.3 ct state new udp dport { 8501 } accept\n"
            "    ip daddr 127.42.0.3 ct state new meta skuid != { 0, 1001 } meta l4proto tcp "
            "reject with tcp reset\n"
            "    ip daddr 127.42.0.3 ct state new meta skuid != { 0, 1001 } reject\n"
            "    # root/x/c-0\n"
            "    ip daddr 127.42.0.4 ct state new meta skuid != 0 meta l4proto tcp reject with "
            "tcp reset\n"
            "    ip daddr 127.42.0.4 ct state new meta skuid != 0 reject\n"
            "  }\n"
            "}\n");
  // Anything but an IPv4 address is never written into the rules.
  EXPECT_EQ(RenderWalls("t", {{"k", {"127.0.0.1; flush ruleset", 1, {}}}}).find("flush"),
            std::string::npos);
}

TEST(NetWallsTest, EachServerHasATableOfItsOwn) {
  EXPECT_EQ(WallTableName("127.42.0.0/16", "127.42.0.0/16"), "tarn");
  EXPECT_EQ(WallTableName("127.43.8.0/24", "127.42.0.0/16"), "tarn_127_43_8_0_24");
}

// What nft is asked, with the walls held until every instance is restored.
class FakeNftTest : public ::testing::Test {
 protected:
  std::unique_ptr<NetWalls> Make() {
    NetWalls::Options o;
    o.table = "tarn_test";
    o.rules_file = tmp_.path() + "/walls.nft";
    o.run = [this](const std::vector<std::string>& argv) -> StatusOr<CommandResult> {
      calls_.push_back(argv);
      CommandResult r;
      r.exit_code = argv[1] == "-f" && refuse_ ? 1 : 0;
      if (r.exit_code != 0) r.err = "Error: Could not process rule: No such file or directory\n";
      if (argv[1] == "-f") loaded_ = ReadFileToString(argv[2]).value_or("");
      return r;
    };
    return NetWalls::Create(std::move(o));
  }
  TempDir tmp_{"net-walls-test"};
  std::vector<std::vector<std::string>> calls_;
  std::string loaded_;
  bool refuse_ = false;
};

TEST_F(FakeNftTest, HeldUntilReleasedThenLoadedWholeOnEveryChange) {
  if (::geteuid() != 0) GTEST_SKIP() << "walls are off without root";
  auto walls = Make();
  ASSERT_TRUE(walls->on()) << walls->describe();
  EXPECT_EQ(calls_, (std::vector<std::vector<std::string>>{{"nft", "list", "tables"}}));
  ASSERT_TRUE(walls->Set("a/x/c-0", {"127.42.0.2", 1001, {}}).ok());
  ASSERT_TRUE(walls->Set("a/x/c-1", {"127.42.0.3", 1001, {}}).ok());
  EXPECT_EQ(calls_.size(), 1u) << "nothing loaded while held";
  ASSERT_TRUE(walls->Release().ok());
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[1], (std::vector<std::string>{"nft", "-f", tmp_.path() + "/walls.nft"}));
  EXPECT_EQ(loaded_, RenderWalls("tarn_test", walls->walls()));
  EXPECT_NE(loaded_.find("127.42.0.3"), std::string::npos);
  ASSERT_TRUE(walls->Remove("a/x/c-1").ok());
  EXPECT_EQ(loaded_.find("127.42.0.3"), std::string::npos);
  ASSERT_TRUE(walls->Set("a/x/c-0", {"127.42.0.2", 1001, {}}).ok());
  EXPECT_EQ(calls_.size(), 3u) << "the same wall again loads nothing";

  // Refused: the error says nft's words, and what is recorded stays what is loaded.
  refuse_ = true;
  Status s = walls->Set("b/y/c-0", {"127.42.0.9", 1002, {}});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("refused tarn's rules: Error: Could not process rule"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(walls->walls().count("b/y/c-0"), 0u);
}

TEST_F(FakeNftTest, ARefusedFirstLoadTurnsTheWallsOffAndSaysWhy) {
  if (::geteuid() != 0) GTEST_SKIP() << "walls are off without root";
  auto walls = Make();
  refuse_ = true;
  EXPECT_FALSE(walls->Release().ok());
  EXPECT_FALSE(walls->on());
  EXPECT_NE(walls->describe().find("off: nft -f"), std::string::npos) << walls->describe();
}

// The kernel's verdict: a real table, a real listener, real accounts (root and nobody).
TEST(RealNftTest, OnlyTheOwnAccountAndRootConnectButOnPublicPorts) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (nftables)";
  if (std::system("nft list tables >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "nftables is not installed (scripts/setup installs it) or the kernel "
                    "refuses it";
  }
  TempDir tmp("net-walls-real-test");
  // An address of this test's own, away from the servers' ranges.
  const std::string ip = "127.251." + std::to_string(::getpid() % 250) + ".7";
  auto listen_on = [&](int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd, 16), 0);
    return fd;
  };
  const int priv = listen_on(18801), pub = listen_on(18802);
  // Exit 0 when `who` (setpriv's options) connects to the port.
  auto connects = [&](const std::string& who, int port) {
    return std::system(("setpriv " + who + " bash -c 'exec 3<>/dev/tcp/" + ip + "/" +
                        std::to_string(port) + "' 2>/dev/null")
                           .c_str()) == 0;
  };
  const std::string nobody = "--reuid=65534 --regid=65534 --clear-groups";
  const std::string other = "--reuid=65533 --regid=65533 --clear-groups";
  ASSERT_TRUE(connects(other, 18801)) << "no walls yet";

  NetWalls::Options o;
  o.table = "tarn_test_" + std::to_string(::getpid());
  o.rules_file = tmp.path() + "/walls.nft";
  auto walls = NetWalls::Create(std::move(o));
  ASSERT_TRUE(walls->on()) << walls->describe();
  ASSERT_TRUE(walls->Set("t/a/c-0", {ip, 65534, {18802}}).ok());
  ASSERT_TRUE(walls->Release().ok());
  EXPECT_TRUE(connects(nobody, 18801)) << "its own account";
  EXPECT_TRUE(connects("--reuid=0", 18801)) << "root";
  EXPECT_FALSE(connects(other, 18801)) << "another account";
  EXPECT_TRUE(connects(other, 18802)) << "a public port";

  // UDP: another account's datagram never arrives; root's does.
  const int udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in u{};
  u.sin_family = AF_INET;
  u.sin_port = htons(18803);
  ::inet_pton(AF_INET, ip.c_str(), &u.sin_addr);
  ASSERT_EQ(::bind(udp, reinterpret_cast<sockaddr*>(&u), sizeof u), 0);
  auto send_udp = [&](const std::string& who, const std::string& text) {
    std::system(("setpriv " + who + " bash -c 'echo " + text + " > /dev/udp/" + ip +
                 "/18803' 2>/dev/null")
                    .c_str());
    ::usleep(100000);
    char buf[64] = {};
    const ssize_t n = ::recv(udp, buf, sizeof buf - 1, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };
  EXPECT_EQ(send_udp(other, "from-other"), "") << "another account's datagram arrived";
  EXPECT_EQ(send_udp(nobody, "from-own"), "from-own\n");
  ::close(udp);

  ASSERT_TRUE(walls->Remove("t/a/c-0").ok());
  EXPECT_TRUE(connects(other, 18801)) << "the address is free again";

  std::system(("nft delete table inet " + std::string("tarn_test_") + std::to_string(::getpid()) +
               " 2>/dev/null")
                  .c_str());
  ::close(priv);
  ::close(pub);
}

}  // namespace
}  // namespace tarn::backend
