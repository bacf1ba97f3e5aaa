// The HTTP/1.1 client wire of bench/'s load generators (http_load, upgrade_load): blocking
// sockets, answers framed by Content-Length (what tarn's servers send), nothing more.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tarn::bench {

// A connected TCP socket (TCP_NODELAY), or -1.
inline int ConnectTcp(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// A connected Unix socket, or -1.
inline int ConnectUnix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads one answer (a head with Content-Length, and its body) from `fd`, `in` holding the
// bytes read past the previous one: its status, or -1 when the connection ended first.
// `body` (when given) gets the body; `close` whether the server said Connection: close.
inline int ReadAnswer(int fd, std::string& in, std::string* body = nullptr, bool* close = nullptr) {
  char buf[16384];
  size_t head_end;
  while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return -1;
    in.append(buf, static_cast<size_t>(n));
  }
  if (in.compare(0, 9, "HTTP/1.1 ") != 0) return -1;
  const int status = std::atoi(in.c_str() + 9);
  size_t length = 0;
  if (close) *close = false;
  for (size_t at = in.find("\r\n"); at < head_end; at = in.find("\r\n", at + 2)) {
    const char* line = in.c_str() + at + 2;
    if (::strncasecmp(line, "content-length:", 15) == 0) {
      length = std::strtoul(line + 15, nullptr, 10);
    } else if (close && ::strncasecmp(line, "connection: close", 17) == 0) {
      *close = true;
    }
  }
  const size_t total = head_end + 4 + length;
  while (in.size() < total) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return -1;
    in.append(buf, static_cast<size_t>(n));
  }
  if (body) body->assign(in, head_end + 4, length);
  in.erase(0, total);
  return status;
}

}  // namespace tarn::bench
