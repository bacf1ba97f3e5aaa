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
// small requests. One request
// holds the reservation at a time. No preemption yet. GPUs are whole and exclusive,
// assigned by device index. Every request has a Decision a user can read: placed (node,
// GPU indices), pending (why, and whether it holds the reservation), or infeasible (why it
// never can be).
//
// Pure and deterministic: no threads, no I/O, no randomness; the clock only stamps
// submissions. Not thread-safe: one owner thread calls everything.
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
using Decision = std::variant<Placed, Pending, Infeasible>;

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
  // The best node for `need`; with `others` true, only what the reservation leaves.
  int BestNode(const Resources& need, bool others) const;
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
};

}  // namespace tarn::scheduler
