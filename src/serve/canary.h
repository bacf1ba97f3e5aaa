// Canary: the traffic split and the verdict of one canary version against the stable one
// (docs/serve.md, "Canary"). A pure object of counts and a clock reading; the model
// repository owns one per model with a canary policy, guards it with its lock, and carries
// out what it decides.
//
//   - Split: unlabelled request n (counted from the canary's start) goes to the canary when
//     floor((n + 1) * p / 100) > floor(n * p / 100), so over any N requests its share is
//     N * p / 100 rounded down or up: for 20%, every fifth.
//   - Gate: a version whose meta.json accuracy is below stable's by more than the policy's
//     max_accuracy_drop is refused before it serves; without an accuracy on either side
//     there is nothing to compare, and it is let through to the traffic test.
//   - Verdict: once the canary has answered promote_after_requests (or promote_after_seconds
//     have passed and it has answered at least one), promoted when its error rate is no
//     worse than stable's over the same time, else rolled back. Errors are the model's own
//     failures (the run failed), never a client's bad request or a full queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "serve/model_meta.h"
#include "serve/serve_config.h"

namespace tarn::serve {

// Why `candidate` may not become the canary of `stable`, or nullopt when it may.
std::optional<std::string> AccuracyRefusal(const CanaryPolicy& policy, int64_t candidate_version,
                                           const ModelMeta& candidate, int64_t stable_version,
                                           const ModelMeta& stable);

class Canary {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  Canary(const CanaryPolicy& policy, int64_t version, TimePoint started);

  int64_t version() const { return version_; }

  // Whether the next unlabelled request goes to the canary; counts it.
  bool TakeNext();
  // A request answered by the canary (`canary`) or by stable; `failed`: the model failed.
  void Record(bool canary, bool failed);

  enum class Verdict { kWait, kPromote, kRollBack };
  Verdict Decide(TimePoint now) const;
  // The counts, for the status API, /metrics and the verdict's log line.
  std::string Describe() const;

  int64_t canary_requests() const { return canary_requests_; }
  int64_t canary_failures() const { return canary_failures_; }
  int64_t stable_requests() const { return stable_requests_; }
  int64_t stable_failures() const { return stable_failures_; }
  int64_t traffic_percent() const { return policy_.traffic_percent; }

 private:
  CanaryPolicy policy_;
  int64_t version_;
  TimePoint started_;
  int64_t split_ = 0;  // unlabelled requests split so far
  int64_t canary_requests_ = 0, canary_failures_ = 0;
  int64_t stable_requests_ = 0, stable_failures_ = 0;
};

}  // namespace tarn::serve
