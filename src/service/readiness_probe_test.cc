#include "service/readiness_probe.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

namespace tarn::service {
namespace {

// A listener on 127.0.0.1:<ephemeral> that answers each connection with `reply` (or, when
// empty, reads the request and says nothing).
class Listener {
 public:
  explicit Listener(std::string reply, bool accept_connections = true) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(fd_, 8);
    if (accept_connections) {
      thread_ = std::thread([this] {
        while (true) {
          int c = ::accept(fd_, nullptr, nullptr);
          if (c < 0 || stop_) {
            if (c >= 0) ::close(c);
            return;
          }
          char buf[2048];
          ssize_t n = ::recv(c, buf, sizeof buf, 0);
          if (n > 0) {
            std::lock_guard<std::mutex> lock(mu_);
            last_request_.assign(buf, n);
          }
          if (!reply_.empty()) {
            ssize_t ignored = ::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
            (void)ignored;
            ::close(c);
          } else {
            held_.push_back(c);  // never answers
          }
        }
      });
    }
  }
  ~Listener() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
    for (int c : held_) ::close(c);
  }
  int port() const { return port_; }
  std::string last_request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }

 private:
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::string last_request_;  // guarded by mu_
  std::vector<int> held_;     // touched by the thread only until it is joined
};

spec::ReadinessCheck Check(spec::ReadinessType type, std::map<std::string, std::string> props) {
  return {type, std::move(props)};
}

TEST(Probe, PortOpenOrRefused) {
  Listener open("HTTP/1.1 200 OK\r\n\r\n");
  auto ok = Probe(Check(spec::ReadinessType::kPort, {{"port", std::to_string(open.port())}}),
                  "127.0.0.1");
  EXPECT_TRUE(ok.ready) << ok.detail;
  int closed_port = 0;
  {
    Listener gone("x");
    closed_port = gone.port();
  }
  auto refused = Probe(Check(spec::ReadinessType::kPort, {{"port", std::to_string(closed_port)}}),
                       "127.0.0.1");
  EXPECT_FALSE(refused.ready);
  EXPECT_EQ(refused.detail, "127.0.0.1:" + std::to_string(closed_port) + ": Connection refused");
}

TEST(Probe, HttpStatusDecidesAndTheHostHeaderCarriesTheName) {
  Listener up("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  std::string url =
      "http://serving-0.fmnist.alice.tarn:" + std::to_string(up.port()) + "/v1/models/fmnist";
  auto r = Probe(Check(spec::ReadinessType::kHttp, {{"url", url}}), "127.0.0.1");
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.detail, "GET /v1/models/fmnist answered 200");
  EXPECT_NE(up.last_request().find("GET /v1/models/fmnist HTTP/1.1\r\nHost: "
                                   "serving-0.fmnist.alice.tarn:" +
                                   std::to_string(up.port())),
            std::string::npos)
      << up.last_request();

  Listener loading("HTTP/1.1 404 Not Found\r\n\r\n");
  url = "http://s:" + std::to_string(loading.port()) + "/v1/models/fmnist";
  r = Probe(Check(spec::ReadinessType::kHttp, {{"url", url}}), "127.0.0.1");
  EXPECT_FALSE(r.ready);
  EXPECT_EQ(r.detail, "GET /v1/models/fmnist answered 404");
  // YARN's min.success / max.success widen or narrow the range.
  r = Probe(Check(spec::ReadinessType::kHttp,
                  {{"url", url}, {"min.success", "200"}, {"max.success", "404"}}),
            "127.0.0.1");
  EXPECT_TRUE(r.ready);
}

TEST(Probe, HttpWithoutAnAnswerTimesOut) {
  Listener silent("");
  std::string url = "http://s:" + std::to_string(silent.port()) + "/";
  auto r =
      Probe(Check(spec::ReadinessType::kHttp, {{"url", url}, {"timeout", "200"}}), "127.0.0.1");
  EXPECT_FALSE(r.ready);
  EXPECT_EQ(r.detail, "GET /: no answer within 200 ms");
}

TEST(Probe, DefaultIsReadyAndBadInputIsNot) {
  EXPECT_TRUE(Probe(Check(spec::ReadinessType::kDefault, {}), "127.0.0.1").ready);
  auto r = Probe(Check(spec::ReadinessType::kPort, {{"port", "80"}}), "not-an-ip");
  EXPECT_FALSE(r.ready);
  EXPECT_EQ(r.detail, "\"not-an-ip\" is not an IPv4 address");
}

}  // namespace
}  // namespace tarn::service
