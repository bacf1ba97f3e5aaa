#include "scheduler/scheduler.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>

namespace tarn::scheduler {
namespace {

constexpr double kEpsilon = 1e-9;

// "50%", "37.5%": to a tenth of a percent, without trailing zeros.
std::string Percent(double share) {
  const long tenths = std::lround(share * 1000);
  std::string out = std::to_string(tenths / 10);
  if (tenths % 10 != 0) out += "." + std::to_string(tenths % 10);
  return out + "%";
}

}  // namespace

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(Options options) {
  if (options.clock == nullptr) return InvalidArgumentError("scheduler: a clock is required");
  std::unordered_map<std::string, bool> names;
  for (const NodeSpec& n : options.nodes) {
    if (n.name.empty()) return InvalidArgumentError("scheduler: a node has no name");
    if (!names.emplace(n.name, true).second) {
      return InvalidArgumentError("scheduler: node \"" + n.name + "\" is listed twice");
    }
    if (n.vcores < 0 || n.memory_mib < 0) {
      return InvalidArgumentError("scheduler: node \"" + n.name + "\" has negative resources");
    }
    std::vector<int> seen;
    for (const GpuDevice& g : n.gpus) {
      if (g.index < 0 || std::find(seen.begin(), seen.end(), g.index) != seen.end()) {
        return InvalidArgumentError("scheduler: node \"" + n.name +
                                    "\" has a duplicate or negative GPU index " +
                                    std::to_string(g.index));
      }
      seen.push_back(g.index);
    }
  }
  bool has_default = false;
  double guaranteed = 0;
  for (const QueueConfig& q : options.queues) {
    has_default |= q.name == "default";
    guaranteed += q.guaranteed_share;
  }
  if (!has_default) {  // as ParseQueues adds it: guaranteed what the others leave
    options.queues.push_back(
        QueueConfig{"default", guaranteed < 1 - 1e-9 ? 1 - guaranteed : 0, 1, {}, {}});
  }
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(options)));
}

Scheduler::Scheduler(Options options)
    : clock_(*options.clock),
      reservation_after_(options.reservation_after),
      preemption_(options.preemption) {
  for (NodeSpec& spec : options.nodes) {
    NodeState n;
    n.free = spec.capacity();
    n.gpu_holder.assign(spec.gpus.size(), "");
    total_ += n.free;
    largest_node_.vcores = std::max(largest_node_.vcores, n.free.vcores);
    largest_node_.memory_mib = std::max(largest_node_.memory_mib, n.free.memory_mib);
    largest_node_.gpus = std::max(largest_node_.gpus, n.free.gpus);
    n.spec = std::move(spec);
    node_index_[n.spec.name] = static_cast<int>(nodes_.size());
    nodes_.push_back(std::move(n));
  }
  for (QueueConfig& q : options.queues) {
    queue_index_[q.name] = static_cast<int>(queues_.size());
    queues_.push_back(QueueState{std::move(q), {}, {}, 0});
  }
  reserved_.assign(nodes_.size(), Resources{});
}

StatusOr<int> Scheduler::EffectivePriority(const std::string& queue,
                                           std::optional<int> asked) const {
  const std::string& name = queue.empty() ? std::string("default") : queue;
  auto it = queue_index_.find(name);
  if (it == queue_index_.end()) return NotFoundError("queue \"" + name + "\" does not exist");
  return queues_[it->second].config.PriorityFor(asked);
}

Status Scheduler::Validate(const Request& r, int* queue) const {
  if (r.id.empty()) return InvalidArgumentError("a request needs an id");
  if (tasks_.count(r.id)) return AlreadyExistsError("request \"" + r.id + "\" already exists");
  if (r.user.empty()) return InvalidArgumentError("request \"" + r.id + "\" has no user");
  const std::string& name = r.queue.empty() ? std::string("default") : r.queue;
  auto it = queue_index_.find(name);
  if (it == queue_index_.end()) return NotFoundError("queue \"" + name + "\" does not exist");
  const Resources& need = r.resources;
  if (need.vcores < 0 || need.memory_mib < 0 || need.gpus < 0 ||
      (need.vcores == 0 && need.memory_mib == 0 && need.gpus == 0)) {
    return InvalidArgumentError("request \"" + r.id + "\" asks for no resources");
  }
  *queue = it->second;
  return OkStatus();
}

std::string Scheduler::InfeasibleReason(const Resources& need, const QueueState& q) const {
  if (q.config.maximum_share >= 1) return "";  // capped by the cluster alone
  Resources cap{static_cast<int64_t>(q.config.maximum_share * total_.vcores + kEpsilon),
                static_cast<int64_t>(q.config.maximum_share * total_.memory_mib + kEpsilon),
                static_cast<int64_t>(q.config.maximum_share * total_.gpus + kEpsilon)};
  if (!cap.Fits(need)) {
    return "needs " + ToString(need) + ", more than queue " + q.config.name + "'s maximum share (" +
           Percent(q.config.maximum_share) + " of the cluster: " + ToString(cap) + ")";
  }
  return "";
}

const Resources& Scheduler::MaxFree() {
  if (max_free_stale_) {
    max_free_ = Resources{};
    for (const NodeState& n : nodes_) {
      max_free_.vcores = std::max(max_free_.vcores, n.free.vcores);
      max_free_.memory_mib = std::max(max_free_.memory_mib, n.free.memory_mib);
      max_free_.gpus = std::max(max_free_.gpus, n.free.gpus);
    }
    max_free_stale_ = false;
  }
  return max_free_;
}

std::string Scheduler::NoNodeReason(const Resources& need) {
  const Resources& max_free = MaxFree();
  if (need.gpus > max_free.gpus) {
    return "needs " + std::to_string(need.gpus) + (need.gpus == 1 ? " GPU" : " GPUs") +
           " on one node, at most " + std::to_string(max_free.gpus) + " free on any node";
  }
  if (need.vcores > max_free.vcores) {
    return "needs " + std::to_string(need.vcores) + " vcores on one node, at most " +
           std::to_string(max_free.vcores) + " free on any node";
  }
  if (need.memory_mib > max_free.memory_mib) {
    return "needs " + std::to_string(need.memory_mib) + " MiB on one node, at most " +
           std::to_string(max_free.memory_mib) + " free on any node";
  }
  return "no node has " + ToString(need) + " free at once";
}

void Scheduler::Enqueue(uint64_t seq, Unit unit, std::vector<Task> tasks) {
  QueueState& q = queues_[unit.queue];
  std::string infeasible;
  for (Task& t : tasks) {
    bool fits_a_node = std::any_of(nodes_.begin(), nodes_.end(), [&](const NodeState& n) {
      return n.spec.capacity().Fits(t.resources);
    });
    if (!fits_a_node) {
      infeasible = "no node is large enough for " + ToString(t.resources) +
                   " (largest: " + ToString(largest_node_) + ")";
      if (!unit.gang.empty()) infeasible = "gang member " + t.id + " " + infeasible;
      break;
    }
  }
  if (infeasible.empty()) infeasible = InfeasibleReason(unit.total, q);
  if (infeasible.empty() && !total_.Fits(unit.total)) {
    infeasible = "gang " + unit.gang + " needs " + ToString(unit.total) +
                 ", more than the whole cluster (" + ToString(total_) + ")";
  }
  for (Task& t : tasks) {
    t.unit = seq;
    if (!infeasible.empty()) {
      t.state = State::kInfeasible;
      t.reason = infeasible;
    } else {
      t.reason = "waiting for the next scheduling pass";
    }
    unit.tasks.push_back(t.id);
    tasks_.emplace(t.id, std::move(t));
  }
  if (infeasible.empty()) {
    q.users[unit.user].pending.emplace(seq, true);
    ++q.pending_units;
  }
  ++changes_;
  units_.emplace(seq, std::move(unit));
}

Status Scheduler::Submit(const Request& request) {
  int queue = 0;
  RETURN_IF_ERROR(Validate(request, &queue));
  Unit unit;
  unit.total = request.resources;
  unit.queue = queue;
  unit.user = request.user;
  unit.priority = queues_[queue].config.PriorityFor(request.priority);
  unit.submitted = clock_.Now();
  std::vector<Task> tasks(1);
  tasks[0].id = request.id;
  tasks[0].resources = request.resources;
  Enqueue(next_seq_++, std::move(unit), std::move(tasks));
  return OkStatus();
}

Status Scheduler::SubmitGang(const std::string& gang, const std::vector<Request>& members) {
  if (gang.empty()) return InvalidArgumentError("a gang needs a name");
  if (members.empty()) return InvalidArgumentError("gang \"" + gang + "\" has no members");
  Unit unit;
  unit.gang = gang;
  unit.user = members[0].user;
  unit.submitted = clock_.Now();
  std::vector<Task> tasks;
  std::unordered_map<std::string, bool> ids;
  for (const Request& r : members) {
    int queue = 0;
    RETURN_IF_ERROR(Validate(r, &queue).WithContext("gang \"" + gang + "\""));
    if (!ids.emplace(r.id, true).second) {
      return InvalidArgumentError("gang \"" + gang + "\" lists \"" + r.id + "\" twice");
    }
    if (r.user != unit.user || (!tasks.empty() && queue != unit.queue)) {
      return InvalidArgumentError("gang \"" + gang +
                                  "\": every member must have the same user and queue");
    }
    if (r.priority != members[0].priority) {
      return InvalidArgumentError("gang \"" + gang +
                                  "\": every member must have the same priority");
    }
    unit.queue = queue;
    unit.priority = queues_[queue].config.PriorityFor(r.priority);
    unit.total += r.resources;
    Task t;
    t.id = r.id;
    t.resources = r.resources;
    tasks.push_back(std::move(t));
  }
  Enqueue(next_seq_++, std::move(unit), std::move(tasks));
  return OkStatus();
}

bool Scheduler::WithinMaximum(const QueueState& q, const Resources& extra) const {
  if (q.config.maximum_share >= 1) return true;  // the cluster's own size is the only cap
  Resources after = q.used + extra;
  double max = q.config.maximum_share + kEpsilon;
  if (total_.vcores > 0 && double(after.vcores) / double(total_.vcores) > max) return false;
  if (total_.memory_mib > 0 && double(after.memory_mib) / double(total_.memory_mib) > max) {
    return false;
  }
  if (total_.gpus > 0 && double(after.gpus) / double(total_.gpus) > max) return false;
  return true;
}

int Scheduler::BestNode(const Resources& need, const std::vector<Resources>* held) const {
  // Best fit: the node left with the fewest free GPUs, then vcores, then memory. GPU work
  // packs onto nodes already in use, and CPU-only work prefers nodes whose GPUs are taken,
  // which keeps whole GPU nodes free for large GPU requests.
  int best = -1;
  std::tuple<int64_t, int64_t, int64_t> best_score{};
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Resources f = nodes_[i].free;
    if (held != nullptr) {  // what is held for others leaves, none below zero
      f -= (*held)[i];
      f = {std::max<int64_t>(f.vcores, 0), std::max<int64_t>(f.memory_mib, 0),
           std::max<int64_t>(f.gpus, 0)};
    }
    if (!f.Fits(need)) continue;
    std::tuple<int64_t, int64_t, int64_t> score{f.gpus - need.gpus, f.vcores - need.vcores,
                                                f.memory_mib - need.memory_mib};
    if (best < 0 || score < best_score) {
      best = static_cast<int>(i);
      best_score = score;
    }
  }
  return best;
}

void Scheduler::Assign(Task& task, int node) {
  NodeState& n = nodes_[node];
  n.free -= task.resources;
  max_free_stale_ = true;
  task.gpus.clear();
  for (size_t g = 0;
       g < n.gpu_holder.size() && static_cast<int64_t>(task.gpus.size()) < task.resources.gpus;
       ++g) {
    if (n.gpu_holder[g].empty()) {
      n.gpu_holder[g] = task.id;
      task.gpus.push_back(n.spec.gpus[g].index);
    }
  }
  task.node = node;
  task.state = State::kPlaced;
  task.reason.clear();
}

void Scheduler::Unassign(Task& task) {
  NodeState& n = nodes_[task.node];
  n.free += task.resources;
  max_free_stale_ = true;
  for (int index : task.gpus) {
    for (size_t g = 0; g < n.spec.gpus.size(); ++g) {
      if (n.spec.gpus[g].index == index) n.gpu_holder[g].clear();
    }
  }
  task.gpus.clear();
  task.node = -1;
  task.state = State::kPending;
}

std::vector<Resources> Scheduler::HeldFor(uint64_t seq, const Unit& unit) const {
  std::vector<Resources> held;
  // The reservation holds back work of its holder's priority or lower; more urgent work
  // goes first anyway. A preemptor's claim holds back everyone else.
  if (reserving_ != 0 && seq != reserving_ && unit.priority <= units_.at(reserving_).priority) {
    held = reserved_;
  }
  // A claim holds what its victims have already freed: its plan less what they still hold.
  for (const auto& [claimant, claim] : claims_) {
    if (claimant == seq) continue;
    if (held.empty()) held.assign(nodes_.size(), Resources{});
    std::vector<Resources> still(nodes_.size());
    for (const std::string& id : claim.victims) {
      auto t = tasks_.find(id);
      if (t != tasks_.end() && t->second.state == State::kPlaced) {
        still[t->second.node] += t->second.resources;
      }
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const Resources left = claim.per_node[i] - still[i];
      held[i] += Resources{std::max<int64_t>(left.vcores, 0), std::max<int64_t>(left.memory_mib, 0),
                           std::max<int64_t>(left.gpus, 0)};
    }
  }
  return held;
}

bool Scheduler::TryPlace(Unit& unit, uint64_t seq, std::string* reason) {
  const std::vector<Resources> held = HeldFor(seq, unit);
  const std::vector<Resources>* others = held.empty() ? nullptr : &held;
  std::vector<Task*> placed;
  for (const std::string& id : unit.tasks) {
    Task& t = tasks_.at(id);
    int node = MaxFree().Fits(t.resources) ? BestNode(t.resources, others) : -1;
    if (node < 0) {
      *reason = NoNodeReason(t.resources);
      if (others && MaxFree().Fits(t.resources) && BestNode(t.resources, nullptr) >= 0) {
        const bool reserved =
            reserving_ != 0 && seq != reserving_ && unit.priority <= units_.at(reserving_).priority;
        *reason = "what is free for " + ToString(t.resources) +
                  (reserved ? " is reserved for " + UnitName(units_.at(reserving_)) +
                                  ", which has waited longest at the highest priority (later "
                                  "work may use only what does not delay it)"
                            : " is held for work that preempted other work to run (it is "
                              "placed the moment that work has stopped)");
      }
      if (!unit.gang.empty()) {
        *reason = "gang " + unit.gang + " (" + std::to_string(unit.tasks.size()) +
                  " instances) does not fit all at once: with " + std::to_string(placed.size()) +
                  " placed, " + t.id + " " + *reason;
      }
      for (Task* p : placed) Unassign(*p);
      return false;
    }
    Assign(t, node);
    placed.push_back(&t);
  }
  return true;
}

void Scheduler::SetReason(const Unit& unit, const std::string& reason) {
  for (const std::string& id : unit.tasks) tasks_.at(id).reason = reason;
}

void Scheduler::ClearReservation() {
  reserving_ = 0;
  reserved_.assign(nodes_.size(), Resources{});
}

void Scheduler::UpdateReservation() {
  // The candidate: pending, within its queue's maximum, waited at least reservation_after;
  // the highest priority, then the oldest.
  const Clock::TimePoint now = clock_.Now();
  uint64_t best = 0;
  for (const QueueState& q : queues_) {
    for (const auto& [user, uq] : q.users) {
      for (const auto& [seq, unused] : uq.pending) {
        const Unit& u = units_.at(seq);
        if (now - u.submitted < reservation_after_ || !WithinMaximum(q, u.total)) continue;
        if (best == 0) {
          best = seq;
          continue;
        }
        const Unit& b = units_.at(best);
        if (u.priority > b.priority || (u.priority == b.priority && seq < best)) best = seq;
      }
    }
  }
  if (best == reserving_) return;
  ClearReservation();
  if (best == 0) return;
  // Its plan: each task on the node with the most free (GPUs, then vcores, then memory)
  // among those whose capacity still holds it beside the tasks planned there before.
  const Unit& unit = units_.at(best);
  std::vector<Resources> planned(nodes_.size());
  for (const std::string& id : unit.tasks) {
    const Task& t = tasks_.at(id);
    int chosen = -1;
    std::tuple<int64_t, int64_t, int64_t> most{};
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!(nodes_[i].spec.capacity() - planned[i]).Fits(t.resources)) continue;
      const Resources f = nodes_[i].free - planned[i];
      std::tuple<int64_t, int64_t, int64_t> score{f.gpus, f.vcores, f.memory_mib};
      if (chosen < 0 || score > most) {
        chosen = static_cast<int>(i);
        most = score;
      }
    }
    if (chosen < 0) return;  // its tasks never fit side by side: nothing to reserve
    planned[chosen] += t.resources;
  }
  reserving_ = best;
  reserved_ = std::move(planned);
}

Scheduler::Reservation Scheduler::CurrentReservation() const {
  Reservation r;
  if (reserving_ == 0) return r;
  const Unit& u = units_.at(reserving_);
  r.holder = u.gang.empty() ? u.tasks[0] : u.gang;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!(reserved_[i] == Resources{})) r.nodes.emplace_back(nodes_[i].spec.name, reserved_[i]);
  }
  return r;
}

void Scheduler::Commit(uint64_t seq, std::vector<Placement>* out) {
  Unit& unit = units_.at(seq);
  QueueState& q = queues_[unit.queue];
  UserInQueue& uq = q.users[unit.user];
  for (const std::string& id : unit.tasks) {
    const Task& t = tasks_.at(id);
    out->push_back({t.id, nodes_[t.node].spec.name, t.gpus});
  }
  q.used += unit.total;
  uq.used += unit.total;
  uq.pending.erase(seq);
  --q.pending_units;
  unit.placed_at = clock_.Now();
  ++changes_;
}

std::vector<Placement> Scheduler::Schedule() {
  std::vector<Placement> out;
  auto commit = [&](uint64_t seq) { Commit(seq, &out); };

  // Work that preempted other work goes first, the moment what it claimed is free.
  PlaceClaimants(&out);
  // Then the reservation's holder, placed the moment it fits.
  UpdateReservation();
  if (reserving_ != 0) {
    Unit& unit = units_.at(reserving_);
    std::string reason;
    if (TryPlace(unit, reserving_, &reason)) {
      commit(reserving_);
      ClearReservation();
    } else {
      std::string where;
      for (const auto& [node, held] : CurrentReservation().nodes) {
        where += (where.empty() ? "" : "; ") + node + ": " + ToString(held);
      }
      const auto waited =
          std::chrono::duration_cast<std::chrono::seconds>(clock_.Now() - unit.submitted);
      SetReason(unit, reason + "; holds the reservation (waited " + std::to_string(waited.count()) +
                          " s, the longest at priority " + std::to_string(unit.priority) +
                          "): " + where + ", which later work may not take");
    }
  }

  // Per queue, the users with work to try in this pass and where each stands.
  struct UserCursor {
    int priority;  // of its next unit
    double share;
    uint64_t oldest;
    std::string user;
    std::vector<uint64_t> units;  // pending units, highest priority first, then oldest
    size_t next = 0;
  };
  auto user_after = [](const UserCursor* a, const UserCursor* b) {
    return std::make_tuple(-a->priority, a->share, a->oldest, std::cref(a->user)) >
           std::make_tuple(-b->priority, b->share, b->oldest, std::cref(b->user));
  };
  using UserHeap = std::priority_queue<UserCursor*, std::vector<UserCursor*>, decltype(user_after)>;
  std::vector<std::vector<std::unique_ptr<UserCursor>>> cursors(queues_.size());
  std::vector<UserHeap> user_heaps;
  user_heaps.reserve(queues_.size());
  for (size_t qi = 0; qi < queues_.size(); ++qi) {
    user_heaps.emplace_back(user_after);
    for (auto& [name, u] : queues_[qi].users) {
      if (u.pending.empty()) continue;
      auto c = std::make_unique<UserCursor>();
      c->share = DominantShare(u.used, total_);
      c->oldest = u.pending.begin()->first;
      c->user = name;
      for (const auto& [seq, unused] : u.pending) c->units.push_back(seq);
      std::stable_sort(c->units.begin(), c->units.end(), [&](uint64_t a, uint64_t b) {
        return units_.at(a).priority > units_.at(b).priority;
      });
      c->priority = units_.at(c->units[0]).priority;
      user_heaps[qi].push(c.get());
      cursors[qi].push_back(std::move(c));
    }
  }
  auto queue_key = [&](int qi) {
    const QueueState& q = queues_[qi];
    double share = DominantShare(q.used, total_);
    bool below = share + kEpsilon < q.config.guaranteed_share;
    return std::make_tuple(below ? 0 : 1, below ? share / q.config.guaranteed_share : share, qi);
  };
  using QueueKey = decltype(queue_key(0));
  std::priority_queue<QueueKey, std::vector<QueueKey>, std::greater<>> queue_heap;
  for (size_t qi = 0; qi < queues_.size(); ++qi) {
    if (!user_heaps[qi].empty()) queue_heap.push(queue_key(static_cast<int>(qi)));
  }

  while (!queue_heap.empty()) {
    int qi = std::get<2>(queue_heap.top());
    queue_heap.pop();
    QueueState& q = queues_[qi];
    UserHeap& users = user_heaps[qi];
    bool placed_one = false;
    while (!users.empty() && !placed_one) {
      UserCursor* c = users.top();
      users.pop();
      UserInQueue& uq = q.users[c->user];
      for (; c->next < c->units.size(); ++c->next) {
        uint64_t seq = c->units[c->next];
        if (seq == reserving_ || claims_.count(seq)) continue;  // tried first, above
        Unit& unit = units_.at(seq);
        if (!WithinMaximum(q, unit.total)) {
          SetReason(unit, "queue " + q.config.name + " holds " +
                              Percent(DominantShare(q.used, total_)) + " of the cluster; " +
                              ToString(unit.total) + " more would take it past its maximum " +
                              "share (" + Percent(q.config.maximum_share) + ")");
          continue;
        }
        std::string reason;
        if (!TryPlace(unit, seq, &reason)) {
          SetReason(unit, reason);
          continue;
        }
        commit(seq);
        ++c->next;
        placed_one = true;
        break;
      }
      if (placed_one && c->next < c->units.size()) {
        c->share = DominantShare(uq.used, total_);
        c->priority = units_.at(c->units[c->next]).priority;
        users.push(c);
      }
    }
    if (!users.empty()) queue_heap.push(queue_key(qi));
  }
  // What still does not fit may take the place of running work.
  Preempt();
  return out;
}

StatusOr<Decision> Scheduler::Get(const std::string& id) const {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return NotFoundError("no request \"" + id + "\"");
  const Task& t = it->second;
  switch (t.state) {
    case State::kPlaced:
      return Decision(Placed{nodes_[t.node].spec.name, t.gpus});
    case State::kInfeasible:
      return Decision(Infeasible{t.reason});
    case State::kPending:
      break;
  }
  if (auto claim = claims_.find(t.unit); claim != claims_.end()) {
    return Decision(scheduler::Preempt{claim->second.victims, claim->second.reason});
  }
  return Decision(Pending{t.reason});
}

Status Scheduler::Release(const std::string& id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return NotFoundError("no request \"" + id + "\"");
  Task& t = it->second;
  Unit& unit = units_.at(t.unit);
  QueueState& q = queues_[unit.queue];
  UserInQueue& uq = q.users[unit.user];
  if (t.state == State::kPlaced) {
    q.used -= t.resources;
    uq.used -= t.resources;
    Unassign(t);
  } else if (t.state == State::kPending) {
    // Withdrawing a member shrinks its gang; the rest still go together.
    unit.total -= t.resources;
  }
  uint64_t seq = t.unit;
  unit.tasks.erase(std::find(unit.tasks.begin(), unit.tasks.end(), id));
  tasks_.erase(it);
  ++changes_;
  if (seq == reserving_) ClearReservation();  // a smaller gang plans anew next pass
  if (unit.tasks.empty()) {
    if (uq.pending.erase(seq)) --q.pending_units;
    if (uq.pending.empty() && uq.used == Resources{}) q.users.erase(unit.user);  // uq dies here
    claims_.erase(seq);  // withdrawn while its victims stop: they stop anyway
    units_.erase(seq);   // and unit here
  }
  return OkStatus();
}

Status Scheduler::Restore(const Request& request, const std::string& node,
                          const std::vector<int>& gpus) {
  int queue = 0;
  RETURN_IF_ERROR(Validate(request, &queue));
  auto ni = node_index_.find(node);
  if (ni == node_index_.end()) return NotFoundError("no node \"" + node + "\"");
  NodeState& n = nodes_[ni->second];
  if (static_cast<int64_t>(gpus.size()) != request.resources.gpus) {
    return InvalidArgumentError("request \"" + request.id + "\" asks for " +
                                std::to_string(request.resources.gpus) + " GPUs but holds " +
                                std::to_string(gpus.size()));
  }
  if (!n.free.Fits(request.resources)) {
    return ResourceExhaustedError("node \"" + node + "\" has no room for \"" + request.id + "\"");
  }
  std::vector<size_t> slots;
  for (int index : gpus) {
    size_t g = 0;
    while (g < n.spec.gpus.size() && n.spec.gpus[g].index != index) ++g;
    if (g == n.spec.gpus.size() || !n.gpu_holder[g].empty() ||
        std::find(slots.begin(), slots.end(), g) != slots.end()) {
      return FailedPreconditionError("GPU " + std::to_string(index) + " of node \"" + node +
                                     "\" is unknown or already taken");
    }
    slots.push_back(g);
  }
  Unit unit;
  unit.total = request.resources;
  unit.queue = queue;
  unit.user = request.user;
  unit.priority = queues_[queue].config.PriorityFor(request.priority);
  unit.submitted = clock_.Now();
  unit.placed_at = unit.submitted;
  uint64_t seq = next_seq_++;
  ++changes_;
  Task t;
  t.id = request.id;
  t.resources = request.resources;
  t.unit = seq;
  t.state = State::kPlaced;
  t.node = ni->second;
  t.gpus = gpus;
  n.free -= request.resources;
  max_free_stale_ = true;
  for (size_t g : slots) n.gpu_holder[g] = request.id;
  unit.tasks.push_back(t.id);
  QueueState& q = queues_[queue];
  q.used += request.resources;
  q.users[request.user].used += request.resources;
  tasks_.emplace(t.id, std::move(t));
  units_.emplace(seq, std::move(unit));
  return OkStatus();
}

std::vector<QueueUsage> Scheduler::Queues() const {
  std::vector<QueueUsage> out;
  for (const QueueState& q : queues_) {
    QueueUsage u{q.config, q.used, DominantShare(q.used, total_), q.pending_units, {}};
    for (const auto& [user, uq] : q.users) {
      u.users.push_back({user, uq.used, DominantShare(uq.used, total_), uq.pending.size()});
    }
    std::sort(u.users.begin(), u.users.end(), [](const UserUsage& a, const UserUsage& b) {
      return a.share != b.share ? a.share > b.share : a.user < b.user;
    });
    out.push_back(std::move(u));
  }
  return out;
}

std::vector<NodeUsage> Scheduler::Nodes() const {
  std::vector<NodeUsage> out;
  for (const NodeState& n : nodes_) {
    NodeUsage u{n.spec.name, n.spec.capacity(), n.free, {}, {}};
    for (size_t g = 0; g < n.gpu_holder.size(); ++g) {
      if (n.gpu_holder[g].empty()) u.free_gpus.push_back(n.spec.gpus[g].index);
      u.gpus.push_back({n.spec.gpus[g].index, n.gpu_holder[g]});
    }
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace tarn::scheduler
