// Manager::Impl's autoscaling (manager_impl.h): every autoscale_interval, each autoscaled
// component of a running assembly gets a reading of its ready replicas' load and a decision
// (service/autoscaler.h), and a new count is stored like a flex, with an AUTOSCALE event that
// gives the inputs. Down only while every replica is READY and none is still stopping, so
// replicas go one at a time and each drains (its stop's SIGTERM) before the next.
#include <algorithm>

#include "service/manager_impl.h"

namespace tarn::service {

namespace {

// The component is steady: every instance READY, none starting, stopping or leaving.
bool Steady(const Manager::Impl::Comp& c) {
  for (const auto& [idx, i] : c.instances) {
    if (i.remove || i.phase != Manager::Impl::Phase::kRunning || !i.ready) return false;
  }
  return true;
}

}  // namespace

void Manager::Impl::Autoscale(Asm& a) {
  if (a.rec.desired_state != kDesiredStarted || a.rec.state == kFailed ||
      a.rec.state == kSucceeded || a.upgrade) {
    return;  // an upgrade keeps the counts: autoscaling goes on once it is over
  }
  const Clock::TimePoint now = clock.Now();
  for (Comp& c : a.comps) {
    if (!c.autoscaler || now < c.next_autoscale) continue;
    c.next_autoscale = now + options.autoscale_interval;
    const spec::Component& cs = CompSpec(a, c);
    int64_t ready = 0;
    double load = 0;
    bool read = false;
    for (const auto& [idx, i] : c.instances) {
      if (i.remove || i.phase != Phase::kRunning || !i.ready) continue;
      ++ready;
      if (!options.in_flight) continue;
      if (std::optional<double> v = options.in_flight(i.ref.Key())) {
        load += *v;
        read = true;
      }
    }
    if (read) c.autoscaler->Observe(load);
    const int64_t current = cs.number_of_containers;
    Autoscaler::Decision d = c.autoscaler->Decide(current, ready);
    if (d.desired == current || (d.desired < current && !Steady(c))) continue;
    Status s = SetCount(a, c, d.desired, "AUTOSCALE", d.Describe());
    if (!s.ok()) {
      AddEvent(a, cs.name, "", "AUTOSCALE",
               "wanted " + std::to_string(d.desired) +
                   " replicas and could not store it: " + s.message());
    }
  }
}

std::optional<Clock::TimePoint> Manager::Impl::NextAutoscale(const Asm& a) const {
  if (a.rec.desired_state != kDesiredStarted) return std::nullopt;
  std::optional<Clock::TimePoint> next;
  for (const Comp& c : a.comps) {
    if (c.autoscaler && (!next || c.next_autoscale < *next)) next = c.next_autoscale;
  }
  return next;
}

}  // namespace tarn::service
