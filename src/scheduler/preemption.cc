// Preemption: which running work a pending request may take the place of, and holding what
// it frees for that request (scheduler.h says the rules).
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "scheduler/scheduler.h"

namespace tarn::scheduler {
namespace {

constexpr double kShareSlack = 1e-9;  // as scheduler.cc's kEpsilon

std::string WholePercent(double share) {
  return std::to_string(static_cast<long>(std::lround(share * 100))) + "%";
}

}  // namespace

std::string Scheduler::UnitName(const Unit& unit) const {
  return unit.gang.empty() ? unit.tasks[0] : "gang " + unit.gang;
}

std::vector<Preemption> Scheduler::TakePreemptions() {
  std::vector<Preemption> out;
  out.swap(decided_);
  return out;
}

void Scheduler::SetLastCheckpoint(const std::string& id, Clock::TimePoint at) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return;
  Unit& unit = units_.at(it->second.unit);
  if (!unit.checkpoint || *unit.checkpoint < at) unit.checkpoint = at;
}

void Scheduler::AssignExact(Task& task, int node, const std::vector<int>& gpus) {
  NodeState& n = nodes_[node];
  n.free -= task.resources;
  max_free_stale_ = true;
  for (int index : gpus) {
    for (size_t g = 0; g < n.spec.gpus.size(); ++g) {
      if (n.spec.gpus[g].index == index) n.gpu_holder[g] = task.id;
    }
  }
  task.gpus = gpus;
  task.node = node;
  task.state = State::kPlaced;
}

void Scheduler::PlaceClaimants(std::vector<Placement>* out) {
  for (auto it = claims_.begin(); it != claims_.end();) {
    const uint64_t seq = it->first;
    Claim& claim = it->second;
    Unit& unit = units_.at(seq);
    std::string reason;
    if (TryPlace(unit, seq, &reason)) {
      Commit(seq, out);
      it = claims_.erase(it);
      continue;
    }
    const size_t left = std::count_if(claim.victims.begin(), claim.victims.end(),
                                      [&](const std::string& id) { return tasks_.count(id); });
    if (left == 0) {
      // Its victims are gone and it still does not fit (a node went away): it waits, or
      // preempts again, as any pending work.
      SetReason(unit, reason);
      it = claims_.erase(it);
      continue;
    }
    ++it;
  }
}

void Scheduler::Preempt() {
  if (!preemption_) return;
  // Who may take something: pending (not infeasible), within its queue's maximum, not
  // already waiting for victims; highest priority first, then the oldest.
  // Necessary conditions first, so that a pass with thousands of pending units that could
  // take nothing costs two scans: per queue, the lowest priority of the running work it may
  // give up, and whether any queue is above its guarantee (what reclaim takes from).
  std::vector<int> lowest(queues_.size(), std::numeric_limits<int>::max());
  for (const auto& [seq, unit] : units_) {
    if (unit.leaving || unit.tasks.empty() || queues_[unit.queue].config.disable_preemption) {
      continue;
    }
    if (tasks_.at(unit.tasks[0]).state != State::kPlaced) continue;
    lowest[unit.queue] = std::min(lowest[unit.queue], unit.priority);
  }
  bool any_above = false;
  for (const QueueState& q : queues_) {
    any_above |= !q.config.disable_preemption &&
                 DominantShare(q.used, total_) > q.config.guaranteed_share + kShareSlack;
  }
  std::vector<uint64_t> order;
  for (const auto& [seq, unit] : units_) {
    if (claims_.count(seq) || unit.preempt_tried == changes_ || unit.tasks.empty()) continue;
    if (tasks_.at(unit.tasks[0]).state != State::kPending) continue;
    const QueueState& q = queues_[unit.queue];
    const bool may_reclaim =
        any_above && q.config.guaranteed_share > 0 &&
        DominantShare(q.used + unit.total, total_) <= q.config.guaranteed_share + kShareSlack;
    if (unit.priority <= lowest[unit.queue] && !may_reclaim) continue;
    if (!WithinMaximum(q, unit.total)) continue;
    order.push_back(seq);
  }
  std::sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
    return std::make_tuple(-units_.at(a).priority, a) < std::make_tuple(-units_.at(b).priority, b);
  });
  for (uint64_t seq : order) {
    if (!TryPreempt(seq)) units_.at(seq).preempt_tried = changes_;
  }
}

bool Scheduler::TryPreempt(uint64_t seq) {
  Unit& unit = units_.at(seq);
  const QueueState& queue = queues_[unit.queue];
  // Per queue: what is leaving it (victims not yet released), and what preemptors of it
  // already claimed; a queue's share counts the first as gone and the second as held.
  std::vector<Resources> leaving(queues_.size()), claimed(queues_.size());
  for (const auto& [vs, v] : units_) {
    if (v.leaving) leaving[v.queue] += v.total;
  }
  for (const auto& [cs, claim] : claims_) claimed[units_.at(cs).queue] += units_.at(cs).total;
  // Below its guarantee even with this unit: it may reclaim from queues above theirs.
  const bool reclaim = queue.config.guaranteed_share > 0 &&
                       DominantShare(queue.used + claimed[unit.queue] + unit.total, total_) <=
                           queue.config.guaranteed_share + kShareSlack;
  const Clock::TimePoint now = clock_.Now();
  struct Candidate {
    uint64_t seq;
    int priority;
    Clock::Duration lost;  // since its last checkpoint (or its placement)
    Clock::TimePoint placed;
  };
  std::vector<Candidate> candidates;
  Resources could = Resources{};
  for (const auto& [vs, v] : units_) {
    if (vs == seq || v.leaving || v.tasks.empty()) continue;
    if (tasks_.at(v.tasks[0]).state != State::kPlaced) continue;
    const QueueState& vq = queues_[v.queue];
    if (vq.config.disable_preemption) continue;
    if (v.queue == unit.queue) {
      if (v.priority >= unit.priority) continue;
    } else if (!reclaim || DominantShare(vq.used - leaving[v.queue], total_) <=
                               vq.config.guaranteed_share + kShareSlack) {
      continue;
    }
    const Clock::TimePoint saved = std::max(v.placed_at, v.checkpoint.value_or(v.placed_at));
    candidates.push_back({vs, v.priority, now - saved, v.placed_at});
    could += v.total;
  }
  if (candidates.empty()) return false;
  for (const NodeState& n : nodes_) could += n.free;
  if (!could.Fits(unit.total)) return false;  // not even all of them would make room
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::make_tuple(a.priority, a.lost, b.placed, b.seq) <
           std::make_tuple(b.priority, b.lost, a.placed, a.seq);
  });

  // Simulates taking a victim out and putting it back exactly where it was.
  struct Out {
    uint64_t seq;
    std::vector<std::tuple<Task*, int, std::vector<int>>> where;
  };
  auto take_out = [&](uint64_t vs) {
    Out o{vs, {}};
    for (const std::string& id : units_.at(vs).tasks) {
      Task& t = tasks_.at(id);
      o.where.emplace_back(&t, t.node, t.gpus);
      Unassign(t);
    }
    return o;
  };
  auto put_back = [&](const Out& o) {
    for (const auto& [task, node, gpus] : o.where) AssignExact(*task, node, gpus);
  };
  std::vector<Resources> plan;
  auto fits = [&] {
    std::string unused;
    if (!TryPlace(unit, seq, &unused)) return false;
    plan.assign(nodes_.size(), Resources{});
    for (const std::string& id : unit.tasks) {
      Task& t = tasks_.at(id);
      plan[t.node] += t.resources;
      Unassign(t);
    }
    return true;
  };

  // Take victims out in order until the unit fits; a queue above its guarantee gives only
  // while it stays above it.
  std::vector<Resources> taken_from(queues_.size());
  std::vector<Out> chosen;
  bool room = false;
  for (const Candidate& c : candidates) {
    const Unit& v = units_.at(c.seq);
    if (v.queue != unit.queue) {
      const QueueState& vq = queues_[v.queue];
      if (DominantShare(vq.used - leaving[v.queue] - taken_from[v.queue], total_) <=
          vq.config.guaranteed_share + kShareSlack) {
        continue;
      }
    }
    taken_from[v.queue] += v.total;
    chosen.push_back(take_out(c.seq));
    if (fits()) {
      room = true;
      break;
    }
  }
  if (!room) {
    for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) put_back(*it);
    return false;
  }
  // Minimal: spare each victim, the most protected first, whose place the unit does not need.
  std::vector<bool> spared(chosen.size(), false);
  for (size_t k = chosen.size(); k-- > 0;) {
    put_back(chosen[k]);
    if (fits()) {
      spared[k] = true;
    } else {
      chosen[k] = take_out(chosen[k].seq);
    }
  }
  for (size_t k = chosen.size(); k-- > 0;) {
    if (!spared[k]) put_back(chosen[k]);
  }

  Preemption p;
  p.preemptor = unit.gang.empty() ? unit.tasks[0] : unit.gang;
  p.preemptor_ids = unit.tasks;
  p.priority = unit.priority;
  std::string names;
  bool lower = false, guarantee = false;
  for (size_t k = 0; k < chosen.size(); ++k) {
    if (spared[k]) continue;
    Unit& v = units_.at(chosen[k].seq);
    v.leaving = true;
    for (const std::string& id : v.tasks) p.victims.push_back(id);
    names += (names.empty() ? "" : ", ") + UnitName(v) + " (priority " +
             std::to_string(v.priority) + ")";
    (v.queue == unit.queue ? lower : guarantee) = true;
  }
  std::string why;
  if (lower)
    why = "lower priority than " + std::to_string(unit.priority) + " in queue " + queue.config.name;
  if (guarantee) {
    why += std::string(why.empty() ? "" : "; ") + "queue " + queue.config.name +
           " is below its guarantee (" + WholePercent(queue.config.guaranteed_share) +
           ") and takes back from queues above theirs";
  }
  p.reason = why;
  Claim claim;
  claim.victims = p.victims;
  claim.per_node = plan;
  claim.reason = "preempting " + names + ": " + why + "; placed the moment they have stopped";
  SetReason(unit, claim.reason);
  claims_.emplace(seq, std::move(claim));
  decided_.push_back(std::move(p));
  ++changes_;
  return true;
}

}  // namespace tarn::scheduler
