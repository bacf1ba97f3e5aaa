#include "metrics/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tarn::metrics {
namespace {

TEST(PrometheusTextTest, ReadsWhatTarnsWorkloadsAndPrometheusClientsWrite) {
  auto e = ParsePrometheusText(
      "# HELP tarn_train_loss Mean training loss.\n"
      "# TYPE tarn_train_loss gauge\n"
      "tarn_train_loss 0.4418\n"
      "# TYPE http_requests_total counter\n"
      "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
      "http_requests_total{code=\"400\",method=\"post\",} 3\r\n"
      "\n"
      "  # a comment of no kind\n"
      "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find "
      "file:\\n\\\"FILE.TXT\\\"\"} 1.458255915e9\n"
      "x{} +Inf\n"
      "y -Inf\n"
      "z NaN\n");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_EQ(e->samples.size(), 7u);
  EXPECT_EQ(e->types.at("tarn_train_loss"), "gauge");
  EXPECT_EQ(e->types.at("http_requests_total"), "counter");
  EXPECT_DOUBLE_EQ(e->samples[0].value, 0.4418);
  // Labels sorted by name, whatever their order in the text.
  const auto& a = e->samples[1].labels;
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], (std::pair<std::string, std::string>{"code", "200"}));
  EXPECT_EQ(LabelText(a), "{code=\"200\",method=\"post\"}");
  EXPECT_EQ(LabelText(e->samples[2].labels), "{code=\"400\",method=\"post\"}");
  // Escapes undone, and written again the same way.
  const auto& m = e->samples[3].labels;
  EXPECT_EQ(m[1].second, "C:\\DIR\\FILE.TXT");
  EXPECT_EQ(m[0].second, "Cannot find file:\n\"FILE.TXT\"");
  EXPECT_EQ(LabelText(m),
            "{error=\"Cannot find file:\\n\\\"FILE.TXT\\\"\",path=\"C:\\\\DIR\\\\FILE.TXT\"}");
  EXPECT_DOUBLE_EQ(e->samples[3].value, 1.458255915e9);
  EXPECT_TRUE(std::isinf(e->samples[4].value) && e->samples[4].value > 0);
  EXPECT_TRUE(std::isinf(e->samples[5].value) && e->samples[5].value < 0);
  EXPECT_TRUE(std::isnan(e->samples[6].value));
}

TEST(PrometheusTextTest, EachErrorNamesItsLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"ok 1\n{a=\"b\"} 1\n", "line 2: expected a metric name"},
      {"m{a=\"b\" 1\n", "line 1: m: expected ',' or '}' after label a"},
      {"m{a=b} 1\n", "line 1: m: label a's value is not a quoted string"},
      {"m{a=\"b} 1\n", "line 1: m: label a's value is not a quoted string"},
      {"m{a=\"1\",a=\"2\"} 1\n", "line 1: m: label a is given twice"},
      {"m 1.2.3\n", "line 1: m: \"1.2.3\" is not a number"},
      {"m\n", "line 1: m: \"\" is not a number"},
      {"m 1 soon\n", "line 1: m: \"soon\" is not a timestamp in milliseconds"},
      {"m 1 2 3\n", "line 1: m: unexpected text after the timestamp"},
      {"# TYPE m rate\n", "line 1: # TYPE m: \"rate\" is not counter, gauge, histogram"},
      {"# TYPE\n", "line 1: # TYPE names no metric"},
      {"m{:a=\"1\"} 1\n", "line 1: m: expected a label name or '}'"},
  };
  for (const auto& [text, want] : cases) {
    auto e = ParsePrometheusText(text);
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_NE(e.status().message().find(want), std::string::npos)
        << text << " -> " << e.status().message();
  }
  auto many = ParsePrometheusText("a 1\nb 2\nc 3\n", 2);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("line 3: more than 2 samples"), std::string::npos);
}

}  // namespace
}  // namespace tarn::metrics
