// RawClient: a TCP client for tests of HTTP servers that does what a slow, hostile or
// large-bodied client does, byte for byte (an HTTP library would finish the head, wait for
// 100-continue, or stop sending at the first answer).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <string_view>

namespace tarn::http::testing {

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  // Sends all of `data`; false once the peer refuses more (reset, closed).
  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads until the peer closes or `timeout` passes; what arrived.
  std::string ReadAll(std::chrono::milliseconds timeout) { return Read(nullptr, timeout); }

  // Reads until `marker` has arrived (or the peer closed, or `timeout`).
  std::string ReadUntil(const std::string& marker, std::chrono::milliseconds timeout) {
    return Read(&marker, timeout);
  }

  // True when the server has closed its side (EOF or reset), without waiting.
  bool ClosedByPeer() {
    if (closed_) return true;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    closed_ = n <= 0;
    return closed_;
  }

 private:
  // Reads until `marker` (none: never) has arrived, the peer closed, or `timeout` passed.
  std::string Read(const std::string* marker, std::chrono::milliseconds timeout) {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + timeout;
    char buf[16384];
    while (marker == nullptr || out.find(*marker) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

}  // namespace tarn::http::testing
