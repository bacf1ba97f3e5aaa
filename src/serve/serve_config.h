// tarn-serve's configuration: which models to serve from where (TF Serving's
// ModelServerConfig, written as JSON with its field names), which of a model's versions to
// serve (its ServableVersionPolicy), and the batching parameters (its BatchingParameters).
//
// Protobuf's JSON mapping accepts both the field names and their lowerCamelCase forms
// (`base_path` and `basePath`), and wraps numbers such as max_batch_size in
// `{"value": N}`; both spellings are accepted here too, so a file converted from a TF
// Serving config works. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::serve {

struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int64_t num_versions = 1;       // kLatest
  std::vector<int64_t> versions;  // kSpecific, sorted, unique
};

// tarn's canary rollout of new versions (docs/serve.md, "Canary"): a newly exported version
// whose meta.json accuracy is below the stable version's by more than max_accuracy_drop is
// refused unserved; else it serves traffic_percent of the unlabelled requests, and once it
// has answered promote_after_requests (or promote_after_seconds have passed and it has
// answered any) it is promoted if its error rate is no worse than stable's, else rolled back.
struct CanaryPolicy {
  int64_t traffic_percent = 10;  // 1..99
  double max_accuracy_drop = 0;  // 0..1
  int64_t promote_after_requests = 1000;
  int64_t promote_after_seconds = 0;  // 0: by requests only
};

struct ModelConfig {
  std::string name;
  std::string base_path;  // holds <version>/model.pt and <version>/meta.json
  VersionPolicy policy;
  std::map<std::string, int64_t> labels;  // version_labels
  std::optional<CanaryPolicy> canary;     // stable and canary labels, set by the rollout
};

// TF Serving's defaults, except max_enqueued_batches, whose default (1,000,000) would let a
// queue grow for minutes before a client hears 503.
struct BatchingParameters {
  int64_t max_batch_size = 32;
  int64_t batch_timeout_micros = 1000;
  int64_t num_batch_threads = 1;
  int64_t max_enqueued_batches = 64;
};

// `text` is the content of a --model_config_file; `source` names it in errors.
StatusOr<std::vector<ModelConfig>> ParseModelConfigList(const std::string& text,
                                                        const std::string& source);

// `text` is the content of a --batching_parameters_file.
StatusOr<BatchingParameters> ParseBatchingParameters(const std::string& text,
                                                     const std::string& source);

// The versions the policy serves out of `available` (any order), ascending. kSpecific
// serves the listed versions that exist; the caller reports the others as missing.
std::vector<int64_t> VersionsToServe(const VersionPolicy& policy,
                                     const std::vector<int64_t>& available);

// The integer-named directories under `base_path` that hold a model.pt, ascending.
// Hidden (dot) directories are exports still being written and are never listed.
StatusOr<std::vector<int64_t>> ListVersions(const std::string& base_path);

// A model name goes into URLs and metric labels: 1-128 of [A-Za-z0-9_.-], not starting
// with '.'.
Status CheckModelName(const std::string& name, const std::string& where);

}  // namespace tarn::serve
