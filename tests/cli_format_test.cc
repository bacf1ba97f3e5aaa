// Unit tests of the client's formatting: the table, the server address, the one-line HTTP
// error, ages, the status's MODELS column and the nodes, queues and events tables. Linked
// into cli_client_test.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/api_format.h"
#include "cli/client.h"
#include "cli/table.h"

namespace {

using json = nlohmann::json;
using tarn::cli::Table;

TEST(TableTest, ColumnsAlignWithTwoSpacesAndNoTrailingBlanks) {
  Table table({"NAME", "STATE", "DIAGNOSTICS"});
  table.AddRow({"a", "RUNNING", ""});
  table.AddRow({"longer-name", "OK", "two\nlines"});
  table.AddRow({"b"});
  EXPECT_EQ(table.Render(),
            "NAME         STATE    DIAGNOSTICS\n"
            "a            RUNNING\n"
            "longer-name  OK       two lines\n"
            "b\n");
}

TEST(TableTest, WidthsCountCharactersNotBytes) {
  Table table({"X", "Y"});
  table.AddRow({"\xc3\xa9t\xc3\xa9", "1"});  // "été": 3 characters, 5 bytes
  EXPECT_EQ(table.Render(), "X    Y\n\xc3\xa9t\xc3\xa9  1\n");
}

TEST(TableTest, HeaderOnly) { EXPECT_EQ(Table({"A", "B"}).Render(), "A  B\n"); }

TEST(ServerAddressTest, Forms) {
  auto a = tarn::cli::ParseServerAddress("http://example.org:9000/");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "example.org");
  EXPECT_EQ(a->port, 9000);
  EXPECT_EQ(tarn::cli::ParseServerAddress("localhost")->port, 8088);
  EXPECT_EQ(tarn::cli::ParseServerAddress("[::1]:80")->ToString(), "[::1]:80");
  EXPECT_FALSE(tarn::cli::ParseServerAddress("h:0").ok());
  EXPECT_FALSE(tarn::cli::ParseServerAddress("h:x").ok());
  EXPECT_FALSE(tarn::cli::ParseServerAddress(":80").ok());
  EXPECT_FALSE(tarn::cli::ParseServerAddress("h:80/app").ok());
  auto tls = tarn::cli::ParseServerAddress("https://tarn.example.org:8443");
  ASSERT_TRUE(tls.ok());
  EXPECT_TRUE(tls->tls);
  EXPECT_EQ(tls->ToString(), "https://tarn.example.org:8443");
  auto unix_socket = tarn::cli::ParseServerAddress("unix:/run/tarn/tarn.sock");
  ASSERT_TRUE(unix_socket.ok());
  EXPECT_EQ(unix_socket->kind, tarn::cli::ServerAddress::Kind::kUnix);
  EXPECT_EQ(unix_socket->path, "/run/tarn/tarn.sock");
  EXPECT_EQ(unix_socket->ToString(), "unix:/run/tarn/tarn.sock");
  EXPECT_FALSE(tarn::cli::ParseServerAddress("unix:").ok());
  EXPECT_FALSE(tarn::cli::ParseServerAddress("unix:/" + std::string(200, 'x')).ok());
}

TEST(HttpErrorTest, OneLine) {
  EXPECT_EQ(tarn::cli::FormatHttpError(400, R"({"diagnostics": "a.json: name: bad\nb: worse\n"})"),
            "a.json: name: bad; b: worse (HTTP 400)");
  EXPECT_EQ(tarn::cli::FormatHttpError(500, "boom\n"), "boom (HTTP 500)");
  EXPECT_EQ(tarn::cli::FormatHttpError(409, R"({"x": 1})"), "Conflict (HTTP 409)");
}

TEST(UrlEncodeTest, ReservedCharactersAreEscaped) {
  EXPECT_EQ(tarn::cli::UrlEncode("Bob Smith&x=1/é"), "Bob%20Smith%26x%3D1%2F%C3%A9");
  EXPECT_EQ(tarn::cli::UrlEncode("a-b_c.d~"), "a-b_c.d~");
}

TEST(FormatTest, Ages) {
  using tarn::cli::FormatAge;
  EXPECT_EQ(FormatAge(-5), "0s");
  EXPECT_EQ(FormatAge(45'000), "45s");
  EXPECT_EQ(FormatAge(200'000), "3m20s");
  EXPECT_EQ(FormatAge(42 * 60'000), "42m");
  EXPECT_EQ(FormatAge((5 * 60 + 10) * 60'000), "5h10m");
  EXPECT_EQ(FormatAge(int64_t{20} * 3600'000), "20h");
  EXPECT_EQ(FormatAge(int64_t{3} * 24 * 3600'000), "3d");
  EXPECT_EQ(tarn::cli::FormatLifetime(json(-1)), "unlimited");
  EXPECT_EQ(tarn::cli::FormatLifetime(json(3600)), "60m left");
}

TEST(FormatTest, NodesQueuesEvents) {
  json nodes = json::parse(R"([{"name": "node-a",
      "capacity": {"vcores": 8, "memory_mb": 16384, "gpus": 2},
      "free": {"vcores": 6, "memory_mb": 12800, "gpus": 1}, "free_gpus": [1],
      "gpus": [{"index": 0, "holder": "bob/train/worker-0"}, {"index": 1, "holder": null}]},
      {"name": "node-b", "capacity": {"vcores": 4, "memory_mb": 4096, "gpus": 0},
      "free": {"vcores": 4, "memory_mb": 4096, "gpus": 0}, "free_gpus": [], "gpus": []}])");
  EXPECT_EQ(tarn::cli::FormatNodes(nodes),
            "NAME    FREE VCORES  FREE MEMORY   FREE GPUS  FREE GPU IDS  GPUS HELD BY\n"
            "node-a  6/8          12800Mi/16Gi  1/2        1             0:bob/train/worker-0\n"
            "node-b  4/4          4Gi/4Gi       0/0        -             -\n");
  json queues = json::parse(R"([{"name": "default", "capacity": 50, "maximum_capacity": 100,
      "used": {"vcores": 2, "memory_mb": 4096, "gpus": 1}, "share": 0.375, "pending": 3,
      "users": [{"user": "bob", "used": {"vcores": 2, "memory_mb": 4096, "gpus": 1},
                 "dominant_share": 0.375, "pending": 0},
                {"user": "alice", "used": {"vcores": 0, "memory_mb": 0, "gpus": 0},
                 "dominant_share": 0, "pending": 3}]}])");
  EXPECT_EQ(tarn::cli::FormatQueues(queues),
            "NAME     CAPACITY  MAX CAPACITY  USED                  SHARE  PENDING\n"
            "default  50%       100%          2 vcores, 4Gi, 1 GPU  37.5%  3\n"
            "\n"
            "QUEUE    USER   USED                   DOMINANT SHARE  PENDING\n"
            "default  bob    2 vcores, 4Gi, 1 GPU   37.5%           0\n"
            "default  alice  0 vcores, 0Mi, 0 GPUs  0%              3\n");
  json events = json::parse(R"([{"time": "2024-01-02T03:04:05Z", "component": "ps",
      "instance": "ps-0", "type": "STARTED", "message": "pid 42"}])");
  EXPECT_EQ(tarn::cli::FormatEvents(events),
            "TIME                  COMPONENT  INSTANCE  TYPE     MESSAGE\n"
            "2024-01-02T03:04:05Z  ps         ps-0      STARTED  pid 42\n");
}

}  // namespace

// The replicas' rollout labels from the scraped tarn_serve_version_label: only what the last
// scrape had (a canary since promoted is gone), shown as a MODELS column.
TEST(FormatTest, ServedLabelsFromTheLastScrapeAreAModelsColumn) {
  json service = {
      {"name", "web"},
      {"components",
       {{{"name", "serving"},
         {"containers",
          {{{"component_instance_name", "serving-0"}, {"state", "READY"}, {"version", "1"}},
           {{"component_instance_name", "serving-1"}, {"state", "READY"}, {"version", "1"}},
           {{"component_instance_name", "serving-2"}, {"state", "READY"}, {"version", "1"}}}}}}}};
  auto label = [](const char* name, int64_t t, double v) {
    return json{{"name", "tarn_serve_version_label"},
                {"labels", {{"model", "fmnist"}, {"label", name}}},
                {"points", {{t, v}}}};
  };
  const json metrics = {
      {"instances",
       {{{"instance", "serving-0"},
         {"last_scrape_ms", 2000},
         {"series", {label("stable", 2000, 3), label("canary", 2000, 4)}}},
        {{"instance", "serving-1"},
         {"last_scrape_ms", 2000},
         {"series", {label("stable", 2000, 4), label("canary", 1000, 4)}}},  // promoted
        {{"instance", "serving-2"},
         {"last_scrape_ms", 3000},
         {"series", {label("stable", 2000, 3)}}},
        {{"instance", "serving-9"},
         {"last_scrape_ms", 2000},
         {"series", {label("stable", 2000, 3)}}}}}};
  const std::string plain = tarn::cli::FormatServiceStatus(service, 0);
  EXPECT_EQ(plain.find("MODELS"), std::string::npos) << "no labels, no column:\n" << plain;
  tarn::cli::AddServedLabels(service, metrics);
  const json& c = service["components"][0]["containers"];
  EXPECT_EQ(c[0]["served_labels"], (json{{"fmnist", {{"stable", 3}, {"canary", 4}}}}));
  EXPECT_EQ(c[1]["served_labels"], (json{{"fmnist", {{"stable", 4}}}}));
  EXPECT_FALSE(c[2].contains("served_labels")) << "its last scrape failed: nothing known now";
  const std::string out = tarn::cli::FormatServiceStatus(service, 0);
  EXPECT_NE(out.find("INSTANCE   STATE  VERSION  MODELS"), std::string::npos) << out;
  EXPECT_NE(out.find("serving-0  READY  1        fmnist stable 3 canary 4"), std::string::npos)
      << out;
  EXPECT_NE(out.find("serving-1  READY  1        fmnist stable 4 "), std::string::npos) << out;
  EXPECT_NE(out.find("serving-2  READY  1        -"), std::string::npos) << out;
  // Bad input is skipped, never thrown on.
  json other = service;
  tarn::cli::AddServedLabels(other, json{{"instances", {{{"series", "x"}}, 3, json()}}});
  tarn::cli::AddServedLabels(other, json::array());
  EXPECT_EQ(other, service);
}
