// ApiServer's own metrics: its requests by method and status, their latency, its
// connections, and the counts of assemblies and instances by state, for GET /metrics.
#include <cstdio>
#include <map>
#include <string>

#include "api/api_server.h"
#include "api/state_snapshot.h"

namespace tarn::api {
namespace {

constexpr double kLatencyBuckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                      0.05,   0.1,   0.25,   0.5,   1,    2.5};

}  // namespace

void ApiServer::CountRequest(const std::string& method, int status, double seconds) {
  std::lock_guard lock(metrics_mu_);
  ++requests_[{method, status}];
  if (seconds < 0) return;  // not timed
  for (double le : kLatencyBuckets) {
    if (seconds <= le) {
      ++latency_buckets_[le];
      break;
    }
  }
  latency_sum_ += seconds;
  ++latency_count_;
}

std::string ApiServer::Metrics() const {
  std::string out;
  {
    std::lock_guard lock(metrics_mu_);
    out += "# HELP tarn_http_requests_total HTTP requests to the API, by method and status.\n";
    out += "# TYPE tarn_http_requests_total counter\n";
    for (const auto& [key, n] : requests_) {
      out += "tarn_http_requests_total{method=\"" + key.first + "\",code=\"" +
             std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    }
    out +=
        "# HELP tarn_http_request_duration_seconds Time to answer an API request (a "
        "blocking read that was held is counted in tarn_http_requests_total alone).\n";
    out += "# TYPE tarn_http_request_duration_seconds histogram\n";
    uint64_t cumulative = 0;
    for (double le : kLatencyBuckets) {
      auto it = latency_buckets_.find(le);
      if (it != latency_buckets_.end()) cumulative += it->second;
      char buf[128];
      std::snprintf(buf, sizeof buf, "tarn_http_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                    le, static_cast<unsigned long long>(cumulative));
      out += buf;
    }
    out += "tarn_http_request_duration_seconds_bucket{le=\"+Inf\"} " +
           std::to_string(latency_count_) + "\n";
    char buf[96];
    std::snprintf(buf, sizeof buf, "tarn_http_request_duration_seconds_sum %.6f\n", latency_sum_);
    out += buf;
    out += "tarn_http_request_duration_seconds_count " + std::to_string(latency_count_) + "\n";
  }
  if (!http_.empty()) {
    size_t open = 0;
    uint64_t refused = 0;
    for (const auto& server : http_) {
      open += server->open_connections();
      refused += server->refused_connections();
    }
    out += "# HELP tarn_http_open_connections Connections to the API open now.\n";
    out += "# TYPE tarn_http_open_connections gauge\ntarn_http_open_connections " +
           std::to_string(open) + "\n";
    out += "# HELP tarn_http_refused_connections_total Connections refused at the cap.\n";
    out +=
        "# TYPE tarn_http_refused_connections_total counter\n"
        "tarn_http_refused_connections_total " +
        std::to_string(refused) + "\n";
  }
  std::map<std::string, int64_t> assemblies, instances;
  int64_t restarts = 0;
  const std::shared_ptr<const StateSnapshot> snapshot = options_.loop->Snapshot();
  for (const auto& view : snapshot->assemblies) {
    const service::AssemblyStatus& a = view->status();
    ++assemblies[a.state];
    for (const auto& c : a.components) {
      for (const auto& i : c.instances) {
        ++instances[i.state];
        restarts += i.restarts;
      }
    }
  }
  out +=
      "# HELP tarn_assemblies Assemblies of every user, by state.\n# TYPE tarn_assemblies gauge\n";
  for (const auto& [state, n] : assemblies) {
    out += "tarn_assemblies{state=\"" + state + "\"} " + std::to_string(n) + "\n";
  }
  out +=
      "# HELP tarn_instances Instances of every assembly, by state.\n# TYPE tarn_instances gauge\n";
  for (const auto& [state, n] : instances) {
    out += "tarn_instances{state=\"" + state + "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP tarn_instance_restarts Restarts of the instances that exist now.\n";
  out += "# TYPE tarn_instance_restarts gauge\ntarn_instance_restarts " + std::to_string(restarts) +
         "\n";
  out += "# HELP tarn_loop_events_total Backend events the service loop handled.\n";
  out += "# TYPE tarn_loop_events_total counter\ntarn_loop_events_total " +
         std::to_string(options_.loop->events_handled()) + "\n";
  out += "# HELP tarn_loop_calls_total API calls the service loop ran.\n";
  out += "# TYPE tarn_loop_calls_total counter\ntarn_loop_calls_total " +
         std::to_string(options_.loop->calls_handled()) + "\n";
  if (options_.server_metrics) out += options_.server_metrics();
  return out;
}

}  // namespace tarn::api
