#include "metrics/series_store.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace tarn::metrics {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Strip(const std::string& s, const std::string& suffix) {
  return s.substr(0, s.size() - suffix.size());
}

// A sample's type: its own name's, else its family's (NAME_sum, NAME_count, NAME_bucket).
std::string TypeOf(const Exposition& e, const std::string& name, std::string* family) {
  *family = name;
  if (auto it = e.types.find(name); it != e.types.end()) return it->second;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (!EndsWith(name, suffix)) continue;
    if (auto it = e.types.find(Strip(name, suffix)); it != e.types.end()) {
      *family = it->first;
      return it->second;
    }
  }
  return "untyped";
}

// The bucket's upper bound from its "le" label; false when it has none or it is no number.
bool Bound(const Sample& s, double* le, std::vector<std::pair<std::string, std::string>>* rest) {
  bool found = false;
  for (const auto& [k, v] : s.labels) {
    if (k != "le") {
      rest->emplace_back(k, v);
      continue;
    }
    if (v == "+Inf" || v == "Inf" || v == "inf") {
      *le = std::numeric_limits<double>::infinity();
      found = true;
    } else {
      char* end = nullptr;
      *le = std::strtod(v.c_str(), &end);
      found = end != v.c_str() && *end == '\0';
    }
  }
  return found;
}

}  // namespace

double HistogramQuantile(double q, const std::vector<double>& bounds,
                         const std::vector<double>& counts) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (bounds.empty() || bounds.size() != counts.size() || !std::isinf(bounds.back())) return nan;
  const double total = counts.back();
  if (!(total > 0)) return nan;
  double rank = q * total;
  size_t b = 0;
  while (b < counts.size() && counts[b] < rank) ++b;
  if (b >= counts.size() - 1) {  // in the +Inf bucket: the highest finite bound
    return counts.size() >= 2 ? bounds[counts.size() - 2] : nan;
  }
  if (b == 0 && bounds[0] <= 0) return bounds[0];
  const double start = b == 0 ? 0 : bounds[b - 1];
  const double below = b == 0 ? 0 : counts[b - 1];
  const double in_bucket = counts[b] - below;
  if (!(in_bucket > 0)) return bounds[b];
  return start + (bounds[b] - start) * ((rank - below) / in_bucket);
}

void SeriesStore::Ring::Add(Point p, size_t capacity) {
  if (points.size() < capacity) {
    points.push_back(p);
    return;
  }
  points[head] = p;
  head = (head + 1) % points.size();
}

std::vector<Point> SeriesStore::Ring::After(int64_t since_ms) const {
  std::vector<Point> out;
  out.reserve(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[(head + i) % points.size()];
    if (p.t_ms > since_ms) out.push_back(p);
  }
  return out;
}

SeriesStore::SeriesStore(Options options) : options_(options) {}

SeriesStore::Ring* SeriesStore::RingFor(
    Instance& in, const std::string& name,
    const std::vector<std::pair<std::string, std::string>>& label_pairs, const std::string& type) {
  const std::string labels = LabelText(label_pairs);
  const std::string key = name + labels;
  auto it = in.series.find(key);
  if (it != in.series.end()) return &it->second;
  if (in.series.size() >= options_.series_per_instance || series_ >= options_.max_series) {
    ++in.not_kept;
    return nullptr;
  }
  ++series_;
  Ring& r = in.series[key];
  r.name = name;
  r.labels = labels;
  r.label_pairs = label_pairs;
  r.type = type;
  return &r;
}

void SeriesStore::Record(const std::string& instance, int64_t t_ms, const Exposition& e) {
  std::lock_guard<std::mutex> lock(mu_);
  Instance& in = instances_[instance];
  in.not_kept = 0;
  const size_t capacity = std::max<size_t>(options_.points_per_series, 1);
  // A histogram's buckets, by family + the labels besides le: (bound, cumulative count).
  using Labels = std::vector<std::pair<std::string, std::string>>;
  std::map<std::pair<std::string, Labels>, std::vector<std::pair<double, double>>> buckets;
  for (const Sample& s : e.samples) {
    std::string family;
    const std::string type = TypeOf(e, s.name, &family);
    if (type == "histogram" && EndsWith(s.name, "_bucket") && family + "_bucket" == s.name) {
      double le = 0;
      std::vector<std::pair<std::string, std::string>> rest;
      if (Bound(s, &le, &rest)) buckets[{family, rest}].emplace_back(le, s.value);
      continue;
    }
    const std::string kept_type = type == "histogram" ? "counter" : type;  // _count, _sum
    if (Ring* r = RingFor(in, s.name, s.labels, kept_type)) {
      r->Add({t_ms, s.value}, capacity);
    }
  }
  std::map<std::string, double> now_buckets;
  for (auto& [id, list] : buckets) {
    std::sort(list.begin(), list.end());
    std::vector<double> bounds, delta;
    bool have_before = true, reset = false;
    for (const auto& [le, count] : list) {
      const std::string key = id.first + LabelText(id.second) + "\x01" + std::to_string(le);
      now_buckets[key] = count;
      auto before = in.last_buckets.find(key);
      if (before == in.last_buckets.end()) {
        have_before = false;
      } else if (count < before->second) {
        reset = true;  // the instance restarted: its counts began again
      }
      bounds.push_back(le);
      delta.push_back(before == in.last_buckets.end() ? count : count - before->second);
    }
    if (!have_before) continue;  // the first scrape: no interval to speak of
    if (reset) {
      for (size_t i = 0; i < list.size(); ++i) delta[i] = list[i].second;
    }
    for (const auto& [q, suffix] : {std::pair{0.5, ":p50"}, std::pair{0.99, ":p99"}}) {
      const double v = HistogramQuantile(q, bounds, delta);
      if (std::isnan(v)) continue;  // nothing observed in the interval
      if (Ring* r = RingFor(in, id.first + suffix, id.second, "quantile")) r->Add({t_ms, v}, capacity);
    }
  }
  in.last_buckets = std::move(now_buckets);
}

void SeriesStore::Retain(const std::function<bool(const std::string&)>& keep) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = instances_.begin(); it != instances_.end();) {
    if (keep(it->first)) {
      ++it;
      continue;
    }
    series_ -= it->second.series.size();
    it = instances_.erase(it);
  }
}

SeriesStore::InstanceSeries SeriesStore::Query(const std::string& instance,
                                               const std::set<std::string>& names,
                                               int64_t since_ms, size_t max_points,
                                               bool with_points) const {
  std::lock_guard<std::mutex> lock(mu_);
  InstanceSeries out;
  auto it = instances_.find(instance);
  if (it == instances_.end()) return out;
  out.known = true;
  out.not_kept = it->second.not_kept;
  const bool points = with_points || !names.empty();
  for (const auto& [key, ring] : it->second.series) {
    if (!names.empty() && names.count(ring.name) == 0) continue;
    Series s{ring.name, ring.labels, ring.label_pairs, ring.type, {}};
    if (points && max_points > 0) {
      std::vector<Point> all = ring.After(since_ms);
      if (all.size() > max_points) {
        // Every k-th, counted back from the newest (which a live chart must show).
        const size_t k = (all.size() + max_points - 1) / max_points;
        std::vector<Point> thin;
        for (size_t i = all.size(); i-- > 0 && thin.size() < max_points;) {
          if ((all.size() - 1 - i) % k == 0) thin.push_back(all[i]);
        }
        std::reverse(thin.begin(), thin.end());
        all = std::move(thin);
      }
      s.points = std::move(all);
    }
    out.series.push_back(std::move(s));
  }
  return out;
}

size_t SeriesStore::series_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return series_;
}

}  // namespace tarn::metrics
