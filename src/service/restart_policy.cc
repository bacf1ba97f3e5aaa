#include "service/restart_policy.h"

#include <algorithm>
#include <cstdlib>

namespace tarn::service {
namespace {

std::optional<int64_t> Number(const std::map<std::string, std::string>& p, const char* key) {
  auto it = p.find(key);
  if (it == p.end()) return std::nullopt;
  return std::atoll(it->second.c_str());
}

std::string DurationText(Duration d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

}  // namespace

RestartOptions RestartOptions::FromProperties(const std::map<std::string, std::string>& p) {
  RestartOptions o;
  if (auto v = Number(p, "yarn.service.container-failure.retry.max")) o.max_retries = *v;
  if (auto v = Number(p, "yarn.service.container-failure.retry-interval-ms")) {
    o.fixed_interval = std::chrono::milliseconds(*v);
  }
  if (auto v = Number(p, "yarn.service.container-failure.validity-interval-ms"); v && *v > 0) {
    o.validity_interval = std::chrono::milliseconds(*v);
  }
  if (auto v = Number(p, "yarn.service.container-failure-per-component.threshold")) {
    o.component_failure_threshold = *v;
  }
  if (auto v = Number(p, "yarn.service.failure-count-reset.window")) {
    o.component_failure_window = std::chrono::seconds(*v);
  }
  return o;
}

InstanceRestarts::InstanceRestarts(spec::RestartPolicy policy, RestartOptions options,
                                   const Clock& clock)
    : policy_(policy), options_(options), clock_(clock) {}

void InstanceRestarts::Started() { started_at_ = clock_.Now(); }

RestartDecision InstanceRestarts::Exited(bool success, const std::string& how) {
  const Clock::TimePoint now = clock_.Now();
  using Action = RestartDecision::Action;
  if (policy_ == spec::RestartPolicy::kNever ||
      (success && policy_ == spec::RestartPolicy::kOnFailure)) {
    return {success ? Action::kSucceeded : Action::kFailed, Duration(0),
            how + " (restart_policy " + spec::RestartPolicyName(policy_) + ": not restarted)"};
  }
  // A long healthy run earns a fresh start of the backoff.
  if (now - started_at_ >= options_.healthy_reset) backoff_step_ = 0;
  if (!success) {
    failures_.push_back(now);
    if (options_.validity_interval) {
      while (!failures_.empty() && now - failures_.front() > *options_.validity_interval) {
        failures_.pop_front();
      }
    }
    if (options_.max_retries >= 0 &&
        static_cast<int64_t>(failures_.size()) > options_.max_retries) {
      return {Action::kFailed, Duration(0),
              how + "; not restarted: it failed " + std::to_string(failures_.size()) +
                  " times and yarn.service.container-failure.retry.max is " +
                  std::to_string(options_.max_retries)};
    }
  }
  Duration delay;
  if (options_.fixed_interval) {
    delay = *options_.fixed_interval;
  } else {
    delay = options_.initial_backoff;
    for (int i = 0; i < backoff_step_ && delay < options_.max_backoff; ++i) delay *= 2;
    delay = std::min(delay, options_.max_backoff);
    ++backoff_step_;
  }
  ++restarts_;
  return {Action::kRestart, delay, how + "; restarting in " + DurationText(delay)};
}

ComponentFailures::ComponentFailures(RestartOptions options, const Clock& clock)
    : options_(options), clock_(clock) {}

std::string ComponentFailures::Failed(const std::string& component) {
  const Clock::TimePoint now = clock_.Now();
  failures_.push_back(now);
  while (!failures_.empty() && now - failures_.front() >= options_.component_failure_window) {
    failures_.pop_front();
  }
  if (options_.component_failure_threshold > 0 &&
      static_cast<int64_t>(failures_.size()) >= options_.component_failure_threshold) {
    return "component " + component + " failed " + std::to_string(failures_.size()) +
           " times, reaching yarn.service.container-failure-per-component.threshold (" +
           std::to_string(options_.component_failure_threshold) + ")";
  }
  return "";
}

}  // namespace tarn::service
