// Scheduler: decides where instances run on a set of nodes, for many users sharing queues.
//
// Requests (one instance each, or a gang placed all together or not at all) wait until
// Schedule() places them. Order of consideration: queues below their guaranteed share
// first (lowest share/guarantee first), then the others by lowest share; inside a queue,
// the highest priority first (YARN's application priority: the queue's
// default-application-priority unless the request says, never above its
// max-application-priority), then the user with the lowest dominant share (DRF), then the
// oldest request. A queue never goes past its maximum share. A request that does not fit is
// skipped so smaller work behind it runs, until the oldest waiting request of the highest
// priority has waited `reservation_after`: it then holds a reservation (as Slurm's backfill
// reserves for its top job) of nodes it will fit on, and later work of its priority or
// lower may use only what does not delay it, so a large gang is not starved by a stream of
// small requests. One request holds the reservation at a time.
//
// Preemption (preemption.cc): a request that still does not fit may take the place of
// running work: of lower priority in its own queue, or, while its queue is below its
// guarantee, of any priority in queues above theirs (YARN's guarantee reclaim, Kueue's
// reclaimWithinCohort). Victims are whole units (a gang, or one request), never from a
// disable_preemption queue, chosen as a minimal set: lowest priority first, then the least
// work lost (time since its last checkpoint, SetLastCheckpoint), then the most recently
// placed. The scheduler does not stop anything: TakePreemptions() tells the owner which
// units to stop, they stay placed until Release()d, and what they free is held for the
// preemptor, which is placed first once it fits. Infeasible work never preempts.
//
// GPUs are whole and exclusive, assigned by device index. Every request has a Decision a
// user can read: placed (node, GPU indices), pending (why, and whether it holds the
// reservation), preempting (whom, why) or infeasible (why it never can be).
//
// Pure and deterministic: no threads, no I/O, no randomness; the clock stamps submissions
// and placements. Not thread-safe: one owner thread calls everything.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "scheduler/queue_config.h"
#include "scheduler/resources.h"

namespace tarn::scheduler {

struct Request {
  std::string id;     // unique among live requests, e.g. "alice/fmnist/worker-0"
  std::string user;   // who is charged for it
  std::string queue;  // empty: "default"
  Resources resources;
  // Higher goes first within its queue. None: the queue's default-application-priority; one
  // above the queue's max-application-priority counts as that maximum (the API refuses such
  // a launch; a stored one meets a lowered maximum after a restart). A gang's members share
  // one.
  std::optional<int> priority = std::nullopt;
};

struct Placed {
  std::string node;
  std::vector<int> gpus;  // device indices on that node
};
struct Pending {
  std::string reason;
};
struct Infeasible {
  std::string reason;
};
// Pending on victims being stopped for it; placed the moment they have been released.
struct Preempt {
  std::vector<std::string> victims;  // request ids, whole units
  std::string reason;
};
using Decision = std::variant<Placed, Pending, Infeasible, Preempt>;

// One preemption decided by Schedule(): stop `victims` (request ids; every member of each
// victim unit) and Release() them; `preemptor` is placed once they are gone.
struct Preemption {
  std::string preemptor;                   // a single request's id, or a gang's name
  std::vector<std::string> preemptor_ids;  // its request ids
  int priority = 0;                        // the preemptor's
  std::vector<std::string> victims;
  std::string reason;  // for the victims' users: why they were chosen
};

struct Placement {
  std::string id;
  std::string node;
  std::vector<int> gpus;
};

// One user's part of a queue: what DRF orders the queue's users by (the smallest dominant
// share goes first).
struct UserUsage {
  std::string user;
  Resources used;
  double share = 0;    // dominant share of the cluster
  size_t pending = 0;  // requests (a gang counts once) waiting
};

struct QueueUsage {
  QueueConfig config;
  Resources used;
  double share = 0;  // dominant share of the cluster
  size_t pending = 0;
  std::vector<UserUsage> users;  // every user holding or waiting for something; by share
};

// A GPU of a node and the request (the instance key) that holds it; "" when free.
struct GpuHolder {
  int index = 0;
  std::string holder;
};

struct NodeUsage {
  std::string name;
  Resources capacity;
  Resources free;
  std::vector<int> free_gpus;
  std::vector<GpuHolder> gpus;  // every GPU, in the node's order
};

class Scheduler {
 public:
  struct Options {
    std::vector<NodeSpec> nodes;
    std::vector<QueueConfig> queues;  // from ParseQueues (includes "default")
    const Clock* clock = nullptr;     // required
    // How long the oldest pending request of the highest priority waits before it holds a
    // reservation.
    Clock::Duration reservation_after = std::chrono::seconds(60);
    bool preemption = true;  // false: pending work only ever waits
  };

  static StatusOr<std::unique_ptr<Scheduler>> Create(Options options);

  // Queues one request. Errors (not Decisions): duplicate id, unknown queue, an empty
  // resource vector. Who may submit to a queue is checked before, where the caller's
  // identity is known (the API).
  Status Submit(const Request& request);
  // Queues a gang: all members are placed in the same Schedule() call or none is. Members
  // share one user and queue.
  Status SubmitGang(const std::string& gang, const std::vector<Request>& members);

  // One scheduling pass: places every pending request it can, in the order above, and
  // returns the placements made.
  std::vector<Placement> Schedule();

  // The decision for a live request; NotFound for an unknown or released id.
  StatusOr<Decision> Get(const std::string& id) const;

  // The priority a request of `queue` asking for `asked` runs at: asked, else the queue's
  // default, never above the queue's maximum. NotFound for an unknown queue.
  StatusOr<int> EffectivePriority(const std::string& queue, std::optional<int> asked) const;

  // The request (a single request's id, or a gang's name) that holds the reservation now,
  // and what it reserves on which node; empty when none does.
  struct Reservation {
    std::string holder;
    std::vector<std::pair<std::string, Resources>> nodes;
  };
  Reservation CurrentReservation() const;

  // The preemptions the Schedule() calls since the last call decided, oldest first.
  std::vector<Preemption> TakePreemptions();

  // When the unit `id` belongs to last saved its work (a training checkpoint): at equal
  // priority, the victim that loses least goes first. Work lost is the time since the
  // later of this and its placement. Unknown ids are ignored.
  void SetLastCheckpoint(const std::string& id, Clock::TimePoint at);

  // Frees a placed request's resources, or withdraws a pending one; the id is forgotten.
  Status Release(const std::string& id);

  // Records a request as already placed (after a daemon restart, from the store). Fails
  // when the node or GPUs are unknown or already taken.
  Status Restore(const Request& request, const std::string& node, const std::vector<int>& gpus);

  std::vector<QueueUsage> Queues() const;
  std::vector<NodeUsage> Nodes() const;
  Resources total() const { return total_; }

 private:
  enum class State { kPending, kPlaced, kInfeasible };
  struct Task {
    std::string id;
    Resources resources;
    uint64_t unit = 0;
    State state = State::kPending;
    int node = -1;
    std::vector<int> gpus;
    std::string reason;
  };
  struct Unit {
    std::string gang;  // empty for a single request
    std::vector<std::string> tasks;
    Resources total;
    int queue = 0;
    std::string user;
    int priority = 0;
    Clock::TimePoint submitted;
    Clock::TimePoint placed_at{};
    std::optional<Clock::TimePoint> checkpoint;
    bool leaving = false;        // chosen as a victim; stays placed until released
    uint64_t preempt_tried = 0;  // changes_ when a victim search last failed for it
  };
  // What a preemptor waits for: its victims, and per node what it will take there, which
  // no other work may take meanwhile.
  struct Claim {
    std::vector<std::string> victims;
    std::vector<Resources> per_node;
    std::string reason;
  };
  struct UserInQueue {
    Resources used;
    std::map<uint64_t, bool> pending;  // unit seq -> (unused); ordered by age
  };
  struct QueueState {
    QueueConfig config;
    Resources used;
    std::unordered_map<std::string, UserInQueue> users;
    size_t pending_units = 0;
  };
  struct NodeState {
    NodeSpec spec;
    Resources free;
    std::vector<std::string> gpu_holder;  // per GPU: the task holding it, "" when free
  };

  explicit Scheduler(Options options);
  Status Validate(const Request& r, int* queue) const;
  std::string InfeasibleReason(const Resources& need, const QueueState& q) const;
  // The best node for `need` among what `held` (per node, may be null) leaves.
  int BestNode(const Resources& need, const std::vector<Resources>* held) const;
  // What unit `seq` may not take, per node: the reservation (for work of its holder's
  // priority or lower) and the other preemptors' claims. Empty when nothing is held.
  std::vector<Resources> HeldFor(uint64_t seq, const Unit& unit) const;
  // Chooses the request that holds the reservation for this pass and plans its nodes.
  void UpdateReservation();
  void ClearReservation();
  void Assign(Task& task, int node);
  void Unassign(Task& task);
  // Tries to place every task of the unit; on failure undoes it and returns the reason.
  bool TryPlace(Unit& unit, uint64_t seq, std::string* reason);
  std::string NoNodeReason(const Resources& need);
  // Per dimension, the most any one node has free. Recomputed after a change, on demand.
  const Resources& MaxFree();
  bool WithinMaximum(const QueueState& q, const Resources& extra) const;
  void SetReason(const Unit& unit, const std::string& reason);
  void Enqueue(uint64_t seq, Unit unit, std::vector<Task> tasks);
  // Accounts a placed unit to its queue and user, and lists its placements in `out`.
  void Commit(uint64_t seq, std::vector<Placement>* out);
  // preemption.cc: places the units holding claims whose victims have gone; then, for the
  // pending units that still do not fit, highest priority first, looks for victims.
  void PlaceClaimants(std::vector<Placement>* out);
  void Preempt();
  bool TryPreempt(uint64_t seq);
  void AssignExact(Task& task, int node, const std::vector<int>& gpus);
  std::string UnitName(const Unit& unit) const;

  const Clock& clock_;
  std::vector<NodeState> nodes_;
  std::unordered_map<std::string, int> node_index_;
  std::vector<QueueState> queues_;
  std::unordered_map<std::string, int> queue_index_;
  std::unordered_map<std::string, Task> tasks_;
  std::unordered_map<uint64_t, Unit> units_;
  uint64_t next_seq_ = 1;
  Resources total_;
  Resources largest_node_;  // per-dimension maxima of node capacities
  Resources max_free_;
  bool max_free_stale_ = true;
  Clock::Duration reservation_after_;
  uint64_t reserving_ = 0;           // the unit holding the reservation; 0: none
  std::vector<Resources> reserved_;  // per node: what that unit is planned to take there
  bool preemption_;
  std::map<uint64_t, Claim> claims_;  // by preemptor unit
  std::vector<Preemption> decided_;   // since the last TakePreemptions()
  uint64_t changes_ = 1;              // grows whenever what is placed or pending changes
};

}  // namespace tarn::scheduler
