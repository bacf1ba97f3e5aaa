#include "serve/serve_metrics.h"

#include <cstdio>

namespace tarn::serve {
namespace {

const std::vector<double> kSecondsBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                            0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                            1,      2.5,     5,      10};
const std::vector<double> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

double Seconds(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e9; }

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
}

void Histogram::Render(std::string& out, const std::string& name,
                       const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{" + labels + sep + "le=\"" +
           (i < bounds_.size() ? Number(bounds_[i]) : "+Inf") + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + braces + " " + Number(sum_) + "\n";
  out += name + "_count" + braces + " " + std::to_string(cumulative) + "\n";
}

Histogram& ServeMetrics::PerModel(std::map<std::string, Histogram>& map, const std::string& key,
                                  const std::vector<double>& bounds) {
  auto it = map.find(key);
  if (it == map.end()) it = map.try_emplace(key, bounds).first;
  return it->second;
}

void ServeMetrics::CountRequest(const std::string& api, const std::string& model, int http_code,
                                std::chrono::nanoseconds latency) {
  Histogram* h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++requests_[{api, model, http_code}];
    h = &PerModel(latency_, api, kSecondsBounds);
  }
  h->Observe(Seconds(latency));  // std::map nodes do not move: safe outside the lock
}

void ServeMetrics::ObserveQueue(const std::string& model, std::chrono::nanoseconds queued) {
  Histogram* h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    h = &PerModel(queue_, model, kSecondsBounds);
  }
  h->Observe(Seconds(queued));
}

void ServeMetrics::ObserveBatch(const std::string& model, const BatchStats& stats) {
  Histogram* compute;
  Histogram* size;
  {
    std::lock_guard<std::mutex> lock(mu_);
    compute = &PerModel(compute_, model, kSecondsBounds);
    size = &PerModel(batch_size_, model, kBatchBounds);
  }
  compute->Observe(Seconds(stats.compute));
  size->Observe(static_cast<double>(stats.examples));
}

std::string ServeMetrics::Render(const ModelRepository* repository) const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP tarn_serve_requests_total HTTP requests answered, by API, model and status.\n";
  out += "# TYPE tarn_serve_requests_total counter\n";
  std::map<std::pair<std::string, std::string>, uint64_t> failures;
  for (const auto& [key, n] : requests_) {
    const auto& [api, model, code] = key;
    out += "tarn_serve_requests_total{api=\"" + api + "\",model=\"" + model + "\",code=\"" +
           std::to_string(code) + "\"} " + std::to_string(n) + "\n";
    if (code >= 400) failures[{api, model}] += n;
  }
  out += "# HELP tarn_serve_request_failures_total Requests answered with a 4xx or 5xx status.\n";
  out += "# TYPE tarn_serve_request_failures_total counter\n";
  for (const auto& [key, n] : failures) {
    out += "tarn_serve_request_failures_total{api=\"" + key.first + "\",model=\"" + key.second +
           "\"} " + std::to_string(n) + "\n";
  }
  const struct {
    const char* name;
    const char* help;
    const char* label;
    const std::map<std::string, Histogram>* map;
  } histograms[] = {
      {"tarn_serve_request_latency_seconds", "Time from a request's arrival to its answer.",
       "api", &latency_},
      {"tarn_serve_queue_seconds", "Time a predict task waited for its batch.", "model", &queue_},
      {"tarn_serve_compute_seconds", "Time the model took for one batch.", "model", &compute_},
      {"tarn_serve_batch_size", "Examples per batch run.", "model", &batch_size_},
  };
  for (const auto& h : histograms) {
    out += std::string("# HELP ") + h.name + " " + h.help + "\n";
    out += std::string("# TYPE ") + h.name + " histogram\n";
    for (const auto& [key, hist] : *h.map) {
      hist.Render(out, h.name, std::string(h.label) + "=\"" + key + "\"");
    }
  }
  if (repository != nullptr) {
    out +=
        "# HELP tarn_serve_model_version_state Model versions known, by state (1 per "
        "version).\n";
    out += "# TYPE tarn_serve_model_version_state gauge\n";
    for (const auto& row : repository->Snapshot()) {
      out += "tarn_serve_model_version_state{model=\"" + row.model + "\",version=\"" +
             std::to_string(row.version) + "\",state=\"" +
             std::string(VersionStateName(row.state)) + "\"} 1\n";
    }
    std::string labels, decisions;
    for (const std::string& model : repository->ModelNames()) {
      const std::optional<ModelRepository::Rollout> r = repository->RolloutOf(model);
      if (!r) continue;
      for (const auto& [label, version] : {std::pair{"stable", r->stable}, {"canary", r->canary}}) {
        if (version != 0) {
          labels += "tarn_serve_version_label{model=\"" + model + "\",label=\"" + label + "\"} " +
                    std::to_string(version) + "\n";
        }
      }
      for (const auto& [decision, n] : {std::pair{"promoted", r->promoted},
                                        {"rolled_back", r->rolled_back},
                                        {"refused", r->refused}}) {
        decisions += "tarn_serve_canary_decisions_total{model=\"" + model + "\",decision=\"" +
                     decision + "\"} " + std::to_string(n) + "\n";
      }
    }
    if (!labels.empty() || !decisions.empty()) {
      out +=
          "# HELP tarn_serve_version_label The version each rollout label names.\n"
          "# TYPE tarn_serve_version_label gauge\n" +
          labels +
          "# HELP tarn_serve_canary_decisions_total Canary versions promoted, rolled back "
          "or refused unserved.\n"
          "# TYPE tarn_serve_canary_decisions_total counter\n" +
          decisions;
    }
  }
  return out;
}

}  // namespace tarn::serve
