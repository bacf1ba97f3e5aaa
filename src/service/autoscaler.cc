#include "service/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tarn::service {

namespace {

// ceil(load / target) without counting a rounding error as one more replica.
int64_t Wanted(double load, double target) {
  return static_cast<int64_t>(std::ceil(load / target - 1e-9));
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

std::string Autoscaler::Decision::Describe() const {
  if (!has_readings) return "no load readings yet: " + std::to_string(desired) + " replicas";
  std::string out = "in flight " + Number(stable_in_flight) + " over the stable window, " +
                    Number(panic_in_flight) + " over the panic window, across " +
                    std::to_string(ready) + " ready replica" + (ready == 1 ? "" : "s") +
                    ": wants " + std::to_string(wanted);
  if (panic) out += " (panic mode)";
  if (!held.empty()) out += "; " + held;
  return out + "; " + std::to_string(current) + " -> " + std::to_string(desired);
}

Autoscaler::Autoscaler(const spec::Autoscale& spec, const Clock& clock)
    : spec_(spec), clock_(clock) {}

void Autoscaler::Observe(double in_flight) {
  readings_.emplace_back(clock_.Now(), std::max(0.0, in_flight));
}

Autoscaler::Decision Autoscaler::Decide(int64_t current, int64_t ready) {
  const Clock::TimePoint now = clock_.Now();
  const auto stable_window = std::chrono::seconds(spec_.stable_window_secs);
  const auto panic_window = std::chrono::seconds(spec_.panic_window_secs);
  while (!readings_.empty() && readings_.front().first <= now - stable_window) {
    readings_.pop_front();
  }
  Decision d;
  d.current = current;
  d.ready = ready;
  const int64_t bounded = std::clamp(current, spec_.min, spec_.max);
  if (readings_.empty()) {
    d.desired = d.wanted = bounded;
    return d;
  }
  d.has_readings = true;
  double stable_sum = 0, panic_sum = 0;
  int panic_n = 0;
  for (const auto& [t, v] : readings_) {
    stable_sum += v;
    if (t > now - panic_window) panic_sum += v, ++panic_n;
  }
  d.stable_in_flight = stable_sum / static_cast<double>(readings_.size());
  d.panic_in_flight = panic_n > 0 ? panic_sum / panic_n : d.stable_in_flight;
  const int64_t want_stable = Wanted(d.stable_in_flight, spec_.target_in_flight);
  const int64_t want_panic = Wanted(d.panic_in_flight, spec_.target_in_flight);
  const double base = static_cast<double>(std::max<int64_t>(ready, 1));

  if (static_cast<double>(want_panic) / base >= spec_.panic_threshold) {
    panic_ = true;
    panic_until_ = now + stable_window;
  } else if (panic_ && now >= panic_until_) {
    panic_ = false;
  }
  d.panic = panic_;

  int64_t want = want_stable;
  if (panic_) {
    want = std::max(current, want_panic);
    if (want_panic < current) d.held = "no scale-down in panic mode";
  } else if (ready > 0 && std::abs(d.stable_in_flight / (spec_.target_in_flight * base) - 1) <=
                              spec_.tolerance) {
    want = current;
    d.held = "within the " + Number(spec_.tolerance * 100) + "% tolerance of the target";
  }
  d.wanted = want_stable;
  if (panic_) d.wanted = want_panic;

  // HPA's stabilisation: down only to the highest count wanted within the delay.
  wanted_.emplace_back(now, want);
  while (!wanted_.empty() &&
         wanted_.front().first < now - std::chrono::seconds(spec_.scale_down_delay_secs)) {
    wanted_.pop_front();
  }
  int64_t highest = want;
  for (const auto& [t, w] : wanted_) highest = std::max(highest, w);

  int64_t desired = current;
  if (want > current) {
    desired = want;
  } else if (highest < current) {
    desired = current - 1;  // one at a time
    if (highest < current - 1) d.held = "one replica at a time";
  } else if (want < current) {
    d.held = "holding for the " + std::to_string(spec_.scale_down_delay_secs) +
             " s scale-down delay (wanted " + std::to_string(highest) + " within it)";
  }
  d.desired = std::clamp(desired, spec_.min, spec_.max);
  if (desired > spec_.max) d.held = "at tarn.autoscale.max " + std::to_string(spec_.max);
  if (desired < spec_.min) d.held = "at tarn.autoscale.min " + std::to_string(spec_.min);
  return d;
}

}  // namespace tarn::service
