// Collector: the server's one reader of its instances' metrics (docs/server.md, "Metrics of
// instances"). Every `interval` it scrapes each running instance's Prometheus endpoint (the
// port named `metrics` in tarn.ports, else the one named `http`; path /metrics; see
// MetricsPort) and records what it read in a SeriesStore, which the API serves to the
// dashboard and which later features (preemption, autoscaling) read too. Scrapes run a few
// at a time, each bounded in time and bytes, so a slow or silent instance costs its timeout,
// never the others' points. An instance's series outlive its run (a finished worker's
// training curve stays) until the instance leaves its assembly.
//
// Start() runs the rounds on a thread of its own until Stop() (or destruction); with an
// interval <= 0 there is no thread and tests call RunOnce(). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "metrics/series_store.h"

namespace tarn::metrics {

// The rule every reader of instances' metrics uses: the port named "metrics", else the one
// named "http"; 0 when it has neither. The path is always /metrics.
int MetricsPort(const std::map<std::string, int>& ports);
inline constexpr const char* kMetricsPath = "/metrics";

// One instance the collector knows.
struct Target {
  std::string key;  // "alice/fmnist/worker-0"
  std::string ip;   // where to scrape; "" or port 0: not now (its series are kept)
  int port = 0;
};

// What the last scrape of an instance gave.
struct ScrapeState {
  std::string endpoint;   // http://IP:PORT/metrics
  int64_t last_ms = 0;    // wall clock of the last attempt
  std::string error;      // "" when it was read and recorded
};

class Collector {
 public:
  // GET http://ip:port/path within `timeout`, at most `max_bytes` of body; the body, else why
  // not.
  using Fetch = std::function<StatusOr<std::string>(const std::string& ip, int port,
                                                    std::chrono::milliseconds timeout,
                                                    size_t max_bytes)>;
  struct Options {
    const Clock* clock = nullptr;  // required
    std::chrono::milliseconds interval{5000};
    std::chrono::milliseconds timeout{2000};
    size_t max_body_bytes = 4 << 20;
    size_t max_samples = 20000;  // per scrape
    int parallel = 4;            // scrapes at once
    // Every instance of every assembly, read at the start of each round.
    std::function<std::vector<Target>()> targets;
    Fetch fetch;  // empty: HttpGet
    SeriesStore::Options store;
  };

  explicit Collector(Options options);
  ~Collector();

  void Start();
  void Stop();
  // One round: scrapes every target that has an endpoint, forgets instances no longer known.
  void RunOnce();

  const SeriesStore& store() const { return store_; }
  std::optional<ScrapeState> State(const std::string& key) const;
  std::chrono::milliseconds interval() const { return options_.interval; }
  uint64_t scrapes() const;
  uint64_t failures() const;

 private:
  void ScrapeOne(const Target& t);

  const Options options_;
  SeriesStore store_;
  mutable std::mutex mu_;
  std::map<std::string, ScrapeState> states_;  // guarded by mu_
  uint64_t scrapes_ = 0, failures_ = 0;        // guarded by mu_
  bool stop_ = false;                          // guarded by mu_
  std::condition_variable wake_;
  std::thread thread_;
};

// The real Fetch: HTTP/1.1 GET of kMetricsPath over TCP (Boost.Beast), 200 only.
StatusOr<std::string> HttpGet(const std::string& ip, int port, std::chrono::milliseconds timeout,
                              size_t max_bytes);

}  // namespace tarn::metrics
