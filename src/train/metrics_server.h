// MetricsServer: tarn-train's Prometheus endpoint. A small HTTP/1.1 responder on its own
// thread: GET /metrics answers the text a callback renders at that moment; anything else
// gets 404. One request per connection (Connection: close), a 2 s read timeout, requests
// over 8 KiB refused: enough for a scraper, and nothing a workload has to depend on a web
// library for (the GPU build takes libtorch and zlib only).
//
// REQUIRES: Start() once, then Stop() (the destructor stops too). `render` is called on the
// server's thread and must be thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "common/status.h"

namespace tarn::train {

class MetricsServer {
 public:
  MetricsServer(std::string host, int port, std::function<std::string()> render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  Status Start();
  void Stop();
  int port() const { return port_; }

 private:
  void Serve();

  const std::string host_;
  int port_;
  const std::function<std::string()> render_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace tarn::train
