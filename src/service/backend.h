// Backend: the seam between the service layer (assembly semantics: states, dependencies,
// restarts, flex) and "where containers run". The local backend (backend/local_backend.h)
// places instances with tarn's scheduler and runs them under tarn-shim; a Slurm backend
// submits jobs. The service layer's tests use a fake.
//
// Placement calls are synchronous and made on the service loop. Container calls are
// asynchronous: they return at once and report what happened later, from any thread,
// through the EventSink given to the backend, which the server turns into events on its
// loop. Every container event names the instance (its key) and the container id of the
// start it is about, so the service ignores news of an older start.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/container_spec.h"
#include "scheduler/scheduler.h"
#include "spec/assembly.h"
#include "spec/plan.h"

namespace tarn::service {

// One instance of a component, as the backend sees it.
struct InstanceRef {
  std::string user;  // the owner, as a DNS label
  std::string assembly;
  std::string component;
  std::string instance;  // "<component>-<index>", e.g. worker-0
  int64_t index = 0;

  // "<user>/<assembly>/<instance>": unique across the server.
  std::string Key() const { return user + "/" + assembly + "/" + instance; }
};

// Where an instance was placed. A backend that places instances only when it launches
// them (Slurm) reports them placed with no node and no ip: its kStarted names both.
struct Placement {
  std::string node;
  std::vector<int> gpus;  // device indices on that node
  std::string ip;         // the instance's own address, held with its place; "" if none

  friend bool operator==(const Placement&, const Placement&) = default;
};

struct PlacementStatus {
  enum class Phase { kUnknown, kPending, kPlaced, kInfeasible };
  Phase phase = Phase::kUnknown;
  Placement placement;  // kPlaced
  std::string reason;   // kPending, kInfeasible: why, for a user
};

struct BackendEvent {
  enum class Kind {
    kStarted,      // the container runs (after Launch, or found running by Recover)
    kStartFailed,  // it could not start (or Recover found nothing): `detail` says why
    kExited,       // it ended: `exit` says how
    kProbed,       // one readiness probe finished: `ready`, `detail`
    // Launched but not running yet, and the backend knows why (a Slurm job PENDING with
    // its reason): `detail` says it, for users. Optional; sent again when the reason
    // changes; says nothing of the outcome (kStarted or kStartFailed still follow).
    kWaiting,
  };
  Kind kind = Kind::kStarted;
  std::string key;  // InstanceRef::Key()
  std::string container_id;
  std::string ip;  // kStarted: the address the instance binds
  // kStarted: the node it runs on, for backends that place instances themselves (their
  // Placement names no node); "" otherwise.
  std::string node;
  runtime::ExitInfo exit;
  // kExited: the backend's own scheduler took the place back (a Slurm job that ended
  // PREEMPTED). Not judged by its exit: it waits for a place again, as after tarn's own
  // preemption.
  bool preempted = false;
  bool ready = false;
  std::string detail;
};

// Thread-safe; may be called from any thread, including inside a Backend call.
using EventSink = std::function<void(BackendEvent)>;

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- Placement (synchronous, on the service loop) ----

  // Asks for a place for each member, all at once when `gang` (placed together or not at
  // all). Resources come from each member's component in `assembly`; `assembly.queue`
  // (empty: the default queue) is charged, and `user` of the members.
  virtual Status RequestPlacement(const spec::Assembly& assembly,
                                  const std::vector<InstanceRef>& members, bool gang) = 0;
  // One placement pass; returns the keys placed by it.
  virtual std::vector<std::string> Place() = 0;
  virtual PlacementStatus GetPlacement(const std::string& key) const = 0;
  // After a server restart: records an instance as already placed there.
  virtual Status RestorePlacement(const spec::Assembly& assembly, const InstanceRef& ref,
                                  const Placement& placement) = 0;
  // Frees a placed instance's resources or withdraws its request; unknown keys are ignored.
  virtual void ReleasePlacement(const std::string& key) = 0;
  // The preemptions Place() decided since the last call (scheduler::Preemption; keys as
  // request ids), oldest first: the owner stops every victim and releases its placement,
  // and the preemptor is placed once they are all released. Backends that do not preempt
  // (Slurm decides that itself) return none.
  virtual std::vector<scheduler::Preemption> TakePreemptions() { return {}; }
  // When the placed instance `key` (a gang's member stands for its gang) last saved its
  // work: the scheduler's preemption loses the least work first. Unknown keys are ignored.
  virtual void NoteCheckpoint(const std::string& /*key*/, Clock::TimePoint /*at*/) {}

  // ---- Containers (asynchronous; results through the EventSink) ----

  // Starts the instance's container as `container_id` (new for every start) where it was
  // placed: then kStarted or kStartFailed, and kExited when it ends.
  virtual void Launch(const spec::Assembly& assembly, const InstanceRef& ref,
                      const Placement& placement, const std::string& container_id) = 0;
  // SIGTERM, then SIGKILL after the grace period: then kExited (at once when not running).
  virtual void Stop(const InstanceRef& ref, const std::string& container_id) = 0;
  // After a server restart, finds the container started as `container_id` again: kStarted
  // when it still runs (then kExited when it ends), kExited when it ended meanwhile,
  // kStartFailed when there is none (it never started).
  virtual void Recover(const spec::Assembly& assembly, const InstanceRef& ref,
                       const std::string& container_id) = 0;
  // One readiness probe of a running instance: then kProbed. `check`'s properties may
  // still hold ${...} variables; the backend substitutes them for this instance.
  virtual void Probe(const spec::Assembly& assembly, const InstanceRef& ref,
                     const std::string& container_id, const spec::ReadinessCheck& check) = 0;
  // Deletes what is left of an instance whose container has exited (logs go with it only
  // when `logs` is true: flexed-down and destroyed instances).
  virtual void Cleanup(const InstanceRef& ref, bool logs) = 0;
  // Deletes an assembly's shared directory and whatever else it left (after destroy).
  virtual void DestroyAssembly(const std::string& user, const std::string& assembly) = 0;

  // ---- Views (on the service loop) ----

  virtual std::vector<scheduler::NodeUsage> Nodes() const = 0;
  virtual std::vector<scheduler::QueueUsage> Queues() const = 0;
  // The instance's current log file for stdout or stderr ("" when it has none).
  virtual std::string LogFile(const InstanceRef& ref, bool stderr_stream) const = 0;
  // Per-assembly paths and addresses users read in `tarn status`.
  virtual std::string SharedDir(const std::string& user, const std::string& assembly) const = 0;

  // ---- Names (on the service loop) ----

  // The ports instance `ref` of `component` listens on, by name (spec::DeclaredPorts): the
  // declared numbers where every instance has an address of its own (local), numbers the
  // backend assigned in their place where instances share their node's address (Slurm).
  // An instance keeps its numbers across restarts. They go into its SRV records and status.
  virtual std::vector<spec::NamedPort> InstancePorts(const InstanceRef& /*ref*/,
                                                     const spec::Component& component) const {
    return spec::DeclaredPorts(component);
  }

  // The assembly's published names changed; `hosts_lines` holds all of them as /etc/hosts
  // lines (registry::Registry::HostsLines), for backends whose containers read a hosts file.
  virtual void NamesChanged(const std::string& /*user*/, const std::string& /*assembly*/,
                            const std::string& /*hosts_lines*/) {}
  // How programs inside containers resolve these names, for `tarn status`; "" unknown.
  virtual std::string DescribeNameResolution() const { return ""; }
  // Whether other local accounts can connect to the instances, for `tarn status`: "on: ..."
  // or "off: <why>"; "" unknown.
  virtual std::string DescribeNetworkWalls() const { return ""; }
};

}  // namespace tarn::service
