// ApiServer: tarn's REST API (docs/api.md, docs/openapi.yaml) over cpp-httplib: the YARN
// Services API v1 under /app/v1/services and tarn's extras under /tarn/v1/. Handlers run on
// the HTTP library's thread pool and reach the Manager only through the ServiceLoop.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "api/service_loop.h"
#include "common/status.h"

namespace httplib {
class Server;
}

namespace tarn::api {

class ApiServer {
 public:
  struct Options {
    ServiceLoop* loop = nullptr;  // required
    std::string domain = "tarn";
    std::string version;       // tarn's version, for /app/v1/services/version
    std::string openapi_yaml;  // served at /tarn/v1/openapi.yaml
    size_t max_body_bytes = 4 << 20;
    int threads = 32;  // HTTP worker threads (a keep-alive connection holds one)
    std::function<std::string()> server_metrics;  // extra Prometheus text; may be empty
  };

  explicit ApiServer(Options options);
  ~ApiServer();

  // Binds HOST:PORT (port 0: any free port) and returns the bound port.
  StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Shutdown(); blocks.
  void Serve();
  // Thread-safe; makes Serve() return.
  void Shutdown();

 private:
  void Routes();
  void CountRequest(const std::string& method, int status, double seconds);
  std::string Metrics() const;

  Options options_;
  std::unique_ptr<httplib::Server> http_;
  std::vector<std::pair<std::regex, std::string>> routes_;  // (path pattern, method)
  mutable std::mutex metrics_mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (method, status) -> count
  std::map<double, uint64_t> latency_buckets_;                // le -> count (cumulative later)
  double latency_sum_ = 0;
  uint64_t latency_count_ = 0;
};

// Splits "HOST:PORT" ("[::1]:8088" for IPv6); InvalidArgument naming the flag otherwise.
StatusOr<std::pair<std::string, int>> ParseHostPort(const std::string& text,
                                                    const std::string& what);

}  // namespace tarn::api
