#include "http/server.h"

#include "common/temp_dir.h"
#include "http/raw_client_for_test.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace tarn::http {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
using testing::RawClient;

std::string Get(const std::string& path, bool close = false) {
  return "GET " + path + " HTTP/1.1\r\nHost: test\r\n" +
         (close ? "Connection: close\r\n" : "") + "\r\n";
}

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(Server::Options o, Handler handler = nullptr) {
    o.listen.host = "127.0.0.1";
    o.listen.port = 0;
    if (!handler) {
      handler = [](Request r, Responder respond) {
        respond(Response(200, "text/plain", r.method + " " + r.target + " " +
                                                std::to_string(r.body.size())));
      };
    }
    auto s = Server::Create(std::move(o), std::move(handler));
    ASSERT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(s).value();
    server_->Start();
  }
  void TearDown() override {
    if (server_) server_->Drain(2s);
  }
  int port() const { return server_->port(); }

  std::unique_ptr<Server> server_;
};

TEST_F(HttpServerTest, HalfOpenConnectionsDoNotStopOthersAndCloseAtTheHeaderDeadline) {
  Server::Options o;
  o.header_timeout = 1500ms;
  o.threads = 1;  // one I/O thread: nothing may wait on a slow client
  Start(o);
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<RawClient>(port()));
    ASSERT_TRUE(slow.back()->connected());
    // The request line and one header; the head never ends.
    ASSERT_TRUE(slow.back()->Send("GET /slow HTTP/1.1\r\nHost: x\r\n"));
  }
  const auto t0 = SteadyClock::now();
  RawClient fast(port());
  ASSERT_TRUE(fast.Send(Get("/status", true)));
  const std::string answer = fast.ReadAll(5s);
  const auto took = SteadyClock::now() - t0;
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("GET /status 0"), std::string::npos) << answer;
  EXPECT_LT(took, 2s);
  // Still open before the deadline (they were accepted, not refused), closed after it.
  int closed_early = 0;
  for (auto& c : slow) closed_early += c->ClosedByPeer();
  EXPECT_EQ(closed_early, 0);
  // The fast one's connection ends a moment after its answer has gone out.
  for (int i = 0; i < 50 && server_->open_connections() != 200; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(server_->open_connections(), 200u);
  std::this_thread::sleep_for(1500ms + 1500ms);
  int closed = 0;
  for (auto& c : slow) closed += c->ClosedByPeer();
  EXPECT_EQ(closed, 200);
  EXPECT_EQ(server_->open_connections(), 0u);
}

TEST_F(HttpServerTest, AKeptAliveConnectionMayIdleLongerThanTheHeaderDeadline) {
  Server::Options o;
  o.header_timeout = 500ms;
  o.idle_timeout = 5s;
  Start(o);
  RawClient c(port());
  ASSERT_TRUE(c.Send(Get("/one")));
  EXPECT_NE(c.ReadUntil("GET /one 0", 2s).find("GET /one 0"), std::string::npos);
  std::this_thread::sleep_for(1200ms);  // idle: past the header deadline, within idle_timeout
  ASSERT_TRUE(c.Send(Get("/two")));
  EXPECT_NE(c.ReadUntil("GET /two 0", 2s).find("GET /two 0"), std::string::npos);
  // A head begun and not finished is held to the header deadline.
  ASSERT_TRUE(c.Send("GET /three HTTP/1.1\r\n"));
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(c.ClosedByPeer());
}

TEST_F(HttpServerTest, ABodyOverTheLimitGets413ThatTheSendingClientReads) {
  Server::Options o;
  o.max_body_bytes = 64 << 10;
  Start(o);
  const std::string body(50u << 20, 'x');  // 50 MB, as a client that does not wait for 100
  for (const bool length_known : {true, false}) {
    SCOPED_TRACE(length_known ? "Content-Length" : "chunked");
    RawClient c(port());
    std::string head = "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n";
    head += length_known ? "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n"
                         : std::string("Transfer-Encoding: chunked\r\n\r\n");
    ASSERT_TRUE(c.Send(head));
    // The whole body goes out as the client would send it; the server reads and drops what
    // follows its answer, so no send fails with a reset.
    bool sent = true;
    if (length_known) {
      sent = c.Send(body);
    } else {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", body.size());
      sent = c.Send(size) && c.Send(body) && c.Send("\r\n0\r\n\r\n");
    }
    EXPECT_TRUE(sent) << "the server reset the connection while the body was sent";
    ::shutdown(c.fd(), SHUT_WR);
    const std::string answer = c.ReadAll(10s);
    EXPECT_EQ(answer.rfind("HTTP/1.1 413 ", 0), 0u) << answer.substr(0, 300);
    EXPECT_NE(answer.find("over the limit of 65536"), std::string::npos) << answer.substr(0, 300);
    EXPECT_NE(answer.find("Connection: close"), std::string::npos);
  }
}

TEST_F(HttpServerTest, ALingeringCloseEndsAtItsDeadlineWhenTheClientNeverStops) {
  Server::Options o;
  o.max_body_bytes = 1024;
  o.linger_timeout = 1s;
  Start(o);
  RawClient c(port());
  ASSERT_TRUE(c.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n"));
  EXPECT_EQ(c.ReadUntil("\r\n\r\n", 2s).rfind("HTTP/1.1 413 ", 0), 0u);
  // Keep sending slowly: the server must still close after linger_timeout.
  const auto t0 = SteadyClock::now();
  bool reset = false;
  while (SteadyClock::now() - t0 < 5s) {
    if (!c.Send(std::string(1000, 'y'))) {
      reset = true;
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(reset || c.ClosedByPeer()) << "still open 5 s after a 1 s linger";
  EXPECT_EQ(server_->open_connections(), 0u);
}

TEST_F(HttpServerTest, HeadersOverTheLimitGet431AndGarbageGets400) {
  Server::Options o;
  o.max_header_bytes = 4096;
  Start(o);
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(8000, 'a') +
                       "\r\n\r\n"));
    EXPECT_EQ(c.ReadAll(3s).rfind("HTTP/1.1 431 ", 0), 0u);
  }
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send("NOT HTTP AT ALL\r\n\r\n"));
    const std::string answer = c.ReadAll(3s);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400 ", 0), 0u) << answer;
    EXPECT_NE(answer.find("malformed HTTP request"), std::string::npos) << answer;
  }
}

TEST_F(HttpServerTest, ConnectionsOverTheCapGet503AndTheOthersGoOn) {
  Server::Options o;
  o.max_connections = 4;
  o.render_error = [](int status, const std::string& message) {
    return Response(status, "application/json", "{\"diagnostics\":\"" + message + "\"}");
  };
  Start(o);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawClient>(port()));
    ASSERT_TRUE(held.back()->Send(Get("/held")));
    EXPECT_NE(held.back()->ReadUntil("GET /held 0", 2s).find("GET /held 0"), std::string::npos);
  }
  RawClient extra(port());
  const std::string refused = extra.ReadAll(3s);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503 ", 0), 0u) << refused;
  EXPECT_NE(refused.find("too many connections (4 open)"), std::string::npos) << refused;
  EXPECT_EQ(server_->refused_connections(), 1u);
  // The four kept-alive ones still work; one closes and a new connection is served.
  ASSERT_TRUE(held[0]->Send(Get("/again")));
  EXPECT_NE(held[0]->ReadUntil("GET /again 0", 2s).find("GET /again 0"), std::string::npos);
  held.pop_back();
  for (int i = 0; i < 50 && server_->open_connections() > 3; ++i) std::this_thread::sleep_for(20ms);
  RawClient next(port());
  ASSERT_TRUE(next.Send(Get("/next", true)));
  EXPECT_NE(next.ReadAll(3s).find("GET /next 0"), std::string::npos);
}

// Chunks "0", "1", ... with a wait before each; counts how often it was asked.
class CountingStream : public BodyStream {
 public:
  CountingStream(int chunks, std::atomic<int>* pulls) : chunks_(chunks), pulls_(pulls) {}
  Next Pull(std::string* chunk) override {
    ++*pulls_;
    if (waiting_) {
      waiting_ = false;
      return Next::kWait;
    }
    if (next_ == chunks_) return Next::kEnd;
    waiting_ = true;
    *chunk = "part-" + std::to_string(next_++) + ";";
    return Next::kData;
  }
  std::chrono::milliseconds poll_interval() const override { return 20ms; }

 private:
  const int chunks_;
  std::atomic<int>* pulls_;
  int next_ = 0;
  bool waiting_ = false;
};

TEST_F(HttpServerTest, AStreamedBodyIsChunkedAndEndsWhenTheClientHangsUp) {
  std::atomic<int> pulls{0};
  std::atomic<int> chunks{3};
  Start(Server::Options{}, [&](Request, Responder respond) {
    Response r(200, "text/plain", "");
    r.stream = std::make_shared<CountingStream>(chunks.load(), &pulls);
    respond(std::move(r));
  });
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send(Get("/log")));
    const std::string answer = c.ReadUntil("0\r\n\r\n", 3s);
    EXPECT_NE(answer.find("Transfer-Encoding: chunked"), std::string::npos) << answer;
    EXPECT_NE(answer.find("part-0;"), std::string::npos);
    EXPECT_NE(answer.find("part-2;"), std::string::npos);
    // Kept alive after the last chunk.
    ASSERT_TRUE(c.Send(Get("/log", true)));
    EXPECT_NE(c.ReadAll(3s).find("part-2;"), std::string::npos);
  }
  // A stream that never ends: the client leaves while it waits; the server notices.
  chunks = 1000000;
  {
    RawClient c(port());
    ASSERT_TRUE(c.Send(Get("/log")));
    EXPECT_NE(c.ReadUntil("part-3;", 3s).find("part-3;"), std::string::npos);
  }
  for (int i = 0; i < 100 && server_->open_connections() > 0; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(server_->open_connections(), 0u);
  const int after = pulls.load();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(pulls.load(), after) << "the stream is still pulled after its client left";
}

TEST_F(HttpServerTest, HeadAnswersTheLengthWithoutTheBody) {
  Start(Server::Options{});
  RawClient c(port());
  ASSERT_TRUE(c.Send("HEAD /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string answer = c.ReadAll(3s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("Content-Length: 9\r\n"), std::string::npos) << answer;  // "HEAD /x 0"
  EXPECT_EQ(answer.substr(answer.find("\r\n\r\n") + 4), "");
}

TEST_F(HttpServerTest, DrainAnswersTheRequestInFlightAndRefusesNewConnections) {
  std::promise<Responder> held;
  std::atomic<bool> first{true};
  Start(Server::Options{}, [&](Request, Responder respond) {
    if (first.exchange(false)) {
      held.set_value(std::move(respond));  // answered later, from another thread
    } else {
      respond(Response(200, "text/plain", "late"));
    }
  });
  RawClient busy(port());
  ASSERT_TRUE(busy.Send(Get("/slow")));
  RawClient idle(port());
  ASSERT_TRUE(idle.connected());
  std::future<Responder> responder = held.get_future();
  ASSERT_EQ(responder.wait_for(3s), std::future_status::ready);
  std::thread answer([&] {
    std::this_thread::sleep_for(300ms);
    responder.get()(Response(200, "text/plain", "answered"));
  });
  const size_t cut = server_->Drain(5s);
  answer.join();
  EXPECT_EQ(cut, 0u);
  const std::string got = busy.ReadAll(2s);
  EXPECT_NE(got.find("answered"), std::string::npos) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  EXPECT_TRUE(idle.ClosedByPeer() || idle.ReadAll(1s).empty());
  RawClient late(port());
  EXPECT_FALSE(late.connected());
  server_.reset();
}

// One request over a Unix-domain socket, the answer (to the peer's close).
std::string AskUnix(const std::string& path, const std::string& request) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, n);
  }
  ::close(fd);
  return out;
}

TEST(HttpUnixSocketTest, PeersCredentialsComeFromTheKernelAndTheFileIsTheServers) {
  char tmpl[] = "/tmp/http-unix-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string path = dir + "/api.sock";
  Handler who = [](Request r, Responder respond) {
    const std::string creds =
        r.credentials ? "uid=" + std::to_string(r.credentials->uid) +
                            " pid=" + std::to_string(r.credentials->pid)
                      : "none";
    respond(Response(200, "text/plain", r.peer + " " + creds));
  };
  Server::Options o;
  o.listen = Listener::Unix(path, 0600);
  auto server = Server::Create(o, who);
  ASSERT_TRUE(server.ok()) << server.status().message();
  (*server)->Start();
  EXPECT_EQ((*server)->port(), 0);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  const std::string answer = AskUnix(path, Get("/who", true));
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("unix uid=" + std::to_string(::getuid()) +
                        " pid=" + std::to_string(::getpid())),
            std::string::npos)
      << answer;

  // A second server may not take a socket a live one listens on.
  auto second = Server::Create(o, who);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("unix:" + path + ": another server listens on it"),
            std::string::npos)
      << second.status().message();

  // Gone with the server.
  (*server)->Drain(2s);
  server->reset();
  EXPECT_NE(::access(path.c_str(), F_OK), 0);

  // A socket file left by a server that died is replaced; a file that is no socket is not.
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::close(fd);  // no listener, the file stays
  }
  auto again = Server::Create(o, who);
  ASSERT_TRUE(again.ok()) << again.status().message();
  (*again)->Start();
  EXPECT_NE(AskUnix(path, Get("/who", true)).find("uid="), std::string::npos);
  again->reset();
  const std::string plain = dir + "/plain";
  std::FILE* f = std::fopen(plain.c_str(), "w");
  std::fclose(f);
  o.listen = Listener::Unix(plain);
  auto refused = Server::Create(o, who);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("exists and is not a socket"), std::string::npos);
  ::unlink(plain.c_str());
  ::rmdir(dir.c_str());
}

// A self-signed certificate for 127.0.0.1 and localhost, made by the openssl command as an
// operator would; the files go in `dir`.
bool MakeCertificate(const std::string& dir) {
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
                          " -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
                          dir + "/key.pem -out " + dir + "/cert.pem >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// One request over TLS to 127.0.0.1:port, the server's certificate checked against
// `ca_file` for `host`; the answer, or "error: WHY".
std::string AskTls(int port, const std::string& ca_file, const std::string& host,
                   const std::string& request) {
  namespace net = boost::asio;
  net::io_context ioc;
  net::ssl::context ctx(net::ssl::context::tls_client);
  ctx.load_verify_file(ca_file);
  ctx.set_verify_mode(net::ssl::verify_peer);
  net::ssl::stream<net::ip::tcp::socket> tls(ioc, ctx);
  tls.set_verify_callback(net::ssl::host_name_verification(host));
  boost::system::error_code ec;
  tls.next_layer().connect({net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)}, ec);
  if (!ec) tls.handshake(net::ssl::stream_base::client, ec);
  if (ec) return "error: " + ec.message();
  net::write(tls, net::buffer(request), ec);
  std::string answer;
  char buf[4096];
  for (;;) {
    const size_t n = tls.read_some(net::buffer(buf), ec);
    answer.append(buf, n);
    if (ec) break;
  }
  return answer;
}

TEST(HttpTlsTest, ServesOverTlsWithTheHeadersAnAuthenticatingServerNeeds) {
  const TempDir tmp("http-tls-test");
  const std::string& dir = tmp.path();
  ASSERT_TRUE(MakeCertificate(dir)) << "the openssl command failed";
  Server::Options o;
  o.listen.host = "127.0.0.1";
  o.listen.tls_cert_file = dir + "/cert.pem";
  o.listen.tls_key_file = dir + "/key.pem";
  o.header_timeout = 1500ms;
  EXPECT_EQ(o.listen.ToString(), "https://127.0.0.1:0");
  auto server = Server::Create(o, [](Request r, Responder respond) {
    respond(Response(200, "text/plain",
                     std::string(r.tls ? "tls" : "plain") + " [" + r.authorization + "] [" +
                         r.impersonate_user + "]"));
  });
  ASSERT_TRUE(server.ok()) << server.status().message();
  (*server)->Start();
  const int port = (*server)->port();

  const std::string answer = AskTls(
      port, dir + "/cert.pem", "127.0.0.1",
      "GET /x HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer t0k\r\nImpersonate-User: alice\r\n"
      "Connection: close\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("tls [Bearer t0k] [alice]"), std::string::npos) << answer;

  // The certificate does not name another host: the client refuses it.
  EXPECT_EQ(AskTls(port, dir + "/cert.pem", "tarn.example.org", Get("/x", true)).rfind("error: ", 0),
            0u);

  // Plain HTTP to the TLS port gets no HTTP answer: the handshake fails and the server closes.
  RawClient plain(port);
  ASSERT_TRUE(plain.Send(Get("/x", true)));
  EXPECT_EQ(plain.ReadAll(5s).find("200 OK"), std::string::npos);

  // A client that connects and never starts the handshake is closed at the head's deadline.
  RawClient silent(port);
  ASSERT_TRUE(silent.connected());
  const auto t0 = SteadyClock::now();
  silent.ReadAll(10s);
  EXPECT_LT(SteadyClock::now() - t0, 5s);
  (*server)->Drain(2s);

  // A key that is not the certificate's, or a file that is missing, is an error at Create().
  ASSERT_EQ(std::system(("openssl genrsa -out " + dir + "/other.pem 2048 >/dev/null 2>&1").c_str()),
            0);
  o.listen.tls_key_file = dir + "/other.pem";
  auto mismatched = Server::Create(o, [](Request, Responder) {});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("the PEM private key of the certificate " + dir + "/cert.pem"),
            std::string::npos)
      << mismatched.status().message();
  o.listen.tls_key_file = dir + "/missing.pem";
  auto missing = Server::Create(o, [](Request, Responder) {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("TLS key " + dir + "/missing.pem"), std::string::npos)
      << missing.status().message();
  o.listen.tls_key_file.clear();
  EXPECT_FALSE(Server::Create(o, [](Request, Responder) {}).ok());
}

TEST(PercentDecodeTest, DecodesEscapesAndPlusOnlyInQueries) {
  EXPECT_EQ(PercentDecode("a%20b+c%2Fd", false), "a b+c/d");
  EXPECT_EQ(PercentDecode("a%20b+c", true), "a b c");
  EXPECT_EQ(PercentDecode("bad%zz%4", false), "bad%zz%4");
}

}  // namespace
}  // namespace tarn::http
