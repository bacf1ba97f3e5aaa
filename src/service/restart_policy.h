// When an instance exits: restart it (after how long), leave it done, or give up, following
// its component's restart_policy and YARN's component properties:
//   yarn.service.container-failure.retry.max               (-1: forever)
//   yarn.service.container-failure.retry-interval-ms       (when set: a fixed interval)
//   yarn.service.container-failure.validity-interval-ms    (failures older than it are forgotten)
//   yarn.service.container-failure-per-component.threshold (component failures: fail it)
//   yarn.service.failure-count-reset.window                (seconds; the component count resets)
// Without a fixed interval the delay backs off exponentially (1 s doubling to 5 min), and
// resets once an instance has run healthily for 10 min. Driven by an injected Clock; no
// threads. Not thread-safe: the service loop owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "common/clock.h"
#include "spec/assembly.h"

namespace tarn::service {

using Duration = Clock::Duration;

struct RestartOptions {
  Duration initial_backoff = std::chrono::seconds(1);
  Duration max_backoff = std::chrono::minutes(5);
  Duration healthy_reset = std::chrono::minutes(10);
  int64_t max_retries = -1;
  std::optional<Duration> fixed_interval;
  std::optional<Duration> validity_interval;
  int64_t component_failure_threshold = 10;
  Duration component_failure_window = std::chrono::hours(6);

  // Reads the yarn.service.* keys of a component's merged properties (validated by the
  // parser); absent keys keep the defaults above.
  static RestartOptions FromProperties(const std::map<std::string, std::string>& properties);
};

struct RestartDecision {
  enum class Action {
    kRestart,    // start it again after `delay`
    kSucceeded,  // it finished its work: leave it
    kFailed,     // it failed and will not be restarted
  };
  Action action = Action::kRestart;
  Duration delay{0};
  std::string reason;  // for the instance's diagnostics
};

// One instance's restart history. REQUIRES: Started() before each Exited().
class InstanceRestarts {
 public:
  InstanceRestarts(spec::RestartPolicy policy, RestartOptions options, const Clock& clock);

  void Started();
  // `success`: exit code 0. `how`: the exit's diagnostics ("exited with code 3").
  RestartDecision Exited(bool success, const std::string& how);

  int64_t restarts() const { return restarts_; }

 private:
  spec::RestartPolicy policy_;
  RestartOptions options_;
  const Clock& clock_;
  Clock::TimePoint started_at_{};
  int64_t restarts_ = 0;
  int backoff_step_ = 0;                   // doublings so far since the last healthy run
  std::deque<Clock::TimePoint> failures_;  // within the validity interval
};

// A component's failures, for the threshold that fails the component and the assembly.
class ComponentFailures {
 public:
  ComponentFailures(RestartOptions options, const Clock& clock);
  // Records one failed exit; returns a reason when the threshold is reached, else "".
  std::string Failed(const std::string& component);
  int64_t count() const { return static_cast<int64_t>(failures_.size()); }

 private:
  RestartOptions options_;
  const Clock& clock_;
  std::deque<Clock::TimePoint> failures_;
};

}  // namespace tarn::service
