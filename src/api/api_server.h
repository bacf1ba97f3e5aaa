// ApiServer: tarn's REST API (docs/api.md, docs/openapi.yaml) on the event-driven
// http::Server: the YARN Services API v1 under /app/v1/services and tarn's extras under
// /tarn/v1/.
//
// Every route but /healthz, /metrics, /app/v1/services/version and the OpenAPI description
// first authenticates its caller (auth/authenticator.h: the Unix socket's peer uid, a bearer
// token, or Hadoop's simple user.name when configured) and acts for it; access.h says who may
// do what. State-changing requests, denied ones and those made acting as another tenant are
// written to the audit log.
//
// Reads (the status of assemblies, nodes, queues, events, /metrics) are answered on the I/O
// threads from the service loop's newest StateSnapshot, never waiting for the loop.
// Commands and the log lookups run on a small pool of threads that may block: they reach the
// Manager only through ServiceLoop::Call, and are answered once the loop has committed them
// and published the snapshot that shows them.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/service_loop.h"
#include "auth/audit_log.h"
#include "auth/auth_store.h"
#include "auth/authenticator.h"
#include "auth/login_codes.h"
#include "common/clock.h"
#include "common/status.h"
#include "http/server.h"

namespace tarn::metrics {
class Collector;
}  // namespace tarn::metrics

namespace tarn::api {

class Watches;

class ApiServer {
 public:
  struct Options {
    ServiceLoop* loop = nullptr;                         // required
    const auth::Authenticator* authenticator = nullptr;  // required
    auth::AuthStore* auth_store = nullptr;               // required: tokens
    auth::AuditLog* audit = nullptr;                     // none: nothing is audited
    const Clock* clock = nullptr;  // required: the wall clock of remaining lifetimes
    std::string domain = "tarn";
    std::string version;       // tarn's version, for /app/v1/services/version
    std::string openapi_yaml;  // served at /tarn/v1/openapi.yaml
    // Limits and timeouts; listen, server_header and render_error are set by Start.
    http::Server::Options http = DefaultHttpOptions();
    int blocking_threads = 8;  // for commands and log lookups, which wait for the loop
    size_t max_watches = 4096;  // blocking reads held at once (watches.h); more answer at once
    std::function<std::string()> server_metrics;    // extra Prometheus text; may be empty
    const metrics::Collector* collector = nullptr;  // instances' metrics; none: not scraped
    auth::LoginCodes* login_codes = nullptr;        // required: `tarn ui`'s one-time codes
    int64_t session_ttl_ms = 12 * 3600 * 1000;      // how long a dashboard session lasts
    std::string ui_dir;                      // the dashboard's files (ui_files.h); "": no dashboard
    std::function<std::string()> ui_origin;  // SessionOptions::ui_origin
  };
  static http::Server::Options DefaultHttpOptions();

  explicit ApiServer(Options options);
  ~ApiServer();  // Shutdown()s
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds every listener (a TCP port 0: any free port), then serves on all of them; the
  // bound TCP ports, in order (0 for a Unix socket). Errors name the listener.
  StatusOr<std::vector<int>> Start(const std::vector<http::Listener>& listeners);
  // Ends every stream (followed logs), answers what is in flight, closes the connections.
  void Shutdown();

  class Routes;  // api_server.cc

 private:
  void Register();  // the routes
  void Handle(http::Request request, http::Responder respond);
  struct Pending;
  void Serve(const std::shared_ptr<Pending>& pending);  // runs the route; holds or answers
  void CountRequest(const std::string& method, int status, double seconds);
  void Audit(const std::string& method, const std::string& path, const std::string& source,
             const auth::Caller* caller, auth::AuthFailure failure, int status,
             const std::string& object, const std::string& denied);
  std::string Metrics() const;

  Options options_;
  std::unique_ptr<Routes> routes_;
  std::vector<std::unique_ptr<http::Server>> http_;
  struct Pool;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Watches> watches_;
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
