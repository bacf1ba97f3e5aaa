// LocalBackend: the embedded backend that runs assemblies on this machine. It places
// instances with tarn's scheduler and runs each one as a container under tarn-shim through a
// runtime::ContainerRuntime, with the ContainerSpec that BuildContainerSpec makes of it.
//
// Placement calls are synchronous (the service loop makes them); the scheduler sits behind a
// mutex so that the views may be read from other threads too. Container calls only queue
// work and return: a small fixed pool of worker threads does it and reports through the
// EventSink. Work for one instance (Launch, Stop, Recover, Cleanup) runs in the order it was
// asked for, one piece at a time, so "Stop right after Launch" stops what Launch started;
// readiness probes run apart from it (a probe blocks up to its timeout), as does
// DestroyAssembly.
//
// Exits are found by polling: one monitor thread reads runtime.State() of every container it
// watches each `poll_interval` (a few small file reads per container; the shim writes
// exit.json when its container ends). Polling rather than a pidfd per shim because the state
// files are the runtime's contract (also after a server restart, for shims this process
// never started), because a lost shim (killed without writing exit.json) is only seen by
// looking, and because one thread serves any number of containers. kExited comes exactly
// once per container id; a lost container's ExitInfo is made up here and says so.
//
// Never two copies of one instance: every start of an instance uses the same shim
// directory, and Launch refuses (kStartFailed) while the container found there still runs.
// A container that ended there before is retired first: its logs (and exit.json) move to
// the sibling `<instance>.previous/` directory (one generation, like `kubectl logs
// --previous`) and the runtime removes the rest.
//
// Which container a shim directory holds: BuildContainerSpec puts TARN_CONTAINER_ID in the
// environment and the runtime keeps the spec in <shim_dir>/spec.json; Recover and Stop read
// it there. When spec.json cannot be read (or lacks the variable), the container found is
// taken to be the one asked about.
//
// Containers outlive the backend by design: the destructor stops the threads (dropping work
// not yet begun) and leaves every container running. The EventSink is called with an
// internal lock held, so that the events of one instance come in order (kStarted before
// kExited): it must return quickly; it may call this backend's methods (not the ...ForTest
// ones). It is called until the destructor returns.
//
// All public methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/exit_ledger.h"
#include "backend/local_container.h"
#include "backend/name_files.h"
#include "backend/net_walls.h"
#include "common/clock.h"
#include "common/status.h"
#include "runtime/container_runtime.h"
#include "runtime/run_as.h"
#include "scheduler/scheduler.h"
#include "service/backend.h"

namespace tarn::backend {

class KeyedWorkQueue;  // work_queues.h: the worker pool

// "127.42.0.0/16" -> the first and last address (host byte order) instances may get: the
// range's first address is kept for tarn's DNS server, the last is its broadcast address.
// Refuses ranges outside 127.0.0.0/8.
StatusOr<std::pair<uint32_t, uint32_t>> ParseLoopbackRange(const std::string& cidr);
// The range's first address, kept for tarn's DNS server: "127.42.0.0/16" -> "127.42.0.1".
StatusOr<std::string> ReservedDnsAddress(const std::string& cidr);

class LocalBackend final : public service::Backend {
 public:
  struct Options {
    // Placement: this machine as one node (several fake ones in tests), the queues (from
    // scheduler::ParseQueues; "default" is added when missing) and the clock.
    std::vector<scheduler::NodeSpec> nodes;
    std::vector<scheduler::QueueConfig> queues;
    const Clock* clock = nullptr;  // required; also stamps the exits made up here
    Clock::Duration reservation_after = std::chrono::seconds(60);  // scheduler::Scheduler's
    bool preemption = true;  // scheduler::Scheduler's: false, pending work only ever waits
    // What every launch shares: state_dir (required), domain, bin_dir, limits, grace
    // period. Its user, ip, container_id and run_as are filled for each instance.
    LaunchContext launch;
    // Who containers run as: YARN's rules for each user (runtime::ResolveRunAs), unless
    // `run_as` fixes one account for all.
    runtime::RunAsPolicy run_as_policy;
    std::optional<runtime::RunAs> run_as;
    // A tenant's account (by its label) and the policy's local user, for ResolveRunAs; from
    // any backend thread. Empty: the account named like the label (getpwnam).
    runtime::AccountLookup accounts;
    // Each placed instance gets its own address from `address_range` (an IPv4 CIDR inside
    // 127.0.0.0/8, e.g. "127.42.0.0/16": loopback, so every address works without
    // configuration), held as long as its place: it binds there (TARN_IP), is probed there,
    // and its DNS name points there. The range's first address is kept for tarn's DNS
    // server. Empty: every instance shares `ip`.
    std::string address_range;
    std::string ip = "127.0.0.1";
    // How programs in containers resolve names (name_files.h); the server decides, since it
    // runs the DNS server. kHosts files are fed by NamesChanged().
    NameResolution names;
    // The walls between tenants (net_walls.h): each instance's own address is walled off
    // for every account but its own and root, but on its public ports. Not owned; null:
    // none (the status says so).
    NetWalls* walls = nullptr;
    AssemblySecrets secrets;  // TARN_ASSEMBLY_SECRET of each assembly; empty: none
    // Required; not owned; must outlive the backend and allow calls from several threads
    // at once (ShimRuntime does: it keeps no state but its options).
    runtime::ContainerRuntime* runtime = nullptr;
    service::EventSink events;  // required
    int worker_threads = 4;     // >= 1
    // How often the monitor reads the state of each watched container; <= 0: no monitor
    // thread (tests call CheckContainersForTest()).
    std::chrono::milliseconds poll_interval{200};
  };

  static StatusOr<std::unique_ptr<LocalBackend>> Create(Options options);
  // Stops the worker and monitor threads; leaves the containers running.
  ~LocalBackend() override;

  LocalBackend(const LocalBackend&) = delete;
  LocalBackend& operator=(const LocalBackend&) = delete;

  // ---- service::Backend ----
  Status RequestPlacement(const spec::Assembly& assembly,
                          const std::vector<service::InstanceRef>& members, bool gang) override;
  std::vector<std::string> Place() override;
  service::PlacementStatus GetPlacement(const std::string& key) const override;
  Status RestorePlacement(const spec::Assembly& assembly, const service::InstanceRef& ref,
                          const service::Placement& placement) override;
  void ReleasePlacement(const std::string& key) override;
  std::vector<scheduler::Preemption> TakePreemptions() override;
  void NoteCheckpoint(const std::string& key, Clock::TimePoint at) override;

  void Launch(const spec::Assembly& assembly, const service::InstanceRef& ref,
              const service::Placement& placement, const std::string& container_id) override;
  void Stop(const service::InstanceRef& ref, const std::string& container_id) override;
  void Recover(const spec::Assembly& assembly, const service::InstanceRef& ref,
               const std::string& container_id) override;
  void Probe(const spec::Assembly& assembly, const service::InstanceRef& ref,
             const std::string& container_id, const spec::ReadinessCheck& check) override;
  // Retires the exited container (logs kept in <instance>.previous/ unless `logs`); with
  // `logs`, the instance is gone for good: its work directory and old logs go too. Leaves
  // a running container alone.
  void Cleanup(const service::InstanceRef& ref, bool logs) override;
  // Removes the assembly's shared, work and shim directories; the directories of a
  // container that still runs are left.
  void DestroyAssembly(const std::string& user, const std::string& assembly) override;

  std::vector<scheduler::NodeUsage> Nodes() const override;
  std::vector<scheduler::QueueUsage> Queues() const override;
  // The current log file; when the shim directory has none (the instance was retired by
  // Cleanup and not started again), the previous run's.
  std::string LogFile(const service::InstanceRef& ref, bool stderr_stream) const override;
  std::string SharedDir(const std::string& user, const std::string& assembly) const override;
  // kHosts: rewrites the assembly's hosts file (in place, on a worker); else nothing.
  void NamesChanged(const std::string& user, const std::string& assembly,
                    const std::string& hosts_lines) override;
  std::string DescribeNameResolution() const override { return options_.names.description; }
  std::string DescribeNetworkWalls() const override;

  // The previous run's log file ("" when there is none), for `tarn logs --previous`.
  std::string PreviousLogFile(const service::InstanceRef& ref, bool stderr_stream) const;

  // One pass of the monitor, on the calling thread.
  void CheckContainersForTest();
  // Returns once all the container work asked for so far is done.
  void WaitForIdleForTest();

 private:
  struct Watched {
    std::string container_id;
    std::string shim_dir;
  };

  explicit LocalBackend(Options options, std::unique_ptr<scheduler::Scheduler> scheduler);

  LaunchContext ContextFor(const std::string& user) const;
  std::string ShimDirOf(const service::InstanceRef& ref) const;
  // The account `user`'s containers run as (Options::run_as, else run_as_policy).
  StatusOr<runtime::RunAs> RunAsFor(const std::string& user, bool privileged) const;
  // Records (and loads) the wall of `ref`'s own address for `uid`; nothing without walls or
  // an address of its own.
  Status SetWall(const service::InstanceRef& ref, const spec::Component& component, uid_t uid);
  // RestorePlacement's scheduler and address part.
  Status RestorePlace(const spec::Assembly& assembly, const service::InstanceRef& ref,
                      const service::Placement& placement);
  // Creates the assembly's shared directory (TARN_SHARED_DIR) for the run user, if needed.
  Status PrepareSharedDir(const LaunchContext& ctx, const std::string& assembly);
  // <state>/names/<user>/<assembly>: the resolver files its containers see.
  std::string NamesDir(const std::string& user, const std::string& assembly) const;
  // Writes the resolver files a container of the assembly needs and names them in `spec`.
  Status PrepareNameFiles(const std::string& user, const std::string& assembly,
                          runtime::ContainerSpec* spec);
  // kHosts: renders and writes the hosts file from hosts_lines_; with `only_if_known`,
  // nothing when the assembly is not known (it was destroyed meanwhile).
  Status WriteHostsFile(const std::string& user, const std::string& assembly, bool only_if_known);

  // The work itself, on a pool thread, in order per instance.
  void DoLaunch(const spec::Assembly& assembly, const service::InstanceRef& ref,
                const service::Placement& placement, const std::string& container_id);
  void DoStop(const service::InstanceRef& ref, const std::string& container_id);
  // A start the runtime could not make yet (its image cannot be pulled now), due again.
  void DoRetryLaunch(const std::string& key, const std::string& container_id);
  void DoRecover(const service::InstanceRef& ref, const std::string& container_id);
  void DoProbe(const spec::Assembly& assembly, const service::InstanceRef& ref,
               const std::string& container_id, const spec::ReadinessCheck& check);
  void DoCleanup(const service::InstanceRef& ref, bool logs);
  void DoDestroyAssembly(const std::string& user, const std::string& assembly);

  // Retires the ended container in `shim_dir` (reporting its exit first if it is the one
  // watched): logs to the previous/ directory unless `keep_logs` is false, then Remove.
  Status Retire(const std::string& key, const std::string& shim_dir,
                const runtime::ContainerState& state, bool keep_logs);

  void Emit(service::BackendEvent event);  // REQUIRES: mu_ held
  void EmitStartFailed(const std::string& key, const std::string& container_id,
                       const std::string& detail);
  // Emits kStarted and watches the container from now on.
  void StartedAndWatch(const std::string& key, const std::string& container_id,
                       const std::string& shim_dir);
  // Emits kExited for `container_id` unless it was already reported (or, with
  // `only_if_watched`, unless it is no longer the container watched); stops watching it.
  void ReportExit(const std::string& key, const std::string& container_id, runtime::ExitInfo exit,
                  bool only_if_watched = false);
  runtime::ExitInfo MadeUpExit(const std::string& diagnostics) const;

  void MonitorLoop();
  void CheckContainers();  // one pass of the monitor

  const Options options_;

  // Held while an instance's wall is set and while its address is released (so no wall
  // outlives its address); taken before scheduler_mu_, never after.
  std::mutex walls_mu_;
  mutable std::mutex scheduler_mu_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;  // guarded by scheduler_mu_
  // Per-instance addresses (guarded by scheduler_mu_): by key, and the ones in use.
  uint32_t range_first_ = 0, range_last_ = 0;  // host order; 0: no range
  std::unordered_map<std::string, uint32_t> address_of_;
  std::set<uint32_t> addresses_used_;
  std::string AddressOf(const std::string& key) const;  // "" without one; takes the lock

  std::mutex mu_;  // guards the maps below and every call of options_.events
  std::unordered_map<std::string, Watched> watched_;  // by instance key: its running container
  ExitLedger exits_;  // the containers whose kExited was sent ("exactly once")
  // Starts that wait (kWaiting) for what may come (an image that cannot be pulled now),
  // by instance key: tried again at `due` by the monitor, with a doubling delay; a Stop of
  // that start drops it. Not a restart: the instance stays PENDING with the reason.
  struct WaitingLaunch {
    spec::Assembly assembly;
    service::InstanceRef ref;
    service::Placement placement;
    std::string container_id;
    Clock::TimePoint due;
    std::chrono::milliseconds delay{0};
    bool posted = false;  // a DoRetryLaunch is queued
  };
  std::unordered_map<std::string, WaitingLaunch> waiting_;

  // By "user/assembly": its names as /etc/hosts lines, for kHosts. Held while a names
  // directory is written or removed, so a late rewrite cannot bring back a destroyed one.
  std::mutex names_mu_;
  std::unordered_map<std::string, std::string> hosts_lines_;

  std::mutex monitor_mu_;
  std::condition_variable monitor_cv_;
  bool stopping_ = false;  // guarded by monitor_mu_
  std::thread monitor_;

  std::unique_ptr<KeyedWorkQueue> work_;  // last: its threads use everything above
};

}  // namespace tarn::backend
