#include "service/readiness_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace tarn::service {
namespace {

int Property(const spec::ReadinessCheck& c, const char* key, int dflt) {
  auto it = c.properties.find(key);
  return it == c.properties.end() ? dflt : std::atoi(it->second.c_str());
}

// Connects within `timeout_ms`; returns the fd or -1 with `why` set.
int Connect(const std::string& ip, int port, int timeout_ms, std::string* why) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
    *why = "\"" + ip + "\" is not an IPv4 address";
    return -1;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, timeout_ms);
    if (rc == 0) {
      ::close(fd);
      *why = "no connection to " + ip + ":" + std::to_string(port) + " within " +
             std::to_string(timeout_ms) + " ms";
      return -1;
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    rc = err == 0 ? 0 : -1;
    errno = err;
  }
  if (rc != 0) {
    *why = ip + ":" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

struct Url {
  std::string host;
  int port = 80;
  std::string path = "/";
};

bool ParseUrl(const std::string& url, Url* out) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return false;
  std::string rest = url.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) out->path = rest.substr(slash);
  size_t colon = authority.rfind(':');
  out->host = authority.substr(0, colon);
  if (colon != std::string::npos) out->port = std::atoi(authority.substr(colon + 1).c_str());
  return !out->host.empty() && out->port > 0 && out->port < 65536;
}

}  // namespace

ProbeResult Probe(const spec::ReadinessCheck& check, const std::string& ip) {
  const int timeout_ms = Property(check, "timeout", 1000);
  std::string why;
  switch (check.type) {
    case spec::ReadinessType::kDefault:
      return {true, "running"};
    case spec::ReadinessType::kPort: {
      int port = Property(check, "port", 0);
      int fd = Connect(ip, port, timeout_ms, &why);
      if (fd < 0) return {false, why};
      ::close(fd);
      return {true, "port " + std::to_string(port) + " accepts connections"};
    }
    case spec::ReadinessType::kHttp:
      break;
  }
  Url url;
  auto it = check.properties.find("url");
  if (it == check.properties.end() || !ParseUrl(it->second, &url)) {
    return {false, "the readiness url is not http://host[:port]/path"};
  }
  int fd = Connect(ip, url.port, timeout_ms, &why);
  if (fd < 0) return {false, why};
  std::string request = "GET " + url.path + " HTTP/1.1\r\nHost: " + url.host + ":" +
                        std::to_string(url.port) +
                        "\r\nUser-Agent: tarn-readiness\r\nConnection: close\r\n\r\n";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string answer;
  bool sent = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
              static_cast<ssize_t>(request.size());
  while (sent && answer.find("\r\n") == std::string::npos) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, left) <= 0) break;
    char buf[512];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, n);
  }
  ::close(fd);
  std::string what = "GET " + url.path;
  if (answer.find("\r\n") == std::string::npos) {
    return {false, what + ": no answer within " + std::to_string(timeout_ms) + " ms"};
  }
  // "HTTP/1.1 200 OK"
  size_t space = answer.find(' ');
  int status = space == std::string::npos ? 0 : std::atoi(answer.c_str() + space + 1);
  if (status < 100) return {false, what + ": not an HTTP answer"};
  int lo = Property(check, "min.success", 200), hi = Property(check, "max.success", 299);
  return {status >= lo && status <= hi, what + " answered " + std::to_string(status)};
}

}  // namespace tarn::service
