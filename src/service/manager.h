// Manager: the lifecycle of every assembly of every user, as YARN's service application
// master runs one service: states, dependency order, readiness, restarts with backoff,
// flex, stop/start/destroy, lifetime, success. One Manager per server, for all users.
//
// Event-driven and single-threaded: the server's loop thread calls everything. Inputs are
// commands (from the API), BackendEvents (container started, exited, probed), and Tick()
// when the clock reaches NextDeadline(). The Manager never sleeps and never blocks: it asks
// the Backend to act and hears back through events, so its tests feed events to a fake
// backend and advance a FakeClock.
//
// Durability: every command's effect is committed to the Store before the command returns
// (so before the API acknowledges it), and an instance's container id and placement are
// committed before the backend is asked to launch it. After kill -9 the new Manager reads
// the store and asks the backend to Recover() each instance that had a container: one
// still running is adopted, never started twice.
//
// States are YARN's: service ACCEPTED, STARTED, STABLE, FLEX, STOPPED, SUCCEEDED, FAILED;
// component FLEXING, STABLE, SUCCEEDED, FAILED (+ STOPPED); instance PENDING (tarn's: not
// running yet, the diagnostic says what it waits for), RUNNING_BUT_UNREADY, READY, STOPPED,
// SUCCEEDED, FAILED.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "registry/registry.h"
#include "service/backend.h"
#include "service/restart_policy.h"
#include "spec/assembly.h"
#include "store/store.h"

namespace tarn::service {

// Read-only views, for the API.
struct InstanceStatus {
  std::string name;  // worker-0
  std::string component;
  int64_t index = 0;
  std::string state;  // PENDING, RUNNING_BUT_UNREADY, READY, STOPPED, SUCCEEDED, FAILED
  std::string diagnostics;
  std::string container_id;  // of the current (or last) start
  std::string hostname;      // worker-0.fmnist.alice.tarn
  std::string ip;
  std::string node;
  std::vector<int> gpus;
  std::map<std::string, int> ports;  // by name: the numbers it listens on (Backend::InstancePorts)
  int64_t restarts = 0;
  std::string last_exit;    // how the last run ended, "" before any
  int64_t launch_time = 0;  // ms since the epoch of the current start; 0 when not started
  std::string version;      // the spec version it runs (the assembly's `version`)
  // Running and passing its readiness check now, whatever `state` says during an upgrade
  // (an instance UPGRADING serves until it is stopped): what a load balancer routes on.
  bool ready = false;

  bool operator==(const InstanceStatus&) const = default;
};

struct ComponentStatus {
  std::string name;
  std::string state;  // FLEXING, STABLE, SUCCEEDED, FAILED, STOPPED
  std::string diagnostics;
  int64_t number_of_containers = 0;  // desired
  int64_t ready = 0;
  std::vector<InstanceStatus> instances;  // by index

  bool operator==(const ComponentStatus&) const = default;
};

struct AssemblyStatus {
  std::string user;
  std::string name;
  std::string state;  // ACCEPTED, STARTED, STABLE, FLEX, STOPPED, SUCCEEDED, FAILED
  std::string diagnostics;
  std::string spec_json;  // the assembly as accepted, with flexes applied
  std::string version;    // its spec's `version`
  std::string upgrade_version;  // the version an upgrade in progress brings; "" when none
  std::string queue;
  int priority = 0;  // tarn.priority, else the queue's default; capped by the queue's maximum
  int64_t created_ms = 0;
  int64_t lifetime_remaining_s = -1;  // -1: unlimited
  int64_t lifetime_deadline_ms = 0;   // wall clock; 0: unlimited
  std::string shared_dir;
  std::string name_resolution;              // how programs in its containers resolve names
  std::string network_walls;                // who else may connect to them (on/off: why)
  std::vector<ComponentStatus> components;  // in the file's order

  // What the API's watches compare (api/watches.h): equal statuses render the same JSON.
  bool operator==(const AssemblyStatus&) const = default;
};

struct Event {
  int64_t time_ms = 0;  // wall clock
  std::string component;
  std::string instance;
  std::string type;  // LAUNCH, STARTED, READY, EXITED, RESTART, FAILED, FLEX, STOP, ...
  std::string message;
};

// The last checkpoint a training instance reported.
struct Checkpoint {
  int64_t step = 0;     // -1: none written yet
  int64_t wall_ms = 0;  // when it was written, ms since the epoch
  // The cluster's step the task last reported (tarn_train_global_step); -1: none. What a
  // preempted gang had reached, against the step it resumes from: the steps it redoes.
  int64_t reached_step = -1;
};

// What preemption cost, for the server's /metrics; read from any thread.
struct PreemptionCounters {
  std::atomic<uint64_t> preemptions{0};          // decisions carried out
  std::atomic<uint64_t> preempted_instances{0};  // instances stopped by them
  // GPUs each victim held times the time since its last checkpoint (or its start): the
  // work a kill at the decision would have lost (checkpoint-on-SIGTERM saves most of it).
  std::atomic<uint64_t> gpu_milliseconds_at_risk{0};
  // Steps a preempted gang computed again: the step it had reached, less the one it
  // resumed from (0 when it checkpointed on its way out), counted when it is placed again.
  std::atomic<uint64_t> steps_redone{0};
};

// What every view and command answers for an assembly the caller does not have.
Status AssemblyNotFoundError(const std::string& name);

class Manager {
 public:
  struct Options {
    const Clock* clock = nullptr;   // required
    store::Store* store = nullptr;  // required
    Backend* backend = nullptr;     // required
    // Where instance names are published (A, SRV, PTR, TXT); optional, not owned.
    registry::Registry* registry = nullptr;
    std::string domain = "tarn";
    Duration probe_interval = std::chrono::seconds(1);  // between readiness probes
    // How long a stopping instance may take after the backend's own grace period before the
    // manager gives up waiting for its exit event and forgets it.
    Duration stop_timeout = std::chrono::seconds(60);
    size_t events_per_assembly = 1000;  // newest kept
    // Restart defaults; a component's yarn.service.* properties override them.
    RestartOptions restart;
    // The last checkpoint instance `key` ("alice/fmnist/chief-0") reported, from the
    // server's metrics collector (tarn_train_checkpoint_step); none when it reported none.
    // Preemption reads it: the victims that lose least go first, and the preempted say the
    // step they resume from. Optional; called on the service loop.
    std::function<std::optional<Checkpoint>(const std::string& key)> last_checkpoint;
    PreemptionCounters* counters = nullptr;  // optional, not owned
    // The requests instance `key` had in flight on average over the collector's last scrape
    // interval (from tarn_serve_request_latency_seconds_sum: busy seconds per second); none
    // when it has no fresh reading. Autoscaling reads it; optional (without it autoscaled
    // components keep their count); called on the service loop.
    std::function<std::optional<double>(const std::string& key)> in_flight;
    Duration autoscale_interval = std::chrono::seconds(2);  // between decisions (Knative's tick)
  };

  // Loads every assembly from the store and recovers its instances through the backend.
  static StatusOr<std::unique_ptr<Manager>> Create(Options options);
  ~Manager();

  // ---- Commands. Each is durable when it returns OK. ----

  // `spec_json`: the assembly as accepted (parsed and validated by the caller into
  // `assembly`). AlreadyExists when the user has one of that name.
  Status Launch(const std::string& user, const spec::Assembly& assembly,
                const std::string& spec_json);
  // Stops every instance; the assembly and its spec stay (state STOPPED).
  Status Stop(const std::string& user, const std::string& name);
  // Starts a STOPPED (or finished) assembly again.
  Status Start(const std::string& user, const std::string& name);
  // Stops everything, then forgets the assembly and deletes its files.
  Status Destroy(const std::string& user, const std::string& name);
  // Changes a component's instance count: up fills the lowest free indices, down removes
  // the highest. Returns the previous count. An autoscaled component takes counts within its
  // tarn.autoscale.min..max only, and its autoscaler goes on from the new count.
  StatusOr<int64_t> Flex(const std::string& user, const std::string& name,
                         const std::string& component, int64_t count);
  // Seconds from now until the assembly is destroyed; -1 for unlimited.
  Status SetLifetime(const std::string& user, const std::string& name, int64_t seconds);

  // ---- Upgrades (YARN's; docs/upgrades.md) ----
  // An upgraded instance is stopped (with its grace period) and started again with the new
  // spec under its name and index; its readiness gates the next one, at most
  // tarn.upgrade.max_unavailable of a component down at once; one not READY within
  // tarn.upgrade.progress_deadline_secs stops the upgrade (FAILED_UPGRADE).
  enum class UpgradeMode {
    kManual,        // UPGRADING: instances NEEDS_UPGRADE until asked; finalized on request
    kAutoFinalize,  // UPGRADING_AUTO_FINALIZE: finalized once every instance is upgraded
    kExpress,       // EXPRESS_UPGRADING: every instance, components in dependency order
  };
  // `assembly` (validated by the caller) names a new `version`; it keeps the components,
  // queue, priority and tf roles; the running counts and lifetime stay.
  Status InitiateUpgrade(const std::string& user, const spec::Assembly& assembly,
                         const std::string& spec_json, UpgradeMode mode);
  // Asks for the named instances (worker-0), or every instance of the named components.
  Status UpgradeInstances(const std::string& user, const std::string& name,
                          const std::vector<std::string>& instances);
  Status UpgradeComponents(const std::string& user, const std::string& name,
                           const std::vector<std::string>& components);
  // Every instance upgraded: the new spec becomes the assembly's (STABLE again).
  Status FinalizeUpgrade(const std::string& user, const std::string& name);
  // CANCEL_UPGRADING: the upgraded instances go back to the old spec the same way.
  Status CancelUpgrade(const std::string& user, const std::string& name);

  // ---- Inputs from the backend and the clock ----

  void Handle(const BackendEvent& event);
  // Several at once, then one Tick(): what the server's loop does with a burst of events.
  void Handle(const std::vector<BackendEvent>& events);
  // Does whatever is due at the clock's Now(): placements, launches, restarts after their
  // backoff, probes, lifetimes. Call it after every command and event too (cheap).
  void Tick();
  // When Tick() next has something to do; nullopt when nothing is scheduled.
  std::optional<Clock::TimePoint> NextDeadline() const;

  // ---- Views ----

  StatusOr<AssemblyStatus> Get(const std::string& user, const std::string& name) const;
  // Every assembly of `user` (all users when empty), by user, then name.
  std::vector<AssemblyStatus> List(const std::string& user) const;
  StatusOr<std::vector<Event>> Events(const std::string& user, const std::string& name) const;
  // The serial number of the assembly's newest event (0: none, or no such assembly). Serials
  // grow across all assemblies, so a copy of Events() is current while this has not moved,
  // even if the assembly was destroyed and launched again meanwhile.
  uint64_t LastEventSerial(const std::string& user, const std::string& name) const;
  // The instance as the backend knows it (for logs); NotFound if the caller does not own it.
  StatusOr<InstanceRef> FindInstance(const std::string& user, const std::string& name,
                                     const std::string& instance) const;
  // The container id of the instance's current (or last) start; "" when none or unknown.
  std::string InstanceContainer(const std::string& user, const std::string& name,
                                const std::string& instance) const;
  // True while the instance's container runs (or is being started or stopped).
  bool InstanceRunning(const std::string& user, const std::string& name,
                       const std::string& instance) const;
  // True while anything (starting, stopping, destroying) is in flight: for clean shutdown.
  bool Busy() const;
  Backend& backend() const;

  struct Impl;

 private:
  explicit Manager(std::unique_ptr<Impl> impl);
  void HandleOne(const BackendEvent& event);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tarn::service
