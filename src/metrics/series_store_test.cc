#include "metrics/series_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

namespace tarn::metrics {
namespace {

Exposition Parse(const std::string& text) {
  auto e = ParsePrometheusText(text);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : Exposition{};
}

std::vector<double> Values(const SeriesStore::Series& s) {
  std::vector<double> v;
  for (const Point& p : s.points) v.push_back(p.v);
  return v;
}

TEST(SeriesStoreTest, KeepsTheNewestPointsOfEachSeries) {
  SeriesStore store({.points_per_series = 3});
  for (int i = 1; i <= 5; ++i) {
    store.Record("a/x/w-0", 1000 * i,
                 Parse("# TYPE loss gauge\nloss " + std::to_string(i) + "\nreq{code=\"200\"} " +
                       std::to_string(10 * i) + "\n"));
  }
  auto q = store.Query("a/x/w-0", {"loss"}, 0, 100);
  ASSERT_TRUE(q.known);
  ASSERT_EQ(q.series.size(), 1u);
  EXPECT_EQ(q.series[0].type, "gauge");
  EXPECT_EQ(Values(q.series[0]), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(q.series[0].points.front().t_ms, 3000);
  // After a time: only the newer points. Untyped samples keep their labels.
  q = store.Query("a/x/w-0", {"req"}, 4000, 100);
  ASSERT_EQ(q.series.size(), 1u);
  EXPECT_EQ(q.series[0].labels, "{code=\"200\"}");
  EXPECT_EQ(q.series[0].type, "untyped");
  EXPECT_EQ(Values(q.series[0]), (std::vector<double>{50}));
  // Every series, names only.
  q = store.Query("a/x/w-0", {}, 0, 100, /*with_points=*/false);
  ASSERT_EQ(q.series.size(), 2u);
  EXPECT_TRUE(q.series[0].points.empty());
  EXPECT_FALSE(store.Query("a/x/w-1", {}, 0, 100).known);
}

TEST(SeriesStoreTest, ThinsEvenlyAndAlwaysShowsTheNewest) {
  SeriesStore store({.points_per_series = 100});
  for (int i = 1; i <= 10; ++i) store.Record("k", i, Parse("g " + std::to_string(i) + "\n"));
  auto q = store.Query("k", {"g"}, 0, 4);
  ASSERT_EQ(q.series.size(), 1u);
  EXPECT_EQ(Values(q.series[0]), (std::vector<double>{1, 4, 7, 10}));
  q = store.Query("k", {"g"}, 0, 5);
  EXPECT_EQ(Values(q.series[0]), (std::vector<double>{2, 4, 6, 8, 10}));
}

TEST(SeriesStoreTest, SeriesBeyondTheBoundsAreCountedNotKept) {
  SeriesStore store({.points_per_series = 10, .series_per_instance = 2, .max_series = 3});
  store.Record("i1", 1, Parse("a 1\nb 1\nc 1\n"));
  EXPECT_EQ(store.series_count(), 2u);
  EXPECT_EQ(store.Query("i1", {}, 0, 10).not_kept, 1u);
  store.Record("i2", 1, Parse("a 1\nb 1\n"));
  EXPECT_EQ(store.series_count(), 3u) << "at most max_series in all";
  EXPECT_EQ(store.Query("i2", {}, 0, 10).series.size(), 1u);
  EXPECT_EQ(store.Query("i2", {}, 0, 10).not_kept, 1u);
  store.Retain([](const std::string& key) { return key == "i2"; });
  EXPECT_EQ(store.series_count(), 1u);
  EXPECT_FALSE(store.Query("i1", {}, 0, 10).known);
  store.Record("i2", 2, Parse("a 2\nb 2\n"));
  EXPECT_EQ(store.series_count(), 2u) << "room again once i1 is forgotten";
}

// Buckets 0.1, 0.5, 1, +Inf. Between two scrapes: 2 observations up to 0.1, 6 in (0.1, 0.5],
// 2 in (0.5, 1]. The median is the 5th: 3 of the 6 into (0.1, 0.5], 0.1 + 0.4 * 3/6 = 0.3;
// the 0.99 quantile the 9.9th: 1.9 of the 2 into (0.5, 1], 0.5 + 0.5 * 1.9/2 = 0.975.
std::string Histogram(int le01, int le05, int le1, int inf, double sum) {
  return "# TYPE lat histogram\n"
         "lat_bucket{model=\"m\",le=\"0.1\"} " + std::to_string(le01) + "\n"
         "lat_bucket{model=\"m\",le=\"0.5\"} " + std::to_string(le05) + "\n"
         "lat_bucket{model=\"m\",le=\"1\"} " + std::to_string(le1) + "\n"
         "lat_bucket{model=\"m\",le=\"+Inf\"} " + std::to_string(inf) + "\n"
         "lat_sum{model=\"m\"} " + std::to_string(sum) + "\n"
         "lat_count{model=\"m\"} " + std::to_string(inf) + "\n";
}

TEST(SeriesStoreTest, AHistogramBecomesTheQuantilesOfEachInterval) {
  SeriesStore store({});
  store.Record("s", 1000, Parse(Histogram(5, 5, 5, 5, 1.0)));
  EXPECT_TRUE(store.Query("s", {"lat:p50"}, 0, 10).series.empty()) << "no interval yet";
  store.Record("s", 2000, Parse(Histogram(7, 13, 15, 15, 4.0)));
  auto p50 = store.Query("s", {"lat:p50"}, 0, 10);
  auto p99 = store.Query("s", {"lat:p99"}, 0, 10);
  ASSERT_EQ(p50.series.size(), 1u);
  ASSERT_EQ(p99.series.size(), 1u);
  EXPECT_EQ(p50.series[0].labels, "{model=\"m\"}");
  EXPECT_EQ(p50.series[0].type, "quantile");
  ASSERT_EQ(p50.series[0].points.size(), 1u);
  EXPECT_NEAR(p50.series[0].points[0].v, 0.3, 1e-12);
  EXPECT_NEAR(p99.series[0].points[0].v, 0.975, 1e-12);
  // _count and _sum are kept as counters; the buckets themselves are not.
  auto all = store.Query("s", {}, 0, 10, false);
  std::set<std::string> names;
  for (const auto& s : all.series) names.insert(s.name + ":" + s.type);
  EXPECT_EQ(names, (std::set<std::string>{"lat:p50:quantile", "lat:p99:quantile",
                                          "lat_count:counter", "lat_sum:counter"}));
  // Nothing observed in an interval: no point. A restart (counts fall): the counts since.
  store.Record("s", 3000, Parse(Histogram(7, 13, 15, 15, 4.0)));
  store.Record("s", 4000, Parse(Histogram(0, 0, 2, 2, 1.5)));
  p50 = store.Query("s", {"lat:p50"}, 0, 10);
  ASSERT_EQ(p50.series[0].points.size(), 2u);
  EXPECT_EQ(p50.series[0].points[1].t_ms, 4000);
  EXPECT_NEAR(p50.series[0].points[1].v, 0.5 + 0.5 * (1.0 / 2), 1e-12);
}

TEST(SeriesStoreTest, QuantilesAtTheEdges) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {1, inf}, {0, 0})));
  // In the +Inf bucket: the highest finite bound, as Prometheus answers.
  EXPECT_EQ(HistogramQuantile(0.99, {1, 2, inf}, {1, 1, 10}), 2);
  // The first bucket starts at 0.
  EXPECT_NEAR(HistogramQuantile(0.5, {2, inf}, {4, 4}), 1.0, 1e-12);
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {1, 2}, {1, 2}))) << "no +Inf bucket";
}

}  // namespace
}  // namespace tarn::metrics
