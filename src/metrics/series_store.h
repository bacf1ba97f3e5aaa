// SeriesStore: the bounded recent history of every instance's metrics, as the collector
// scrapes them: per instance, per series (a metric name and its labels), a ring of the last
// `points_per_series` points (an hour at 5 s by default). Counters, gauges and untyped
// samples are kept as scraped (a counter's rate is for the reader to take); a histogram's
// buckets become the 0.5 and 0.99 quantiles of what it observed since the previous scrape
// (series NAME:p50 and NAME:p99, interpolated within buckets as Prometheus'
// histogram_quantile does), beside its _count and _sum. The number of series is bounded per
// instance and in all, so memory is at most max_series * points_per_series * 16 bytes;
// series beyond the bounds are counted, not kept. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "metrics/prometheus_text.h"

namespace tarn::metrics {

struct Point {
  int64_t t_ms = 0;  // wall clock, ms since the epoch
  double v = 0;
};

class SeriesStore {
 public:
  struct Options {
    size_t points_per_series = 720;
    size_t series_per_instance = 64;
    size_t max_series = 5000;
  };
  explicit SeriesStore(Options options);

  // One scrape of `instance` (its key, "alice/fmnist/worker-0") at `t_ms`.
  void Record(const std::string& instance, int64_t t_ms, const Exposition& e);
  // Forgets every instance for which `keep` is false.
  void Retain(const std::function<bool(const std::string& instance)>& keep);

  struct Series {
    std::string name;
    std::string labels;  // LabelText's form; "" when none
    std::vector<std::pair<std::string, std::string>> label_pairs;  // sorted by name
    std::string type;    // counter, gauge, untyped, summary, quantile (a histogram's), ...
    std::vector<Point> points;
  };
  struct InstanceSeries {
    bool known = false;     // the instance has been recorded
    std::vector<Series> series;
    size_t not_kept = 0;    // series its last scrape had beyond the bounds
  };
  // The series of `instance` whose names are in `names` (empty: every series, and no points
  // unless `with_points`), each with its points after `since_ms`: at most `max_points`, the
  // newest, evenly thinned when there are more.
  InstanceSeries Query(const std::string& instance, const std::set<std::string>& names,
                       int64_t since_ms, size_t max_points, bool with_points = true) const;

  size_t series_count() const;
  const Options& options() const { return options_; }

 private:
  struct Ring {
    std::string name, labels, type;
    std::vector<std::pair<std::string, std::string>> label_pairs;
    std::vector<Point> points;  // grows to points_per_series, then wraps at `head`
    size_t head = 0;            // the oldest point once full
    void Add(Point p, size_t capacity);
    std::vector<Point> After(int64_t since_ms) const;  // oldest first
  };
  struct Instance {
    std::map<std::string, Ring> series;            // by name + labels
    std::map<std::string, double> last_buckets;    // histogram buckets at the last scrape
    size_t not_kept = 0;
  };
  // The ring for a series, made if the bounds allow; nullptr when they do not.
  Ring* RingFor(Instance& in, const std::string& name,
                const std::vector<std::pair<std::string, std::string>>& labels,
                const std::string& type);

  const Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Instance> instances_;  // guarded by mu_
  size_t series_ = 0;                          // guarded by mu_
};

// The q-quantile (0 < q < 1) of the observations between two scrapes of one histogram:
// `bounds` the buckets' upper bounds in increasing order (the last +Inf), `counts` the
// observations in each bucket during the interval, cumulative. NaN when there were none.
double HistogramQuantile(double q, const std::vector<double>& bounds,
                         const std::vector<double>& counts);

}  // namespace tarn::metrics
