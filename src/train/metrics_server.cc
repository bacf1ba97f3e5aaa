#include "train/metrics_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include "train/ps_wire.h"

namespace tarn::train {
namespace {

void SendAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string Response(int code, const std::string& reason, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(code) + " " + reason +
         "\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

MetricsServer::MetricsServer(std::string host, int port, std::function<std::string()> render)
    : host_(std::move(host)), port_(port), render_(std::move(render)) {}

MetricsServer::~MetricsServer() { Stop(); }

Status MetricsServer::Start() {
  ASSIGN_OR_RETURN(listen_fd_, Listen(host_, port_, &port_));
  thread_ = std::thread([this] { Serve(); });
  return OkStatus();
}

void MetricsServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void MetricsServer::Serve() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string request;
    char buffer[2048];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() <= 8192) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      request.append(buffer, static_cast<size_t>(n));
    }
    if (request.size() > 8192) {
      SendAll(fd, Response(431, "Request Header Fields Too Large", "request too large\n"));
    } else if (request.rfind("GET /metrics ", 0) == 0 || request.rfind("GET /metrics?", 0) == 0) {
      SendAll(fd, Response(200, "OK", render_()));
    } else if (request.find("\r\n\r\n") != std::string::npos) {
      SendAll(fd, Response(404, "Not Found", "only GET /metrics is served here\n"));
    }
    ::close(fd);
  }
}

}  // namespace tarn::train
