// StateSnapshot: what the API's readers see of the Manager, without waiting for the service
// loop. The loop publishes a new one after each round of work (commands, backend events,
// deadlines) and before it acknowledges a command, so a read never sees half a change, and
// a client that got its write acknowledged reads it back. A snapshot is immutable once
// published; readers hold it through a shared_ptr while they answer.
//
// The JSON of an assembly's status is rendered once per snapshot (and per second of its
// remaining lifetime, the one value that moves without a change) and then shared by every
// reader. An assembly whose status and events did not change keeps its view (and so its
// rendered JSON) from one snapshot to the next, and each view carries its modify index: the
// generation of the snapshot in which its status last changed, which blocking reads wait on
// (watches.h). Events are shared between snapshots while the assembly has had no new one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "scheduler/scheduler.h"
#include "service/manager.h"

namespace tarn::api {

class AssemblyView {
 public:
  AssemblyView(service::AssemblyStatus status,
               std::shared_ptr<const std::vector<service::Event>> events,
               uint64_t last_event_serial, uint64_t modify_index)
      : status_(std::move(status)),
        events_(std::move(events)),
        last_event_(last_event_serial),
        modify_index_(modify_index) {}

  // The status with its remaining lifetime as of `now_wall_ms`.
  service::AssemblyStatus Status(int64_t now_wall_ms) const;
  // ServiceJson(Status(now)).dump(), rendered once per distinct remaining lifetime.
  std::shared_ptr<const std::string> Json(int64_t now_wall_ms) const;

  const service::AssemblyStatus& status() const { return status_; }
  const std::shared_ptr<const std::vector<service::Event>>& events() const { return events_; }
  uint64_t last_event_serial() const { return last_event_; }
  // The generation of the snapshot in which status() last changed (>= 1).
  uint64_t modify_index() const { return modify_index_; }

 private:
  const service::AssemblyStatus status_;
  const std::shared_ptr<const std::vector<service::Event>> events_;
  const uint64_t last_event_;
  const uint64_t modify_index_;
  mutable std::mutex mu_;
  mutable int64_t rendered_lifetime_ = 0;
  mutable std::shared_ptr<const std::string> rendered_;  // guarded by mu_
};

struct InstanceRun {
  std::string container_id;  // of its current (or last) start
  bool running = false;      // Manager::InstanceRunning
};

class StateSnapshot {
 public:
  uint64_t generation = 0;  // 1 for the first published, then one more each
  std::vector<std::shared_ptr<const AssemblyView>> assemblies;  // by user, then name
  std::vector<scheduler::NodeUsage> nodes;
  std::vector<scheduler::QueueUsage> queues;

  const AssemblyView* Find(const std::string& user, const std::string& name) const;
  // The instance's current run; nullptr when the assembly or the instance is unknown.
  const InstanceRun* Run(const std::string& user, const std::string& name,
                         const std::string& instance) const;

  // Filled by Build.
  std::map<std::string, size_t> by_key;      // "user/name" -> index in assemblies
  std::map<std::string, InstanceRun> runs;   // "user/name/instance"
};

// The remaining lifetime Manager::Get reports at `now_wall_ms` (-1: unlimited).
int64_t LifetimeRemaining(int64_t deadline_ms, int64_t now_wall_ms);

// Publishes snapshots (from the loop thread) and hands out the newest (to any thread).
class SnapshotPublisher {
 public:
  SnapshotPublisher();

  // Loop thread only: builds the next snapshot from `m` and makes it current. The previous
  // one's event lists are reused where nothing was added.
  void Publish(const service::Manager& m);
  // Any thread; never null (an empty snapshot before the first Publish).
  std::shared_ptr<const StateSnapshot> Current() const;
  // Any thread: `f` is called on the publishing thread with each snapshot once it is
  // current (the watches' wake-up); it must be quick. An empty `f` removes it.
  void OnPublish(std::function<void(const StateSnapshot&)> f);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const StateSnapshot> current_;  // guarded by mu_
  std::function<void(const StateSnapshot&)> on_publish_;  // guarded by mu_
};

}  // namespace tarn::api
