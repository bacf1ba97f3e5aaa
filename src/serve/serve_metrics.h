// ServeMetrics: tarn-serve's Prometheus metrics: requests and failures per API and model,
// request latency, time queued for a batch and time computing it, batch sizes, and the
// versions loaded per model. Thread-safe: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "serve/batcher.h"
#include "serve/model_repository.h"

namespace tarn::serve {

// A Prometheus histogram with fixed upper bounds. Thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  // Appends the _bucket, _sum and _count lines; `labels` is "" or `a="b",c="d"`.
  void Render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // one per bound, plus +Inf; guarded by mu_
  double sum_ = 0;                // guarded by mu_
};

class ServeMetrics {
 public:
  // `api`: "predict", "infer", "status", "metadata", "health", "metrics", "other".
  void CountRequest(const std::string& api, const std::string& model, int http_code,
                    std::chrono::nanoseconds latency);
  void ObserveQueue(const std::string& model, std::chrono::nanoseconds queued);
  void ObserveBatch(const std::string& model, const BatchStats& stats);

  std::string Render(const ModelRepository* repository) const;

 private:
  Histogram& PerModel(std::map<std::string, Histogram>& map, const std::string& model,
                      const std::vector<double>& bounds);

  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;  // guarded by mu_
  std::map<std::string, Histogram> latency_;   // by api; guarded by mu_ (the map)
  std::map<std::string, Histogram> queue_;     // by model
  std::map<std::string, Histogram> compute_;   // by model
  std::map<std::string, Histogram> batch_size_;  // by model
};

}  // namespace tarn::serve
