#include "backend/net_walls.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

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
            "  set walled { type ipv4_addr; }\n"
            "  set owners { type ipv4_addr . uid; }\n"
            "  set public { type ipv4_addr . inet_proto . inet_service; }\n"
            "  chain output {\n"
            "    type filter hook output priority filter; policy accept;\n"
            "    ct state new ip daddr @walled ip daddr . meta l4proto . th dport @public "
            "accept\n"
            "    ct state new ip daddr @walled meta skuid != 0 ip daddr . meta skuid != @owners "
            "meta l4proto tcp reject with tcp reset\n"
            "    ct state new ip daddr @walled meta skuid != 0 ip daddr . meta skuid != @owners "
            "reject\n"
            "  }\n"
            "}\n"
            "add element inet tarn owners { 127.42.0.2 . 1001, 127.42.0.3 . 1001 }\n"
            "add element inet tarn public { 127.42.0.3 . tcp . 8501, 127.42.0.3 . udp . 8501 }\n"
            "add element inet tarn walled { 127.42.0.2, 127.42.0.3, 127.42.0.4 }\n");
  // Anything but an IPv4 address is never written into the rules.
  EXPECT_EQ(RenderWalls("t", {{"k", {"127.0.0.1; flush ruleset", 1, {}}}}).find("flush"),
            std::string::npos);
}

TEST(NetWallsTest, AChangeIsItsElementsAlone) {
  const Wall ps{"127.42.0.2", 1001, {}}, serving{"127.42.0.3", 1001, {8501}};
  EXPECT_EQ(RenderWallChanges("t", {}, {{"a/fm/ps-0", ps}}),
            "add element inet t owners { 127.42.0.2 . 1001 }\n"
            "add element inet t walled { 127.42.0.2 }\n");
  EXPECT_EQ(RenderWallChanges("t", {{"a/fm/serving-0", serving}}, {}),
            "delete element inet t owners { 127.42.0.3 . 1001 }\n"
            "delete element inet t public { 127.42.0.3 . tcp . 8501, 127.42.0.3 . udp . 8501 }\n"
            "delete element inet t walled { 127.42.0.3 }\n");
  // Another owner, the same ports: deletes first, then adds, in one transaction.
  EXPECT_EQ(RenderWallChanges("t", {{"k", serving}}, {{"k", {"127.42.0.3", 1002, {8501}}}}),
            "delete element inet t owners { 127.42.0.3 . 1001 }\n"
            "add element inet t owners { 127.42.0.3 . 1002 }\n");
  EXPECT_EQ(RenderWallChanges("t", {{"k", ps}}, {{"k", ps}}), "");
  // What another wall still has stays.
  EXPECT_EQ(RenderWallChanges("t", {{"k", ps}}, {}, {{"j", {"127.42.0.2", 1002, {}}}}),
            "delete element inet t owners { 127.42.0.2 . 1001 }\n");
}

TEST(NetWallsTest, EachServerHasATableOfItsOwn) {
  EXPECT_EQ(WallTableName("127.42.0.0/16", "127.42.0.0/16"), "tarn");
  EXPECT_EQ(WallTableName("127.43.8.0/24", "127.42.0.0/16"), "tarn_127_43_8_0_24");
}

// What nftables is asked, with the walls held until every instance is restored.
class FakeNftTest : public ::testing::Test {
 protected:
  std::unique_ptr<NetWalls> Make() {
    NetWalls::Options o;
    o.table = "tarn_test";
    o.nft = [this](const std::string& commands) {
      calls_.push_back(commands);
      NftAnswer a;
      a.ok = commands.rfind("list", 0) == 0 || refusals_ == 0;
      if (!a.ok) {
        --refusals_;
        a.error = "Error: Could not process rule: No such file or directory";
      }
      return a;
    };
    return NetWalls::Create(std::move(o));
  }
  std::vector<std::string> calls_;
  int refusals_ = 0;  // how many batches after the check nftables refuses
};

TEST_F(FakeNftTest, HeldUntilReleasedThenLoadedWholeThenChangedByElements) {
  if (::geteuid() != 0) GTEST_SKIP() << "walls are off without root";
  auto walls = Make();
  ASSERT_TRUE(walls->on()) << walls->describe();
  EXPECT_EQ(calls_, (std::vector<std::string>{"list tables\n"}));
  ASSERT_TRUE(walls->Set("a/x/c-0", {"127.42.0.2", 1001, {}}).ok());
  ASSERT_TRUE(walls->Set("a/x/c-1", {"127.42.0.3", 1001, {}}).ok());
  EXPECT_EQ(calls_.size(), 1u) << "nothing loaded while held";
  ASSERT_TRUE(walls->Release().ok());
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[1], RenderWalls("tarn_test", walls->walls()));
  EXPECT_NE(calls_[1].find("127.42.0.3"), std::string::npos);
  ASSERT_TRUE(walls->Remove("a/x/c-1").ok());
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2],
            "delete element inet tarn_test owners { 127.42.0.3 . 1001 }\n"
            "delete element inet tarn_test walled { 127.42.0.3 }\n");
  ASSERT_TRUE(walls->Set("a/x/c-0", {"127.42.0.2", 1001, {}}).ok());
  EXPECT_EQ(calls_.size(), 3u) << "the same wall again loads nothing";

  // A change refused (the table is not what this server loaded): the whole table again.
  refusals_ = 1;
  ASSERT_TRUE(walls->Set("b/y/c-0", {"127.42.0.9", 1002, {}}).ok());
  ASSERT_EQ(calls_.size(), 5u);
  EXPECT_EQ(calls_[4], RenderWalls("tarn_test", walls->walls()));
  EXPECT_NE(calls_[4].find("127.42.0.9 . 1002"), std::string::npos);

  // Refused whole too: the error says nftables' words, and what is recorded stays what is
  // loaded.
  refusals_ = 2;
  Status s = walls->Set("b/y/c-1", {"127.42.0.10", 1002, {}});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("refused tarn's rules (table inet tarn_test): Error: Could not "
                             "process rule"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(walls->walls().count("b/y/c-1"), 0u);
  refusals_ = 2;
  EXPECT_FALSE(walls->Remove("b/y/c-0").ok());
  EXPECT_EQ(walls->walls().count("b/y/c-0"), 1u) << "a wall that could not go stays recorded";
}

TEST_F(FakeNftTest, ARefusedFirstLoadTurnsTheWallsOffAndSaysWhy) {
  if (::geteuid() != 0) GTEST_SKIP() << "walls are off without root";
  auto walls = Make();
  refusals_ = 1;
  EXPECT_FALSE(walls->Release().ok());
  EXPECT_FALSE(walls->on());
  EXPECT_NE(walls->describe().find("off: nftables refused tarn's rules"), std::string::npos)
      << walls->describe();
}

// The kernel's verdict: a real table, a real listener, real accounts (root and nobody).
TEST(RealNftTest, OnlyTheOwnAccountAndRootConnectButOnPublicPorts) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (nftables)";
  if (std::system("nft list tables >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "nftables is not installed (scripts/setup installs it) or the kernel "
                    "refuses it";
  }
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
    std::system(
        ("setpriv " + who + " bash -c 'echo " + text + " > /dev/udp/" + ip + "/18803' 2>/dev/null")
            .c_str());
    ::usleep(100000);
    char buf[64] = {};
    const ssize_t n = ::recv(udp, buf, sizeof buf - 1, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };
  EXPECT_EQ(send_udp(other, "from-other"), "") << "another account's datagram arrived";
  EXPECT_EQ(send_udp(nobody, "from-own"), "from-own\n");
  ::close(udp);

  // Changed by its elements alone: gone, then back with the other account as its owner.
  ASSERT_TRUE(walls->Remove("t/a/c-0").ok());
  EXPECT_TRUE(connects(other, 18801)) << "the address is free again";
  ASSERT_TRUE(walls->Set("t/a/c-0", {ip, 65533, {}}).ok());
  EXPECT_TRUE(connects(other, 18801)) << "its new owner";
  EXPECT_FALSE(connects(nobody, 18801)) << "its old owner";
  EXPECT_FALSE(connects(nobody, 18802)) << "no port is public any more";
  ASSERT_TRUE(walls->Remove("t/a/c-0").ok());
  EXPECT_TRUE(connects(nobody, 18801)) << "free again";

  std::system(("nft delete table inet " + std::string("tarn_test_") + std::to_string(::getpid()) +
               " 2>/dev/null")
                  .c_str());
  ::close(priv);
  ::close(pub);
}

}  // namespace
}  // namespace tarn::backend
