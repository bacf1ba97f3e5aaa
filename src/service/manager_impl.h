// Manager::Impl: the state the manager keeps of every assembly, shared by the files that
// make it up (internal to src/service; nothing outside includes it):
//   manager.cc         the commands, the backend's events and the clock (Manager's API);
//   manager_impl.cc    transitions, reconciliation, the step every entry point ends with,
//                      and loading from the store;
//   manager_views.cc   the read-only views (status, events, instances);
//   manager_preemption.cc  stops in gang order, and preemption carried out;
//   manager_autoscale.cc   the autoscaled components' decisions carried out;
//   manager_upgrade.cc     upgrades: YARN's calls, and the roll through the instances.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "service/autoscaler.h"
#include "service/manager.h"

namespace tarn::service {

// Instance states as stored and shown. BACKOFF and STARTING are stored only: they tell a
// restarted server that an exit was already counted, or that a launch was committed.
inline constexpr char kPending[] = "PENDING";
inline constexpr char kStarting[] = "STARTING";
inline constexpr char kUnready[] = "RUNNING_BUT_UNREADY";
inline constexpr char kReady[] = "READY";
inline constexpr char kBackoff[] = "BACKOFF";
inline constexpr char kStopped[] = "STOPPED";
inline constexpr char kSucceeded[] = "SUCCEEDED";
inline constexpr char kFailed[] = "FAILED";

// An instance's upgrade_state (YARN's container states during an upgrade), stored.
inline constexpr char kNeedsUpgrade[] = "NEEDS_UPGRADE";    // runs the old spec; not asked yet
inline constexpr char kUpgrading[] = "UPGRADING";           // asked: waits its turn, or rolls
inline constexpr char kFailedUpgrade[] = "FAILED_UPGRADE";  // not READY within the deadline

// The service states of an upgrade (YARN's).
inline constexpr char kUpgradeManual[] = "UPGRADING";
inline constexpr char kUpgradeAuto[] = "UPGRADING_AUTO_FINALIZE";
inline constexpr char kUpgradeExpress[] = "EXPRESS_UPGRADING";
inline constexpr char kUpgradeCancel[] = "CANCEL_UPGRADING";

// desired_state values in the store.
inline constexpr char kDesiredStarted[] = "STARTED";
inline constexpr char kDesiredStopped[] = "STOPPED";
inline constexpr char kDesiredDestroyed[] = "DESTROYED";

struct Manager::Impl {
  using json = nlohmann::json;

  enum class Phase {
    kWaiting,    // needs a placement (its dependencies permitting)
    kRequested,  // placement asked for
    kPlaced,     // has a place; launches once its dependencies are READY
    kStarting,   // launch (or recovery) asked for
    kRunning,
    kBackoff,   // exited; restarts at restart_at, keeping its place
    kStopping,  // stop asked for
    kDone,      // STOPPED, SUCCEEDED or FAILED (rec.state)
  };

  struct Inst {
    InstanceRef ref;
    store::InstanceRecord rec;
    Phase phase = Phase::kWaiting;
    Placement placement;
    bool has_placement = false;
    bool ready = false;
    bool recovering = false;  // waiting for Recover()'s answer
    bool remove = false;      // flexed away: forget once stopped
    std::string ip;
    std::string diagnostics;
    std::unique_ptr<InstanceRestarts> restarts;
    Clock::TimePoint restart_at{};
    Clock::TimePoint next_probe{};
    Clock::TimePoint stop_deadline{};
    bool probe_in_flight = false;
    std::optional<registry::InstanceRecords> published;  // what the registry has of it
    // Preempted: who took its place, and the step it resumes from; shown until it launches.
    std::string preempted;
    std::string preempted_by;            // "bob/urgent (priority 10)"
    std::optional<int64_t> resume_step;  // the checkpoint it resumes from, when known
    // A gang's ps asked to stop: it stops once the gang's chief and workers have exited, or
    // at stop_after_deadline (AskStopInOrder); `stop_after` says why it stops.
    std::string stop_after;
    Clock::TimePoint stop_after_deadline{};
    // Upgrading (rec.upgrade_state, rec.version): stopped to start again with the upgrade's
    // target spec; READY by upgrade_deadline, or the upgrade fails.
    bool upgrade_stop = false;
    std::optional<Clock::TimePoint> upgrade_deadline;
    // Upgrading a READY instance: out of the ready set (DNS, `ready`) until then, and
    // stopped then (tarn.upgrade.deregistration_delay_ms); probes do not bring it back.
    std::optional<Clock::TimePoint> unready_until;
  };

  struct Comp {
    size_t spec_index = 0;
    RestartOptions options;
    std::unique_ptr<ComponentFailures> failures;
    std::map<int64_t, Inst> instances;  // by index
    bool failed = false;
    std::string diagnostics;
    std::unique_ptr<Autoscaler> autoscaler;  // tarn.autoscale.*; none: a fixed count
    Clock::TimePoint next_autoscale{};
  };

  // An upgrade in progress (rec.upgrade_json): instances whose rec.version is to_version run
  // `spec`, the others the assembly's.
  struct Upgrade {
    std::string state;  // kUpgradeManual, kUpgradeAuto, kUpgradeExpress, kUpgradeCancel
    std::string from_version;
    std::string to_version;
    spec::Assembly spec;
    nlohmann::json spec_json;
    std::string failed;  // why it stopped rolling; "" while it goes on
  };

  struct Asm {
    store::AssemblyRecord rec;
    spec::Assembly spec;
    json spec_json;
    std::vector<Comp> comps;
    std::deque<Event> events;
    uint64_t last_event = 0;                // the serial of its newest event; 0: none
    int priority = 0;                       // as its queue sees it (tarn.priority, capped)
    bool gang_placed = false;               // the gang got its place since the last (re)start
    bool preempted = false;                 // since its last preemption, not yet placed again
    std::optional<std::string> hosts_sent;  // the names last given to backend.NamesChanged
    std::optional<Upgrade> upgrade;
  };

  Options options;
  const Clock& clock;
  store::Store& store;
  Backend& backend;
  std::map<std::string, Asm> assemblies;  // "<user>/<name>"
  std::unordered_map<std::string, std::pair<Asm*, Inst*>> by_key;
  std::set<std::pair<std::string, std::string>> dirty;  // instances to write: (asm key, name)
  std::set<std::string> dirty_assemblies;
  std::vector<std::function<void()>> actions;  // backend calls, made after the store write
  uint64_t event_serial = 0;                   // of the newest event of any assembly
  uint64_t names_generation = ~uint64_t{0};    // the registry's, when names were last sent

  explicit Impl(Options o)
      : options(std::move(o)),
        clock(*options.clock),
        store(*options.store),
        backend(*options.backend) {}

  static std::string AsmKey(const std::string& user, const std::string& name) {
    return user + "/" + name;
  }

  const spec::Component& CompSpec(const Asm& a, const Comp& c) const {
    return a.spec.components[c.spec_index];
  }

  // ---- Helpers and transitions (manager_impl.cc) ----
  void AddEvent(Asm& a, const std::string& component, const std::string& instance,
                const std::string& type, const std::string& message);
  void MarkDirty(Asm& a, const Inst& i);
  StatusOr<spec::Assembly> ParseSpec(const std::string& user, const json& spec_json) const;
  void BuildComps(Asm& a);
  // The component's restart options: its yarn.service.* properties over the server's.
  RestartOptions OptionsFor(const spec::Component& cs) const;
  Inst& NewInstance(Asm& a, Comp& c, int64_t index);
  Comp* FindComp(Asm& a, const std::string& name);

  // ---- Transitions ----
  void ReleasePlace(Inst& i);
  void Finish(Asm& a, Inst& i, const char* state, const std::string& why);
  void AskStop(Asm& a, Inst& i, const std::string& why);
  void FailAssembly(Asm& a, const std::string& why);
  // An instance's run ended (not by our stop): restart it, or leave it finished.
  void OnExit(Asm& a, Comp& c, Inst& i, const runtime::ExitInfo& exit);
  // The instance's address: its own from placement on (its name resolves before it
  // starts); with a backend that knows it only once the instance runs (Slurm: its node's),
  // the one kStarted brought, while it runs.
  std::string AddressOf(const Inst& i) const;
  void Launch(Asm& a, Inst& i);

  // ---- Level-triggered reconciliation of one assembly ----
  bool ComponentReady(const Asm& a, const std::string& name) const;
  std::string WaitingFor(const Asm& a, const Comp& c) const;
  bool InGang(const Asm& a, const Comp& c) const;
  void Reconcile(Asm& a);
  // Flexed-away instances that have stopped are forgotten: records, files, logs.
  void ForgetRemoved(Asm& a);
  // Derived states of the components and the assembly.
  void UpdateStates(Asm& a);

  // ---- The step every entry point ends with ----
  void Step();
  // The registry holds a name for every instance that holds a place (and so an address):
  // its A record from placement on, listed under its component once READY.
  void PublishNames();
  // One placement pass; true when it placed something.
  bool PlacePass();
  void Flush();
  void FinishDestroys();
  void RunActions();

  // ---- Ordered stops and preemption (manager_preemption.cc) ----
  // tarn.stop.grace_secs of the instance's component: SIGTERM to SIGKILL.
  Duration GraceOf(const Asm& a, const Inst& i) const;
  // AskStop, except that a gang's ps waits until the gang's chief and workers have exited
  // (or its grace period has passed): the chief reads the parameters for its checkpoint.
  void AskStopInOrder(Asm& a, Inst& i, const std::string& why);
  // The deferred ps stops whose time has come.
  void StopDeferred(Asm& a);
  // A chief or worker of the gang is still starting, running or stopping.
  bool TrainersAlive(const Asm& a) const;
  // A stopped instance of an assembly that still runs waits for a new place (preempted, or
  // flexed down and back up meanwhile), saying why.
  void Requeue(Asm& a, Inst& i);
  // Tells the backend when each running training instance last checkpointed.
  void NoteCheckpoints();
  // Stops the victims of the preemptions Place() decided; true when some were released at
  // once (they had not started), so that another pass may place the preemptor.
  bool ActOnPreemptions();
  void Preempted(Inst& i);  // the diagnostic while it waits
  // The backend's own scheduler took the instance's place (a Slurm job PREEMPTED): as a
  // stop of tarn's, not judged by its exit; it waits for a place again.
  void PreemptedByBackend(Asm& a, Inst& i, const runtime::ExitInfo& exit);
  // A preempted assembly launches again (its first instance): the RESUMED event and the
  // steps it redoes.
  void Resumed(Asm& a, const Inst& i);
  // The newest checkpoint its training tasks reported, with the furthest step any of them
  // reached; nullopt when none reported anything.
  std::optional<Checkpoint> LastCheckpoint(const Asm& a) const;

  // ---- Counts (manager.cc) and autoscaling (manager_autoscale.cc) ----
  // Stores `count` as the component's number_of_containers (durable when OK) with the event
  // `type` ("FLEX", "AUTOSCALE") saying `message`; the next Step() starts or stops instances.
  Status SetCount(Asm& a, Comp& c, int64_t count, const std::string& type,
                  const std::string& message);
  // The decisions due for the assembly's autoscaled components, carried out.
  void Autoscale(Asm& a);
  // When the next decision is due; nullopt when none of its components autoscales.
  std::optional<Clock::TimePoint> NextAutoscale(const Asm& a) const;

  // ---- Upgrades (manager_upgrade.cc) ----
  // The spec the instance runs (or will run once started): the upgrade's for an instance on
  // its target version, else the assembly's.
  const spec::Assembly& SpecOf(const Asm& a, const Inst& i) const;
  const spec::Component& CompSpecOf(const Asm& a, const Inst& i) const;
  // The version the upgrade brings its instances to: the new one, or the old when cancelled.
  std::string UpgradeTarget(const Asm& a) const;
  // Asks the backend to place `refs`, each with the spec it will run; false (each says why)
  // when the backend refused.
  Status RequestPlacements(const Asm& a, const std::vector<InstanceRef>& refs, bool gang);
  // An instance stopped for its upgrade has stopped: it starts next on the target version.
  void UpgradeStopped(Asm& a, Inst& i);
  // Rolls the upgrade on: instances READY on their target are done; the next ones stop;
  // the deadline; auto-finalize and the end of a cancel.
  void RollUpgrade(Asm& a);
  void BeginUpgrade(Asm& a, Comp& c, Inst& i);
  // Stops (or, not running, requeues) an instance for its upgrade to `target`.
  void StopForUpgrade(Asm& a, Inst& i, const std::string& target);
  void FailUpgrade(Asm& a, Inst& i, const std::string& why);
  // rec.upgrade_json and the given instances' new upgrade states, in one transaction.
  Status CommitUpgrade(Asm& a, store::AssemblyRecord rec,
                       const std::vector<std::pair<Inst*, std::string>>& states);
  Status FinishUpgrade(Asm& a, bool cancelled);
  std::string UpgradeJson(const Upgrade& u) const;
  Status LoadUpgrade(Asm& a);
  std::optional<Clock::TimePoint> NextUpgradeDeadline(const Asm& a) const;

  // ---- Loading ----
  Status Load();
};

}  // namespace tarn::service
