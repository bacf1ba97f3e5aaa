#include "serve/canary.h"

#include <cstdio>

namespace tarn::serve {
namespace {

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Rate(int64_t failures, int64_t requests) {
  if (requests == 0) return "no requests";
  return std::to_string(failures) + " of " + std::to_string(requests) + " failed (" +
         Fixed(100.0 * static_cast<double>(failures) / static_cast<double>(requests), 2) + "%)";
}

}  // namespace

std::optional<std::string> AccuracyRefusal(const CanaryPolicy& policy, int64_t candidate_version,
                                           const ModelMeta& candidate, int64_t stable_version,
                                           const ModelMeta& stable) {
  if (!candidate.accuracy || !stable.accuracy) return std::nullopt;
  // A drop exactly at the margin passes; 1e-12 keeps a decimal margin from failing on its
  // binary rounding.
  if (*candidate.accuracy >= *stable.accuracy - policy.max_accuracy_drop - 1e-12) {
    return std::nullopt;
  }
  return "refused: its accuracy " + Fixed(*candidate.accuracy, 4) + " is below stable version " +
         std::to_string(stable_version) + "'s " + Fixed(*stable.accuracy, 4) +
         " by more than max_accuracy_drop " + Fixed(policy.max_accuracy_drop, 4) + " (version " +
         std::to_string(candidate_version) + " never served)";
}

Canary::Canary(const CanaryPolicy& policy, int64_t version, TimePoint started)
    : policy_(policy), version_(version), started_(started) {}

bool Canary::TakeNext() {
  const int64_t p = policy_.traffic_percent;
  const bool canary = (split_ + 1) * p / 100 > split_ * p / 100;
  ++split_;
  return canary;
}

void Canary::Record(bool canary, bool failed) {
  if (canary) {
    ++canary_requests_;
    canary_failures_ += failed;
  } else {
    ++stable_requests_;
    stable_failures_ += failed;
  }
}

Canary::Verdict Canary::Decide(TimePoint now) const {
  const bool by_count = canary_requests_ >= policy_.promote_after_requests;
  const bool by_time = policy_.promote_after_seconds > 0 && canary_requests_ > 0 &&
                       now - started_ >= std::chrono::seconds(policy_.promote_after_seconds);
  if (!by_count && !by_time) return Verdict::kWait;
  // canary_failures / canary_requests <= stable_failures / stable_requests, in integers;
  // with no stable requests to compare, stable's rate is taken as 0.
  const bool no_worse = stable_requests_ == 0 ? canary_failures_ == 0
                                              : canary_failures_ * stable_requests_ <=
                                                    stable_failures_ * canary_requests_;
  return no_worse ? Verdict::kPromote : Verdict::kRollBack;
}

std::string Canary::Describe() const {
  return "canary version " + std::to_string(version_) + " at " +
         std::to_string(policy_.traffic_percent) +
         "%: " + Rate(canary_failures_, canary_requests_) +
         "; stable: " + Rate(stable_failures_, stable_requests_);
}

}  // namespace tarn::serve
