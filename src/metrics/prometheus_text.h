// The Prometheus text exposition format (version 0.0.4), as instances serve it on
// GET /metrics: `# TYPE name kind` and `# HELP` lines, then samples
// `name{label="value",...} value [timestamp]`. The parser takes outside input: every error
// names the line, and the input's size and sample count are bounded by the caller.
// Stateless functions; thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tarn::metrics {

struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by name, unescaped
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;              // in the text's order
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram|summary|untyped
};

// InvalidArgument naming the line ("line 7: ...") for what is not the format; more than
// `max_samples` samples is an error too.
StatusOr<Exposition> ParsePrometheusText(std::string_view text, size_t max_samples = 100000);

// `labels` as the format writes them: {a="x",b="y\"z"}; "" when there are none.
std::string LabelText(const std::vector<std::pair<std::string, std::string>>& labels);

}  // namespace tarn::metrics
