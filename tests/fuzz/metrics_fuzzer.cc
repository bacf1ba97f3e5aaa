// libFuzzer target for the Prometheus text format as instances serve it (the collector reads
// whatever an instance's /metrics answers). Beyond "no crash, no sanitizer report", it
// checks: what parses renders back (name, LabelText, value) to text that parses to the same
// samples; and the series store takes it twice (a histogram's second scrape makes quantiles)
// within its bounds.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "metrics/prometheus_text.h"
#include "metrics/series_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto e = tarn::metrics::ParsePrometheusText(text, 5000);
  if (!e.ok()) {
    if (e.status().message().rfind("line ", 0) != 0) __builtin_trap();  // every error says where
    return 0;
  }
  std::string again;
  for (const auto& s : e->samples) {
    char value[64];
    std::snprintf(value, sizeof value, "%.17g", s.value);
    again += s.name + tarn::metrics::LabelText(s.labels) + " " + value + "\n";
  }
  auto back = tarn::metrics::ParsePrometheusText(again, 5000);
  if (!back.ok() || back->samples.size() != e->samples.size()) __builtin_trap();
  for (size_t i = 0; i < e->samples.size(); ++i) {
    const auto& a = e->samples[i];
    const auto& b = back->samples[i];
    if (a.name != b.name || a.labels != b.labels) __builtin_trap();
    if (!(a.value == b.value || (std::isnan(a.value) && std::isnan(b.value)))) __builtin_trap();
  }
  tarn::metrics::SeriesStore store({.points_per_series = 4, .series_per_instance = 16,
                                    .max_series = 32});
  store.Record("a/b/c-0", 1000, *e);
  store.Record("a/b/c-0", 2000, *e);
  if (store.series_count() > 16) __builtin_trap();
  auto q = store.Query("a/b/c-0", {}, 0, 3);
  for (const auto& s : q.series) {
    if (s.points.size() > 3) __builtin_trap();
  }
  return 0;
}
