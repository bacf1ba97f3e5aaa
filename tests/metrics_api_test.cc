// Instances' metrics through a real `tarn server`: the collector scrapes each running
// instance's endpoint by the one rule (the port named metrics, else http; path /metrics), and
// GET /tarn/v1/services/NAME/metrics serves what it kept, bounded, paged and only to those who
// may see the assembly. The instances are real processes under tarn-shim: a small exporter in
// Python whose counts are known, so every figure checked is computed here by hand. Needs root.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "server_process.h"
#include "tarn_process.h"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using tarn::testing::CallApi;
using tarn::testing::Reply;
using tarn::testing::WaitFor;

// Each GET /metrics counts itself, and observes 10 latencies: 2 up to 0.1 s, 6 in (0.1, 0.5],
// 2 in (0.5, 1]. So between two scrapes the median is 0.1 + 0.4 * 3/6 = 0.3 and the 0.99
// quantile 0.5 + 0.5 * 1.9/2 = 0.975 (histogram_quantile's interpolation), whatever the pace.
constexpr char kExporter[] = R"(import http.server, sys
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        if self.path != "/metrics":
            self.send_error(404)
            return
        n += 1
        body = ("# TYPE scrapes_total counter\nscrapes_total %d\n"
                "# TYPE lat_seconds histogram\n"
                'lat_seconds_bucket{le="0.1"} %d\nlat_seconds_bucket{le="0.5"} %d\n'
                'lat_seconds_bucket{le="1"} %d\nlat_seconds_bucket{le="+Inf"} %d\n'
                "lat_seconds_sum %f\nlat_seconds_count %d\n"
                % (n, 2 * n, 8 * n, 10 * n, 10 * n, 3.5 * n, 10 * n)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
)";

class MetricsApiTest : public tarn::testing::ServerTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (containers)";
    StartServer(
        "metrics",
        {{"metrics",
          {{"scrape_interval_ms", 300}, {"scrape_timeout_ms", 300}, {"points_per_series", 50}}},
         {"nodes",
          json::array({{{"name", "node-1"}, {"vcores", 64}, {"memory_mb", 65536}, {"gpus", 0}}})}});
    if (HasFatalFailure()) return;
    std::ofstream(dir_ + "/exporter.py") << kExporter;
    ::chmod((dir_ + "/exporter.py").c_str(), 0644);
  }
  void TearDown() override { StopServer({{"alice", "metered"}}, 30s); }
  Reply Call(const std::string& method, const std::string& path, const json& body = json(),
             const std::string& user = "alice") {
    return CallApi(*server_, method, path, body, user);
  }
  // The instance's series named `name` in an answer; null when absent.
  static json SeriesOf(const json& answer, const std::string& instance, const std::string& name) {
    if (!answer.is_object()) return json();
    for (const json& i : answer.value("instances", json::array())) {
      if (i.value("instance", "") != instance) continue;
      for (const json& s : i.value("series", json::array())) {
        if (s.value("name", "") == name) return s;
      }
    }
    return json();
  }
};

TEST_F(MetricsApiTest, TheServerKeepsEachInstancesSeriesAndServesThemBounded) {
  json exporter = {{"name", "exporter"},
                   {"number_of_containers", 2},
                   {"launch_command", "exec /usr/bin/python3 " + dir_ + "/exporter.py $TARN_IP 9100"},
                   {"resource", {{"cpus", 1}, {"memory", "128"}}},
                   {"configuration", {{"properties", {{"tarn.ports", "grpc:9000,metrics:9100"}}}}}};
  json quiet = {{"name", "quiet"},  // no metrics or http port: nothing to scrape
                {"number_of_containers", 1},
                {"launch_command", "sleep 1000"},
                {"resource", {{"cpus", 1}, {"memory", "64"}}}};
  const json a = {{"name", "metered"}, {"version", "1"}, {"components", {exporter, quiet}}};
  ASSERT_EQ(Call("POST", "/app/v1/services", a).status, 202);

  const std::string path = "/tarn/v1/services/metered/metrics";
  json got;
  ASSERT_TRUE(WaitFor("4 scrapes of each exporter", 30s, [&] {
    got = Call("GET", path).body;
    for (const char* i : {"exporter-0", "exporter-1"}) {
      const json s = SeriesOf(got, i, "scrapes_total");
      if (!s.is_object() || s["points"].size() < 4) return false;
    }
    return true;
  })) << got.dump(1);
  EXPECT_EQ(got["total"], 3);
  EXPECT_EQ(got["scrape_interval_ms"], 300);
  EXPECT_EQ(got["points_per_series"], 50);
  for (const json& i : got["instances"]) {
    if (i["instance"] == "quiet-0") {
      EXPECT_FALSE(i.contains("endpoint")) << i.dump();
      EXPECT_TRUE(i["series"].empty()) << i.dump();
      continue;
    }
    EXPECT_EQ(i["error"], "") << i.dump();
    EXPECT_NE(i.value("endpoint", "").find(":9100/metrics"), std::string::npos) << i.dump();
  }

  // The counter as scraped: it grows by one a GET (more where a scrape was cut by its
  // timeout after the exporter counted it), in time order.
  const json counter = SeriesOf(got, "exporter-0", "scrapes_total");
  EXPECT_EQ(counter["type"], "counter");
  double before = 0;
  int64_t at = 0;
  for (const json& p : counter["points"]) {
    EXPECT_GE(p[1].get<double>(), before + 1) << counter.dump();
    EXPECT_GT(p[0].get<int64_t>(), at);
    before = p[1].get<double>();
    at = p[0].get<int64_t>();
  }
  // The histogram as its quantiles over each interval; its buckets are not kept.
  const json p50 = SeriesOf(got, "exporter-1", "lat_seconds:p50");
  const json p99 = SeriesOf(got, "exporter-1", "lat_seconds:p99");
  ASSERT_FALSE(p50.is_null()) << got.dump(1);
  ASSERT_FALSE(p99.is_null()) << got.dump(1);
  EXPECT_EQ(p50["type"], "quantile");
  for (const json& p : p50["points"]) EXPECT_NEAR(p[1].get<double>(), 0.3, 1e-9);
  for (const json& p : p99["points"]) EXPECT_NEAR(p[1].get<double>(), 0.975, 1e-9);
  EXPECT_TRUE(SeriesOf(got, "exporter-1", "lat_seconds_bucket").is_null());
  EXPECT_EQ(SeriesOf(got, "exporter-1", "lat_seconds_count")["type"], "counter");

  // Live updates: only what came after `since`. One series, one instance, by name.
  got = Call("GET", path + "?series=scrapes_total&instance=exporter-0&since=" +
                        std::to_string(at)).body;
  ASSERT_EQ(got["instances"].size(), 1u) << got.dump();
  ASSERT_EQ(got["instances"][0]["series"].size(), 1u) << got.dump();
  for (const json& p : got["instances"][0]["series"][0]["points"]) {
    EXPECT_GT(p[0].get<int64_t>(), at);
  }
  // Paged, and thinned to what was asked (the newest point kept).
  got = Call("GET", path + "?component=exporter&limit=1&offset=1&max_points=2").body;
  EXPECT_EQ(got["total"], 2);
  ASSERT_EQ(got["instances"].size(), 1u);
  EXPECT_EQ(got["instances"][0]["instance"], "exporter-1");
  EXPECT_EQ(got["max_points"], 2);
  EXPECT_LE(SeriesOf(got, "exporter-1", "scrapes_total")["points"].size(), 2u);

  // Bad parameters are named; another tenant sees nothing of it, as for any assembly.
  Reply bad = Call("GET", path + "?limit=0");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.text.find("limit: from 1 to 100"), std::string::npos) << bad.text;
  bad = Call("GET", path + "?since=soon");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.text.find("since: expected a whole number"), std::string::npos) << bad.text;
  EXPECT_EQ(Call("GET", path, json(), "bob").status, 404);

  // The server counts its scrapes on its own /metrics.
  httplib::Client c("127.0.0.1", server_->port());
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("\ntarn_metrics_scrapes_total "), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("\ntarn_metrics_series "), std::string::npos) << m->body;

  // Flexed down: the instance that left takes its series with it.
  ASSERT_EQ(Call("PUT", "/app/v1/services/metered/components/exporter",
                 {{"number_of_containers", 1}})
                .status,
            200);
  ASSERT_TRUE(WaitFor("exporter-1 to leave", 30s, [&] {
    got = Call("GET", path + "?component=exporter").body;
    return got.value("total", 0) == 1;
  }));
  EXPECT_EQ(got["instances"][0]["instance"], "exporter-0");
}

}  // namespace
