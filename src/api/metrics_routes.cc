// The routes of instances' metrics, as the collector keeps them (metrics/collector.h).
#include <algorithm>
#include <set>
#include <string>

#include "api/routes.h"
#include "api/state_snapshot.h"
#include "common/number.h"
#include "metrics/collector.h"

namespace tarn::api {
namespace {

using json = nlohmann::json;

// At most this many points in one answer, whatever was asked: the page thins each series
// (newest kept) to fit.
constexpr size_t kPointBudget = 100000;
constexpr int64_t kMaxLimit = 100;
constexpr size_t kMaxSeriesNames = 32;

std::set<std::string> CommaList(const std::string& text) {
  std::set<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? text.npos : comma - start);
    if (!item.empty()) out.insert(std::move(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

void RegisterMetricsRoutes(Router& h, const ServiceLoop& loop,
                           const metrics::Collector* collector) {
  h.Get(R"(/tarn/v1/services/([^/]+)/metrics)", [&loop, collector](const ApiRequest& req,
                                                                   ApiResponse& res) {
    std::string user;
    const std::string name = req.matches[1];
    if (!Addressed(req, res, loop, name, &user)) return;
    int64_t since = 0, offset = 0, limit = 20, max_points = 0;
    if (!QueryNumber(req, res, "since", 0, &since) ||
        !QueryNumber(req, res, "offset", 0, &offset) ||
        !QueryNumber(req, res, "limit", 20, &limit) ||
        !QueryNumber(req, res, "max_points", 0, &max_points)) {
      return;
    }
    if (limit < 1 || limit > kMaxLimit) {
      return Error(
          res, 400,
          "limit: from 1 to " + std::to_string(kMaxLimit) + ", got " + std::to_string(limit));
    }
    const std::set<std::string> names = CommaList(req.get_param_value("series"));
    if (names.size() > kMaxSeriesNames) {
      return Error(res, 400, "series: at most " + std::to_string(kMaxSeriesNames) + " names");
    }
    const std::set<std::string> only = CommaList(req.get_param_value("instance"));
    const std::string component = req.get_param_value("component");
    const std::shared_ptr<const StateSnapshot> snapshot = loop.Snapshot();
    const AssemblyView* view = snapshot->Find(user, name);
    if (view == nullptr) return Error(res, service::AssemblyNotFoundError(name));

    std::vector<const service::InstanceStatus*> chosen;
    for (const service::ComponentStatus& c : view->status().components) {
      if (!component.empty() && c.name != component) continue;
      for (const service::InstanceStatus& i : c.instances) {
        if (only.empty() || only.count(i.name)) chosen.push_back(&i);
      }
    }
    json out = {{"total", chosen.size()},
                {"offset", offset},
                {"limit", limit},
                {"instances", json::array()}};
    if (collector == nullptr) {
      out["scrape_interval_ms"] = 0;
      out["diagnostics"] = "this server scrapes no metrics (config: metrics.scrape_interval_ms)";
      return Reply(res, 200, out);
    }
    const metrics::SeriesStore& store = collector->store();
    out["scrape_interval_ms"] = collector->interval().count();
    out["points_per_series"] = store.options().points_per_series;
    const size_t first = std::min(chosen.size(), static_cast<size_t>(offset));
    const size_t last = std::min(chosen.size(), first + static_cast<size_t>(limit));
    auto key = [&](const service::InstanceStatus& i) { return user + "/" + name + "/" + i.name; };
    // How many series the page holds, to fit its points in the budget.
    size_t series = 0;
    for (size_t n = first; n < last; ++n) {
      series += store.Query(key(*chosen[n]), names, since, 0, false).series.size();
    }
    size_t per_series =
        max_points > 0 ? static_cast<size_t>(max_points) : store.options().points_per_series;
    per_series =
        std::min(per_series, std::max<size_t>(2, kPointBudget / std::max<size_t>(series, 1)));
    out["max_points"] = per_series;
    for (size_t n = first; n < last; ++n) {
      const service::InstanceStatus& i = *chosen[n];
      json one = {{"instance", i.name}, {"component", i.component}, {"state", i.state}};
      if (auto st = collector->State(key(i))) {
        one["endpoint"] = st->endpoint;
        one["last_scrape_ms"] = st->last_ms;
        one["error"] = st->error;
      }
      const metrics::SeriesStore::InstanceSeries got =
          store.Query(key(i), names, since, per_series);
      one["series_not_kept"] = got.not_kept;
      json list = json::array();
      for (const metrics::SeriesStore::Series& s : got.series) {
        json labels = json::object();
        for (const auto& [k, v] : s.label_pairs) labels[k] = v;
        json points = json::array();
        for (const metrics::Point& p : s.points) points.push_back({p.t_ms, p.v});
        list.push_back(
            {{"name", s.name}, {"labels", labels}, {"type", s.type}, {"points", points}});
      }
      one["series"] = std::move(list);
      out["instances"].push_back(std::move(one));
    }
    Reply(res, 200, out);
  });
}

}  // namespace tarn::api
