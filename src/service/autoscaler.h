// Autoscaler: how many replicas a serving component wants, from the requests its ready
// replicas have in flight (docs/autoscaling.md). A pure function of the readings it is given
// and its clock; the manager feeds it and carries out what it decides.
//
// The rule, from Knative's autoscaler and Kubernetes' HPA:
//   - every reading is the total in flight across the ready replicas; `stable` is their mean
//     over the stable window (60 s), `panic` over the panic window (6 s);
//   - wanted = ceil(load / target_in_flight);
//   - panic mode (Knative) starts when the panic window wants panic_threshold (200%) times
//     the ready replicas, and lasts until a whole stable window has passed without that;
//     in it the count follows the panic window and never goes down;
//   - otherwise, a stable load within `tolerance` (10%) of target x ready changes nothing
//     (HPA), else the count follows the stable window;
//   - up at once; down only to the highest count wanted during the last
//     scale_down_delay (HPA's stabilisation window, 300 s), and one replica per decision;
//   - always within [min, max].
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include "common/clock.h"
#include "spec/assembly.h"

namespace tarn::service {

class Autoscaler {
 public:
  struct Decision {
    int64_t desired = 0;
    int64_t current = 0;
    int64_t ready = 0;
    bool panic = false;
    bool has_readings = false;
    double stable_in_flight = 0;  // the windows' means
    double panic_in_flight = 0;
    int64_t wanted = 0;  // what the load alone asks for, before stabilisation and bounds
    // Why `desired` differs from `wanted`, or "" when it does not.
    std::string held;
    // "in flight 7.4 over 60 s, 9.1 over 6 s across 2 ready replicas; target 2 each: wants
    // 4", with the panic and what held it, for the component's events.
    std::string Describe() const;
  };

  Autoscaler(const spec::Autoscale& spec, const Clock& clock);

  // One reading at the clock's now: the requests in flight, summed over the ready replicas
  // (their average over the last scrape interval).
  void Observe(double in_flight);
  // The count for a component of `current` replicas, `ready` of them READY.
  Decision Decide(int64_t current, int64_t ready);

  const spec::Autoscale& spec() const { return spec_; }

 private:
  const spec::Autoscale spec_;
  const Clock& clock_;
  std::deque<std::pair<Clock::TimePoint, double>> readings_;  // the stable window's
  std::deque<std::pair<Clock::TimePoint, int64_t>> wanted_;   // scale_down_delay's
  bool panic_ = false;
  Clock::TimePoint panic_until_{};
};

}  // namespace tarn::service
