// End-to-end tests of the DNS server: `dig` (the independent reference) over UDP and TCP,
// and raw sockets for what dig cannot send (malformed packets, pipelined TCP queries, idle
// and surplus connections). Everything talks to 127.0.0.1 only; the addresses in the
// records are data, never contacted.
#include "registry/dns_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "registry/dns_message.h"
#include "registry/dns_wire_for_test.h"
#include "registry/instance_records_for_test.h"

namespace tarn::registry {
namespace {

using testing::Bytes;
using testing::MakeQuery;
using namespace std::chrono_literals;

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// What dig printed, parsed.
struct Dig {
  std::string output;
  std::string status;              // "NOERROR"
  std::vector<std::string> flags;  // "qr", "aa"...
  int answer_count = -1;
  std::vector<std::vector<std::string>> answers;    // whitespace-split lines
  std::vector<std::vector<std::string>> authority;  // whitespace-split lines
  bool retried_tcp = false;
  std::string edns;  // the "; EDNS: ..." line, empty without OPT

  bool HasFlag(const std::string& f) const {
    return std::find(flags.begin(), flags.end(), f) != flags.end();
  }
};

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string word;
  while (in >> word) out.push_back(word);
  return out;
}

Dig ParseDig(const std::string& output) {
  Dig d;
  d.output = output;
  std::istringstream in(output);
  std::string line;
  std::vector<std::vector<std::string>>* section = nullptr;
  while (std::getline(in, line)) {
    if (line.find("Truncated, retrying in TCP mode") != std::string::npos) d.retried_tcp = true;
    if (const size_t at = line.find("status: "); at != std::string::npos) {
      d.status = line.substr(at + 8, line.find(',', at) - at - 8);
    }
    if (line.rfind(";; flags:", 0) == 0) {
      d.flags = Split(line.substr(9, line.find(';', 9) - 9));
      if (const size_t at = line.find("ANSWER: "); at != std::string::npos) {
        d.answer_count = std::atoi(line.c_str() + at + 8);
      }
    }
    if (line.rfind("; EDNS:", 0) == 0) d.edns = line;
    if (line == ";; ANSWER SECTION:") {
      section = &d.answers;
    } else if (line == ";; AUTHORITY SECTION:") {
      section = &d.authority;
    } else if (line.empty() || line[0] == ';') {
      section = nullptr;
    } else if (section != nullptr) {
      section->push_back(Split(line));
    }
  }
  return d;
}

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A connected socket with a receive timeout, closed on scope exit.
class Socket {
 public:
  Socket(int type, uint16_t port) : fd_(socket(AF_INET, type, 0)) {
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const sockaddr_in a = Loopback(port);
    connected_ = connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Socket() { close(fd_); }
  int fd() const { return fd_; }
  bool connected() const { return connected_; }
  void Send(const Bytes& b) const {
    ASSERT_EQ(send(fd_, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
  }
  // One datagram, or for TCP exactly n bytes; empty on timeout or close.
  Bytes Receive(size_t n, bool exact) const {
    Bytes b(n);
    size_t got = 0;
    do {
      const ssize_t k = recv(fd_, b.data() + got, n - got, 0);
      if (k <= 0) return {};
      got += static_cast<size_t>(k);
    } while (exact && got < n);
    b.resize(got);
    return b;
  }
  Bytes ReceiveFrame() const {
    const Bytes length = Receive(2, true);
    if (length.size() != 2) return {};
    return Receive(static_cast<size_t>(length[0]) << 8 | length[1], true);
  }

 private:
  int fd_;
  bool connected_ = false;
};

Bytes Framed(const Bytes& message) {
  Bytes b = {static_cast<uint8_t>(message.size() >> 8), static_cast<uint8_t>(message.size())};
  b.insert(b.end(), message.begin(), message.end());
  return b;
}

class DnsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.Upsert(Instance("worker", 0, "127.42.0.3"));
    registry_.Upsert(Instance("worker", 1, "127.42.0.4"));
    registry_.Upsert(Instance("worker", 2, "127.42.0.5", /*ready=*/false));
    registry_.Upsert(Instance("ps", 0, "127.42.0.2"));
    for (int i = 0; i < 100; ++i) {
      registry_.Upsert(Instance(
          "big", i, "127.43." + std::to_string(i / 200) + "." + std::to_string(i % 200 + 1)));
    }
  }

  void StartServer(DnsServer::Options options = {}) {
    options.registry = &registry_;
    server_ = std::make_unique<DnsServer>(options);
    const Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_NE(server_->port(), 0);
  }

  Dig RunDig(std::vector<std::string> args) {
    std::vector<std::string> argv = {"dig",     "@127.0.0.1", "-p", std::to_string(server_->port()),
                                     "+time=3", "+tries=1"};
    argv.insert(argv.end(), args.begin(), args.end());
    const StatusOr<CommandResult> r = RunCommand(argv, 20s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return {};
    EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
    return ParseDig(r->out);
  }

  Registry registry_;
  std::unique_ptr<DnsServer> server_;
};

class DigTest : public DnsServerTest {
 protected:
  void SetUp() override {
    if (!OnPath("dig")) GTEST_SKIP() << "dig is not installed (Debian package bind9-dnsutils)";
    DnsServerTest::SetUp();
    StartServer();
  }
};

TEST_F(DigTest, InstanceAOverUdp) {
  const Dig d = RunDig({"worker-0.fmnist.alice.tarn", "A", "+norec"});
  EXPECT_EQ(d.status, "NOERROR") << d.output;
  EXPECT_EQ(d.flags, (std::vector<std::string>{"qr", "aa"})) << d.output;
  ASSERT_EQ(d.answers.size(), 1u) << d.output;
  EXPECT_EQ(d.answers[0], (std::vector<std::string>{"worker-0.fmnist.alice.tarn.", "5", "IN", "A",
                                                    "127.42.0.3"}));
  EXPECT_GE(server_->counters().udp_queries, 1u);
}

TEST_F(DigTest, InstanceAOverTcp) {
  const Dig d = RunDig({"worker-0.fmnist.alice.tarn", "A", "+norec", "+tcp"});
  EXPECT_EQ(d.status, "NOERROR") << d.output;
  EXPECT_TRUE(d.HasFlag("aa"));
  ASSERT_EQ(d.answers.size(), 1u) << d.output;
  EXPECT_EQ(d.answers[0][4], "127.42.0.3");
  const DnsServer::Counters c = server_->counters();
  EXPECT_GE(c.tcp_queries, 1u);
  EXPECT_GE(c.tcp_connections, 1u);
}

TEST_F(DigTest, RecursionDesiredIsEchoedAndNotAvailable) {
  const Dig d = RunDig({"worker-0.fmnist.alice.tarn"});
  EXPECT_TRUE(d.HasFlag("rd")) << d.output;
  EXPECT_FALSE(d.HasFlag("ra")) << d.output;
  EXPECT_TRUE(d.HasFlag("aa")) << d.output;
}

TEST_F(DigTest, CaseOfTheQuestionIsKept) {
  const Dig d = RunDig({"WoRkEr-0.FMNIST.alice.tarn", "A", "+norec"});
  ASSERT_EQ(d.answers.size(), 1u) << d.output;
  EXPECT_EQ(d.answers[0][0], "WoRkEr-0.FMNIST.alice.tarn.");
}

TEST_F(DigTest, ReversePtr) {
  const Dig d = RunDig({"-x", "127.42.0.3", "+norec"});
  EXPECT_EQ(d.status, "NOERROR") << d.output;
  EXPECT_TRUE(d.HasFlag("aa"));
  ASSERT_EQ(d.answers.size(), 1u) << d.output;
  EXPECT_EQ(d.answers[0], (std::vector<std::string>{"3.0.42.127.in-addr.arpa.", "5", "IN", "PTR",
                                                    "worker-0.fmnist.alice.tarn."}));
  EXPECT_EQ(RunDig({"-x", "127.99.0.1", "+norec"}).status, "REFUSED");
}

TEST_F(DigTest, ComponentSrvListsReadyInstances) {
  const Dig d = RunDig({"_grpc._tcp.worker.fmnist.alice.tarn", "SRV", "+norec"});
  EXPECT_EQ(d.status, "NOERROR") << d.output;
  ASSERT_EQ(d.answers.size(), 2u) << d.output;
  EXPECT_EQ(d.answers[0],
            (std::vector<std::string>{"_grpc._tcp.worker.fmnist.alice.tarn.", "5", "IN", "SRV", "0",
                                      "1", "2222", "worker-0.fmnist.alice.tarn."}));
  EXPECT_EQ(d.answers[1][7], "worker-1.fmnist.alice.tarn.");
  const Dig self = RunDig({"_grpc._tcp.worker-2.fmnist.alice.tarn", "SRV", "+norec"});
  ASSERT_EQ(self.answers.size(), 1u) << self.output;
  EXPECT_EQ(self.answers[0][7], "worker-2.fmnist.alice.tarn.");
}

TEST_F(DigTest, ComponentMultiAAndTxt) {
  const Dig a = RunDig({"worker.fmnist.alice.tarn", "A", "+norec"});
  ASSERT_EQ(a.answers.size(), 2u) << a.output;
  EXPECT_EQ(a.answers[0][4], "127.42.0.3");
  EXPECT_EQ(a.answers[1][4], "127.42.0.4");
  const Dig txt = RunDig({"worker-1.fmnist.alice.tarn", "TXT", "+norec"});
  ASSERT_EQ(txt.answers.size(), 1u) << txt.output;
  EXPECT_EQ(txt.answers[0][4], "\"container_worker-1\"");
}

TEST_F(DigTest, NegativeAnswers) {
  Dig d = RunDig({"worker-9.fmnist.alice.tarn", "A", "+norec"});
  EXPECT_EQ(d.status, "NXDOMAIN") << d.output;
  EXPECT_TRUE(d.HasFlag("aa"));
  ASSERT_EQ(d.authority.size(), 1u) << d.output;
  const auto& soa = d.authority[0];
  ASSERT_EQ(soa.size(), 11u) << d.output;
  EXPECT_EQ(soa[0], "tarn.");
  EXPECT_EQ(soa[3], "SOA");
  EXPECT_EQ(soa[4], "tarn.");
  EXPECT_EQ(soa[5], "hostmaster.tarn.");
  EXPECT_EQ(soa[10], "5");  // minimum = the TTL

  d = RunDig({"fmnist.alice.tarn", "A", "+norec"});  // empty non-terminal
  EXPECT_EQ(d.status, "NOERROR") << d.output;
  EXPECT_EQ(d.answer_count, 0);
  EXPECT_EQ(d.authority.size(), 1u);

  d = RunDig({"worker-0.fmnist.alice.tarn", "AAAA", "+norec"});
  EXPECT_EQ(d.status, "NOERROR") << d.output;
  EXPECT_EQ(d.answer_count, 0);
  EXPECT_EQ(d.authority.size(), 1u);

  d = RunDig({"example.com", "A", "+norec"});
  EXPECT_EQ(d.status, "REFUSED") << d.output;
  EXPECT_FALSE(d.HasFlag("aa"));
}

TEST_F(DigTest, ApexSoaNsAndAny) {
  Dig d = RunDig({"tarn", "SOA", "+norec"});
  ASSERT_EQ(d.answers.size(), 1u) << d.output;
  EXPECT_EQ(d.answers[0][3], "SOA");
  d = RunDig({"tarn", "NS", "+norec"});
  ASSERT_EQ(d.answers.size(), 1u) << d.output;
  EXPECT_EQ(d.answers[0][4], "tarn.");
  d = RunDig({"worker-0.fmnist.alice.tarn", "ANY", "+norec"});
  ASSERT_EQ(d.answers.size(), 2u) << d.output;
  EXPECT_EQ(d.answers[0][3], "A");
  EXPECT_EQ(d.answers[1][3], "TXT");
}

TEST_F(DigTest, BigMultiATruncatesOverUdpAndSucceedsOverTcp) {
  // 100 A records of 16 bytes: over 512 (no EDNS) and over dig's default EDNS size (1232).
  Dig d = RunDig({"big.fmnist.alice.tarn", "A", "+norec", "+noedns", "+ignore"});
  EXPECT_EQ(d.status, "NOERROR") << d.output;
  EXPECT_TRUE(d.HasFlag("tc")) << d.output;
  EXPECT_TRUE(d.HasFlag("aa")) << d.output;
  EXPECT_EQ(d.answer_count, 0) << d.output;

  d = RunDig({"big.fmnist.alice.tarn", "A", "+norec"});
  EXPECT_TRUE(d.retried_tcp) << d.output;
  EXPECT_EQ(d.answers.size(), 100u) << d.output;

  d = RunDig({"big.fmnist.alice.tarn", "A", "+norec", "+tcp"});
  EXPECT_FALSE(d.retried_tcp);
  EXPECT_EQ(d.answers.size(), 100u) << d.output;

  d = RunDig({"big.fmnist.alice.tarn", "A", "+norec", "+bufsize=4096"});
  EXPECT_FALSE(d.retried_tcp) << d.output;
  EXPECT_FALSE(d.HasFlag("tc")) << d.output;
  EXPECT_EQ(d.answers.size(), 100u) << d.output;
  EXPECT_NE(d.edns.find("version: 0"), std::string::npos) << d.output;
  EXPECT_NE(d.edns.find("udp: 4096"), std::string::npos) << d.output;

  EXPECT_GE(server_->counters().truncated, 2u);
}

TEST_F(DigTest, EdnsVersionOneIsBadvers) {
  const Dig d = RunDig({"tarn", "SOA", "+norec", "+edns=1", "+noednsnegotiation"});
  EXPECT_EQ(d.status, "BADVERS") << d.output;
  EXPECT_GE(server_->counters().QueriesWith(Rcode::kBadVers), 1u);
}

TEST_F(DnsServerTest, MalformedPacketsAreDroppedAndCounted) {
  DnsServer::Options options;
  options.udp_threads = 1;  // one thread: counted in the order sent
  StartServer(options);
  Socket udp(SOCK_DGRAM, server_->port());
  udp.Send({1, 2, 3});
  Bytes response = MakeQuery("tarn", kTypeSoa, 1);
  response[2] = 0x80;
  udp.Send(response);
  Bytes formerr = MakeQuery("tarn", kTypeSoa, 2);
  formerr[12] = 0x41;  // a label type that does not exist
  udp.Send(formerr);
  udp.Send(MakeQuery("tarn", kTypeSoa, 3));

  DecodedMessage m;
  ASSERT_TRUE(DecodeMessage(udp.Receive(4096, false), &m).ok());
  EXPECT_EQ(m.id, 2);
  EXPECT_EQ(m.rcode, 1);
  ASSERT_TRUE(DecodeMessage(udp.Receive(4096, false), &m).ok());
  EXPECT_EQ(m.id, 3);
  EXPECT_EQ(m.rcode, 0);
  const DnsServer::Counters c = server_->counters();
  EXPECT_EQ(c.malformed, 2u);
  EXPECT_EQ(c.QueriesWith(Rcode::kFormErr), 1u);
  EXPECT_EQ(c.QueriesWith(Rcode::kNoError), 1u);
  EXPECT_EQ(c.queries(), 2u);

  const std::string text = server_->PrometheusText();
  EXPECT_NE(text.find("tarn_dns_queries_total{rcode=\"NOERROR\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tarn_dns_queries_total{rcode=\"FORMERR\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("tarn_dns_queries_total{rcode=\"NXDOMAIN\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("tarn_dns_malformed_total 2\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE tarn_dns_queries_total counter\n"), std::string::npos);
}

TEST_F(DnsServerTest, TcpAnswersSeveralQueriesPerConnectionInOrder) {
  StartServer();
  Socket tcp(SOCK_STREAM, server_->port());
  ASSERT_TRUE(tcp.connected());
  Bytes burst;
  for (uint16_t id = 1; id <= 3; ++id) {
    const Bytes frame = Framed(MakeQuery("worker-0.fmnist.alice.tarn", kTypeA, id));
    burst.insert(burst.end(), frame.begin(), frame.end());
  }
  tcp.Send(burst);
  // A frame split across writes, and a dropped (QR) message between.
  Bytes response = MakeQuery("tarn", kTypeA, 9);
  response[2] = 0x80;
  tcp.Send(Framed(response));
  const Bytes split = Framed(MakeQuery("big.fmnist.alice.tarn", kTypeA, 4));
  tcp.Send(Bytes(split.begin(), split.begin() + 5));
  tcp.Send(Bytes(split.begin() + 5, split.end()));
  for (uint16_t id = 1; id <= 4; ++id) {
    DecodedMessage m;
    const Status s = DecodeMessage(tcp.ReceiveFrame(), &m);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(m.id, id);
    EXPECT_FALSE(m.tc);
    EXPECT_EQ(m.answers.size(), id == 4 ? 100u : 1u);
  }
  EXPECT_EQ(server_->counters().tcp_connections, 1u);
  EXPECT_EQ(server_->counters().malformed, 1u);
}

TEST_F(DnsServerTest, HalfClosedTcpClientStillGetsItsAnswers) {
  StartServer();
  Socket tcp(SOCK_STREAM, server_->port());
  tcp.Send(Framed(MakeQuery("tarn", kTypeSoa, 5)));
  shutdown(tcp.fd(), SHUT_WR);
  DecodedMessage m;
  ASSERT_TRUE(DecodeMessage(tcp.ReceiveFrame(), &m).ok());
  EXPECT_EQ(m.id, 5);
  EXPECT_TRUE(tcp.Receive(1, false).empty());  // then the server closes
}

TEST_F(DnsServerTest, IdleTcpConnectionsAreClosed) {
  DnsServer::Options options;
  options.tcp_idle_timeout = 200ms;
  StartServer(options);
  Socket tcp(SOCK_STREAM, server_->port());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(tcp.Receive(1, false).empty());  // EOF, well before the 5 s receive timeout
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  EXPECT_EQ(server_->counters().tcp_connections_idle_closed, 1u);
}

TEST_F(DnsServerTest, ConnectionsBeyondTheMaximumAreClosed) {
  DnsServer::Options options;
  options.max_tcp_connections = 2;
  StartServer(options);
  Socket a(SOCK_STREAM, server_->port()), b(SOCK_STREAM, server_->port());
  // Both are served (so both were accepted before the third connects).
  for (const Socket* s : {&a, &b}) {
    s->Send(Framed(MakeQuery("tarn", kTypeSoa, 1)));
    EXPECT_FALSE(s->ReceiveFrame().empty());
  }
  Socket c(SOCK_STREAM, server_->port());
  c.Send(Framed(MakeQuery("tarn", kTypeSoa, 1)));
  EXPECT_TRUE(c.ReceiveFrame().empty());
  const DnsServer::Counters counters = server_->counters();
  EXPECT_EQ(counters.tcp_connections_rejected, 1u);
  EXPECT_EQ(counters.tcp_connections_open, 2u);
}

TEST_F(DnsServerTest, StopsWithOpenConnectionsAndFreesThePort) {
  StartServer();
  const uint16_t port = server_->port();
  Socket tcp(SOCK_STREAM, port);
  ASSERT_TRUE(tcp.connected());
  tcp.Send(Bytes{0, 40, 1, 2});  // half a frame
  server_->Stop();
  EXPECT_TRUE(tcp.Receive(1, false).empty());
  server_->Stop();  // idempotent

  DnsServer::Options options;
  options.port = port;
  options.registry = &registry_;
  DnsServer again(options);
  const Status s = again.Start();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(again.port(), port);
}

TEST_F(DnsServerTest, StartErrors) {
  StartServer();
  DnsServer::Options options;
  options.registry = &registry_;
  options.port = server_->port();
  DnsServer clash(options);
  EXPECT_EQ(clash.Start().code(), StatusCode::kUnavailable);
  options.host = "not an address";
  options.port = 0;
  DnsServer bad_host(options);
  EXPECT_EQ(bad_host.Start().code(), StatusCode::kInvalidArgument);
  DnsServer no_registry(DnsServer::Options{});
  EXPECT_EQ(no_registry.Start().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(server_->Start().code(), StatusCode::kFailedPrecondition);
}

TEST_F(DnsServerTest, ManyUdpQueriesFromSeveralClients) {
  StartServer();
  std::vector<std::thread> clients;
  std::atomic<int> answered{0};
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      Socket udp(SOCK_DGRAM, server_->port());
      for (int i = 0; i < 200; ++i) {
        const uint16_t id = static_cast<uint16_t>(t * 1000 + i);
        udp.Send(MakeQuery("worker.fmnist.alice.tarn", kTypeA, id));
        DecodedMessage m;
        if (DecodeMessage(udp.Receive(4096, false), &m).ok() && m.id == id &&
            m.answers.size() == 2) {
          ++answered;
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(answered.load(), 800);
  EXPECT_EQ(server_->counters().udp_queries, 800u);
}

// ---- Forwarding names outside the domain ----

// An upstream that is itself a DnsServer, authoritative for "upstream.test": what it
// answers, the forwarding server must relay unchanged but for the ID.
class ForwarderTest : public DnsServerTest {
 protected:
  void SetUp() override {
    DnsServerTest::SetUp();
    InstanceRecords r = Instance("web", 0, "127.9.0.7");
    r.user = "bob";
    r.assembly = "site";
    upstream_registry_.Upsert(r);
    DnsServer::Options o;
    o.registry = &upstream_registry_;
    upstream_ = std::make_unique<DnsServer>(o);
    ASSERT_TRUE(upstream_->Start().ok());
  }
  Registry upstream_registry_{"upstream.test"};
  std::unique_ptr<DnsServer> upstream_;
};

TEST_F(ForwarderTest, NamesOutsideTheDomainAreAnsweredByTheUpstream) {
  DnsServer::Options options;
  options.udp_threads = 1;
  // A dead upstream first: after its timeout the query passes to the live one.
  options.upstreams = {"127.0.0.1:9", "127.0.0.1:" + std::to_string(upstream_->port())};
  StartServer(options);
  Socket udp(SOCK_DGRAM, server_->port());
  udp.Send(MakeQuery("web-0.site.bob.upstream.test", kTypeA, 0x1234));
  udp.Send(MakeQuery("ps-0.fmnist.alice.tarn", kTypeA, 0x1235));  // ours: answered at once
  DecodedMessage m;
  ASSERT_TRUE(DecodeMessage(udp.Receive(4096, false), &m).ok());
  EXPECT_EQ(m.id, 0x1235);
  ASSERT_TRUE(DecodeMessage(udp.Receive(4096, false), &m).ok());
  EXPECT_EQ(m.id, 0x1234);  // the client's own ID, put back
  EXPECT_EQ(m.rcode, 0);
  ASSERT_EQ(m.answers.size(), 1u);
  EXPECT_EQ(m.answers[0].ipv4, 0x7f090007u);
  const DnsServer::Counters c = server_->counters();
  EXPECT_EQ(c.forwarder.forwarded, 1u);
  EXPECT_EQ(c.forwarder.answered, 1u);
  EXPECT_EQ(c.QueriesWith(Rcode::kRefused), 0u);
  EXPECT_EQ(upstream_->counters().QueriesWith(Rcode::kNoError), 1u);

  // Over TCP nothing is forwarded.
  Socket tcp(SOCK_STREAM, server_->port());
  ASSERT_TRUE(tcp.connected());
  tcp.Send(Framed(MakeQuery("web-0.site.bob.upstream.test", kTypeA, 7)));
  ASSERT_TRUE(DecodeMessage(tcp.ReceiveFrame(), &m).ok());
  EXPECT_EQ(m.rcode, static_cast<int>(Rcode::kRefused));
  EXPECT_NE(server_->PrometheusText().find("tarn_dns_forward_answers_total 1\n"),
            std::string::npos);
}

TEST_F(ForwarderTest, AnUpstreamThatNeverAnswersTimesOutAndAnswersFromElsewhereAreDropped) {
  // The "upstream" is a socket of ours that reads the forwarded query and answers from a
  // different socket: a spoofed answer the forwarder must ignore.
  const int fake = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a = Loopback(0);
  ASSERT_EQ(bind(fake, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t size = sizeof(a);
  getsockname(fake, reinterpret_cast<sockaddr*>(&a), &size);
  DnsServer::Options options;
  options.upstreams = {"127.0.0.1:" + std::to_string(ntohs(a.sin_port))};
  StartServer(options);
  Socket udp(SOCK_DGRAM, server_->port());
  udp.Send(MakeQuery("example.com", kTypeA, 42));
  Bytes forwarded(512);
  sockaddr_in from{};
  socklen_t from_size = sizeof(from);
  const ssize_t n = recvfrom(fake, forwarded.data(), forwarded.size(), 0,
                             reinterpret_cast<sockaddr*>(&from), &from_size);
  ASSERT_GT(n, 12);
  forwarded.resize(static_cast<size_t>(n));
  forwarded[2] |= 0x80;  // make it a response
  const int spoofer = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_EQ(sendto(spoofer, forwarded.data(), forwarded.size(), 0,
                   reinterpret_cast<sockaddr*>(&from), from_size),
            static_cast<ssize_t>(forwarded.size()));
  timeval quick{2, 500000};  // past the 2 s forwarding timeout
  setsockopt(udp.fd(), SOL_SOCKET, SO_RCVTIMEO, &quick, sizeof(quick));
  EXPECT_TRUE(udp.Receive(4096, false).empty());
  // The forwarder gives up within a tenth of its timeout past it; allow for a slow machine.
  for (int i = 0; i < 50 && server_->counters().forwarder.timed_out == 0; ++i) {
    std::this_thread::sleep_for(100ms);
  }
  const DnsServer::Counters c = server_->counters();
  EXPECT_EQ(c.forwarder.forwarded, 1u);
  EXPECT_EQ(c.forwarder.answered, 0u);
  EXPECT_EQ(c.forwarder.spoofed, 1u);
  EXPECT_EQ(c.forwarder.timed_out, 1u);
  close(spoofer);
  close(fake);
}

TEST(DnsUpstreamTest, ParsesAddressesAndRefusesNames) {
  EXPECT_TRUE(ParseUpstream("10.0.0.2").ok());
  EXPECT_TRUE(ParseUpstream("10.0.0.2:5353").ok());
  EXPECT_TRUE(ParseUpstream("::1").ok());
  EXPECT_TRUE(ParseUpstream("[::1]:53").ok());
  EXPECT_EQ(
      ntohs(reinterpret_cast<const sockaddr_in&>(ParseUpstream("10.0.0.2")->address).sin_port), 53);
  for (const char* bad : {"", "dns.google", "10.0.0.2:", "10.0.0.2:0", "10.0.0.2:70000", "[::1",
                          "[::1]x", "10.0.0.2:5x"}) {
    const auto u = ParseUpstream(bad);
    ASSERT_FALSE(u.ok()) << bad;
    EXPECT_NE(u.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << u.status().message();
  }
}

TEST(DnsPrometheusTextTest, OneFamilyPerMetricWithAListenerLabel) {
  DnsServer::Counters a, b;
  a.queries_by_rcode[0] = 5;
  b.queries_by_rcode[3] = 2;
  b.malformed = 1;
  const std::string text = DnsPrometheusText({{"127.0.0.1:5353", a}, {"127.42.0.1:53", b}});
  EXPECT_NE(text.find("tarn_dns_queries_total{rcode=\"NOERROR\",listener=\"127.0.0.1:5353\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tarn_dns_queries_total{rcode=\"NXDOMAIN\",listener=\"127.42.0.1:53\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("tarn_dns_malformed_total{listener=\"127.42.0.1:53\"} 1\n"),
            std::string::npos);
  size_t types = 0;
  for (size_t at = 0; (at = text.find("# TYPE tarn_dns_queries_total ", at)) != std::string::npos;
       ++at) {
    ++types;
  }
  EXPECT_EQ(types, 1u);
}

}  // namespace
}  // namespace tarn::registry
