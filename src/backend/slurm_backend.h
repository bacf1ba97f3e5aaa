// SlurmBackend: runs assemblies on a Slurm cluster. Slurm places and confines (cgroups, GRES
// GPUs); tarn keeps the assembly semantics (names, TF_CONFIG, dependencies, restarts by the
// assembly's policy, flex, stop/start).
//
// Each start of an instance is one batch job (a gang member's: a step in its gang's job, see
// Gangs below), submitted with sbatch (argv, never a shell)
// as `tarn.<user>.<assembly>.<instance>.<n>` (n: the start counter of the container id),
// with --cpus-per-task, --mem (always), --gres=gpu:N, --no-requeue (restarts follow tarn's
// policy, not Slurm's requeue) and the configured partition/account/QOS/extra options. Its
// files live in <shared_dir>/<user>/<assembly>/<instance>/ (job.sh, spec.json, stdout.log,
// stderr.log, address, exit.json); TARN_SHARED_DIR is <shared_dir>/.tarn/shared/<user>/
// <assembly> and the work directory <shared_dir>/.tarn/containers/...: shared_dir must be
// on a filesystem every node sees at the same path (checked at Create and at every launch).
// The job's script asks Slurm for its node's address (sinfo), writes it to the `address`
// file (the job reports its address back) and execs `srun tarn-shim --foreground`, which
// runs the instance in its own namespaces inside the job's cgroup, with the environment
// BuildContainerSpec makes (as locally) except TARN_IP = the node's address and
// CUDA_VISIBLE_DEVICES = the GPUs Slurm gave the job. SLURM_CONF (the configured one, else
// the server's $SLURM_CONF) is passed to every Slurm command tarn runs and into the job.
//
// Placement: Slurm places. RequestPlacement only checks that some node of `sinfo --json`
// could ever hold the instance, and when none seems to, asks `sbatch --test-only` (which
// submits nothing): kInfeasible with the sizes and Slurm's reason when Slurm agrees.
// Place() then reports every request placed at once, with no node and no address: kStarted
// names both (the Manager publishes the instance's DNS name from it). PENDING jobs are
// reported as kWaiting with Slurm's reason ("Slurm: PENDING (Resources)"); a job sbatch
// refuses is kStartFailed with sbatch's message. The sinfo inventory (for this check and
// Nodes()/Queues()) is refreshed by the poller: these calls wait for Slurm only in that
// rare --test-only (5 s at most).
//
// Ports: instances on one node share its address, so every instance gets numbers of its own
// for its declared ports (tarn.ports, tarn.tf.port) from `port_range`, unique across all
// that this server runs (PortBook), before its job is submitted: TF_CONFIG names
// `<instance>.<assembly>.<user>.<domain>:<assigned>` for every member, TARN_PORT_<NAME>
// carries the instance's own, the SRV records and `tarn status` show them, and a readiness
// check written with a declared number probes the assigned one. An instance keeps its
// numbers across restarts (recorded in <shared_dir>/<user>/<assembly>/ports.json) and gives
// them back when flexed down or destroyed. Programs must listen on $TARN_PORT_<NAME> (or
// their TF_CONFIG entry), not on a number written into the launch command.
//
// Gangs: the members of an assembly's gang (its training cluster) get ONE heterogeneous job
// with a component per tarn component (`--ntasks` = its instances, each task with the
// component's CPUs, memory per CPU and GPUs per task), so Slurm allocates all of them or
// none. Its batch script (RenderGangScript) holds the allocation and starts a member as an
// `srun --het-group=G --ntasks=1 --exact` step when tarn asks (a request file), so members
// still start in dependency order, restart alone inside the allocation (a new step) and
// stop alone (`scancel --signal=TERM <job>+<G>.<step>`, so the shim's grace applies). A
// member's address file names its step; its end is its step's (step.end, and the shim's
// exit.json), or the allocation's. When no member is left the allocation is cancelled.
// Instances beyond the gang's first size (flexed up) and every start after the allocation
// is gone are single jobs. Slurm places the components of a heterogeneous job on distinct
// nodes: a gang with more components than the cluster has nodes is submitted as single
// jobs (said in the server's log).
//
// tarn's DNS server must be reachable from the nodes for names to resolve inside containers.
//
// States: ONE poller thread reads `squeue --json` (all jobs: it ignores filters) every
// poll_interval and maps each job it tracks: RUNNING with its address file -> kStarted(ip,
// node); an end state -> kExited exactly once per container id, with the exit code or
// signal of its wait status, OOM (OUT_OF_MEMORY, or derived exit code 253 from an srun
// step) and Slurm's state and reason as diagnostics ("Slurm: FAILED (NonZeroExitCode),
// exited with code 3"); a job gone from squeue without an end state seen (it ended while
// tarn server was down, or beyond MinJobAge) -> kExited as Slurm's jobcomp/filetxt record
// says (JobCompLoc, from `scontrol show config`), else as the shim's exit.json says, else
// saying it was lost. Stop is `scancel` (SIGTERM, SIGKILL after KillWait); its kExited comes when
// squeue shows the end. Recover finds the job by its name (and the job id recorded in the
// instance directory) at the poller's next squeue pass that succeeds: pending or running
// -> kStarted once it runs, ended -> kExited, none -> kStartFailed (none, but recorded ->
// kExited saying it was lost); a restarted server adopts, never submits twice.
//
// Threads: container work (Launch, Stop, Recover, Cleanup, DestroyAssembly) runs on one
// worker thread in the order asked (so Stop after Launch cancels what Launch submitted);
// probes on another (a probe blocks up to its timeout); squeue and sinfo on the poller.
// Jobs are submitted one at a time (sbatch takes ~30 ms here). The EventSink
// is called with an internal lock held (events of one instance come in order): it must
// return quickly. Jobs outlive the backend: the destructor joins the threads and cancels
// nothing. All public methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
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
#include "backend/port_book.h"
#include "backend/slurm_commands.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "service/backend.h"

namespace tarn::backend {

class SerialQueue;  // work_queues.h: one thread running tasks in order

// The checks of shared_dir, with errors naming the configuration key: it exists, is a
// directory and is writable by this process.
Status CheckSharedDir(const std::string& shared_dir);

class SlurmBackend final : public service::Backend {
 public:
  struct Options {
    std::string slurm_conf;  // "" = $SLURM_CONF of this process (may be unset: Slurm's default)
    std::string partition, account, qos;  // "" = Slurm's defaults
    // The server's queues (scheduler::ParseQueues'd): the partition of a queue's name (the
    // configured or Slurm's default one: "default") takes its priorities and ACLs; the
    // others have the defaults. Their capacities are Slurm's to enforce, not tarn's.
    std::vector<scheduler::QueueConfig> queues;
    // A QOS by priority (MapPriority), instead of `qos`; empty: `qos` for every job.
    std::vector<PriorityQos> priority_qos;
    std::vector<std::string> sbatch_options;
    std::string shared_dir;              // required, absolute
    PortRange port_range{20000, 29999};  // where instances' port numbers come from
    // How often squeue is read; <= 0: no poller thread (tests call PollForTest()).
    std::chrono::milliseconds poll_interval{500};
    std::string domain = "tarn";
    std::string bin_dir;           // tarn's binaries (tarn-shim; first on the instances' PATH)
    NameResolution names;          // kResolvConf/kHosts files are written under shared_dir
    const Clock* clock = nullptr;  // required
    service::EventSink events;     // required
    std::chrono::milliseconds command_timeout{30000};  // per Slurm command
    // Whom a tenant's jobs run as when the server is root (as locally: the tenant's own
    // account, else the policy's local user; never root unless privileged containers are
    // allowed), found through `accounts` (empty: getpwnam). Jobs are submitted as that
    // account, so Slurm runs them, and accounts them, as the tenant. A server that is not
    // root submits every job as itself.
    runtime::RunAsPolicy run_as_policy;
    runtime::AccountLookup accounts;
    AssemblySecrets secrets;  // TARN_ASSEMBLY_SECRET of each assembly; empty: none
    // Runs one Slurm command (argv, then the time limit); empty: RunCommand. Tests give a
    // fake Slurm here.
    std::function<StatusOr<CommandResult>(const std::vector<std::string>&,
                                          std::chrono::milliseconds)>
        run_command;
  };

  static StatusOr<std::unique_ptr<SlurmBackend>> Create(Options options);
  ~SlurmBackend() override;

  SlurmBackend(const SlurmBackend&) = delete;
  SlurmBackend& operator=(const SlurmBackend&) = delete;

  // ---- service::Backend ----
  Status RequestPlacement(const spec::Assembly& assembly,
                          const std::vector<service::InstanceRef>& members, bool gang) override;
  std::vector<std::string> Place() override;
  service::PlacementStatus GetPlacement(const std::string& key) const override;
  Status RestorePlacement(const spec::Assembly& assembly, const service::InstanceRef& ref,
                          const service::Placement& placement) override;
  void ReleasePlacement(const std::string& key) override;

  void Launch(const spec::Assembly& assembly, const service::InstanceRef& ref,
              const service::Placement& placement, const std::string& container_id) override;
  void Stop(const service::InstanceRef& ref, const std::string& container_id) override;
  void Recover(const spec::Assembly& assembly, const service::InstanceRef& ref,
               const std::string& container_id) override;
  void Probe(const spec::Assembly& assembly, const service::InstanceRef& ref,
             const std::string& container_id, const spec::ReadinessCheck& check) override;
  // With `logs`, removes the instance's directory and work directory; never while its job
  // is tracked as pending or running.
  void Cleanup(const service::InstanceRef& ref, bool logs) override;
  void DestroyAssembly(const std::string& user, const std::string& assembly) override;

  // From `sinfo --json` (as the poller last read it, every few seconds).
  std::vector<scheduler::NodeUsage> Nodes() const override;
  // "default" (the configured partition, else Slurm's default) and every partition sinfo
  // lists; an assembly's queue other than "default" is submitted to that partition.
  std::vector<scheduler::QueueUsage> Queues() const override;
  std::string LogFile(const service::InstanceRef& ref, bool stderr_stream) const override;
  std::string SharedDir(const std::string& user, const std::string& assembly) const override;
  void NamesChanged(const std::string& user, const std::string& assembly,
                    const std::string& hosts_lines) override;
  std::string DescribeNameResolution() const override { return options_.names.description; }
  std::string DescribeNetworkWalls() const override {
    return "off: Slurm jobs share their node's address, so no wall per instance can be made; "
           "the parameter servers admit only their assembly's processes (its secret)";
  }
  // The numbers assigned to the instance (assigning them when it has none yet; the declared
  // ones, with the error logged, when the range is exhausted).
  std::vector<spec::NamedPort> InstancePorts(const service::InstanceRef& ref,
                                             const spec::Component& component) const override;

  // One pass of the poller (the node inventory when stale, squeue), on the calling thread.
  void PollForTest();
  // Returns once the container work asked for so far is done.
  void WaitForIdleForTest();

 private:
  // A job tarn watches: submitted by Launch or found by Recover.
  struct Tracked {
    std::string container_id;
    int64_t job_id = 0;
    std::string instance_dir;
    bool started = false;        // kStarted sent
    std::string waiting_reason;  // the last kWaiting detail sent
    int misses = 0;              // squeue passes that did not list it
    // Recover: the job's name, until a squeue pass finds it (job_id: the recorded one, 0
    // when none).
    std::string recover_name;
    // A gang member's step: its het group (-1: a job of its own) in the gang's job (job_id,
    // the leader's id), the gang's "user/assembly", the step id from its address file, and
    // the stop asked for it.
    int het_group = -1;
    std::string gang;
    int64_t step_id = -1;
    int64_t component_job = 0;  // its component's own job id (squeue's job_id), once seen
    bool stop_asked = false;
    std::chrono::steady_clock::time_point stop_sent{};  // epoch: not sent
  };
  // A gang's heterogeneous job: one per assembly and start of its gang. Recorded in
  // <assembly dir>/.gang/gang so that a restarted server finds it again.
  struct Gang {
    std::string job_name;                   // tarn.<user>.<assembly>.gang.<n>
    std::string partition;                  // "" = the configured one
    SlurmPriority priority;                 // of its assembly, when it was asked for
    std::map<std::string, int> group_of;    // tarn component -> het group
    std::vector<std::string> component_of;  // het group -> tarn component
    std::vector<HetComponent> components;   // by het group
    int64_t job_id = 0;                     // the leader's; 0 until submitted
    bool over = false;  // ended, cancelled or refused: members start as single jobs
    int misses = 0;     // squeue passes that did not list it
  };
  struct Request {
    bool infeasible = false;
    std::string reason;
    bool placed = false;
  };

  explicit SlurmBackend(Options options);
  // To the server's stderr, "tarn: slurm backend: <message>".
  static void LogSlurmError(const std::string& message);
  void StartThreads();  // once Create has checked that Slurm answers

  // Runs a Slurm command with SLURM_CONF set: `env SLURM_CONF=... argv...`; `timeout` 0:
  // options_.command_timeout.
  // With `as` (another account than the server's), the command runs as that account
  // (setpriv): sbatch submits the job as the tenant.
  StatusOr<CommandResult> RunSlurm(const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout = {},
                                   const runtime::RunAs* as = nullptr) const;
  // The partition of the assembly's queue: "default" (or none) is the configured one.
  std::string PartitionFor(const spec::Assembly& assembly) const;
  // The configured queue of the assembly's (QueueConfig's defaults when none is).
  scheduler::QueueConfig QueueOf(const spec::Assembly& assembly) const;
  // Its tarn.priority (the queue's default when unset) as nice and QOS (MapPriority).
  SlurmPriority PriorityOf(const spec::Assembly& assembly) const;
  // An sbatch request with the configured account, QOS (or `priority`'s) and extra
  // options, `priority`'s nice, and (for a `dir`) its output files and script:
  // <dir>/stdout.log, stderr.log, job.sh.
  SbatchRequest NewSbatch(const std::string& job_name, const std::string& partition,
                          const SlurmPriority& priority, const std::string& dir) const;
  StatusOr<std::vector<SlurmJob>> ListJobs() const;
  // The node inventory (sinfo --json) is read by Create and then by the poller every few
  // seconds, never on the service loop's calls (a controller that does not answer would
  // block them); those read the last good one.
  Status RefreshNodes();
  std::vector<SlurmNode> CachedNodes() const;

  LaunchContext ContextFor(const std::string& user) const;
  // The account `user`'s jobs run as (Options::run_as_policy); an error says why none may.
  StatusOr<runtime::RunAs> RunAsFor(const std::string& user, bool privileged) const;
  // Assigns numbers to the instance and to every instance its TF_CONFIG names; then the
  // lookup BuildContainerSpec uses.
  StatusOr<spec::PortLookup> AssignPorts(const spec::Assembly& assembly,
                                         const service::InstanceRef& ref);
  std::string InstanceDir(const service::InstanceRef& ref) const;
  std::string AssemblyDir(const std::string& user, const std::string& assembly) const;

  void DoLaunch(const spec::Assembly& assembly, const service::InstanceRef& ref,
                const std::string& container_id);
  // A gang member's start: submits the gang's job first when it has none, then writes the
  // member's step scripts and its request. False (nothing done) when the member is to run
  // as a job of its own instead.
  bool LaunchMember(const spec::Assembly& assembly, const spec::Component& component,
                    const service::InstanceRef& ref, const std::string& container_id,
                    const runtime::RunAs& as);
  // Writes the gang's files and submits its job; false (the gang is over) when sbatch
  // refuses it.
  bool SubmitGang(const std::string& gang_key, const std::string& gang_dir,
                  const runtime::RunAs& as);
  // The gang of "user/assembly", from memory or its file; nullptr when none.
  Gang* FindGang(const std::string& gang_key);  // REQUIRES: mu_ held
  std::string GangDir(const std::string& user, const std::string& assembly) const;
  // The server's own records, which a restarted server trusts (which job holds a start,
  // which holds a gang): in <assembly dir>/.jobs/ (0700), never in a directory a job may
  // write. One per instance ("<job id> <container id> [<het group>]") and one per gang.
  std::string JobRecord(const service::InstanceRef& ref) const;
  std::string GangRecord(const std::string& gang_key) const;  // gang_key: "user/assembly"
  Status WriteRecord(const std::string& file, const std::string& text) const;
  // Writes everything a start needs but its Slurm submission: the directories, spec.json
  // (the shim's spec) and the name files; moves the previous logs aside. The instance's
  // directories belong to `as`, whose job writes its logs, address and exit there.
  StatusOr<runtime::ContainerSpec> PrepareInstance(const spec::Assembly& assembly,
                                                   const spec::Component& component,
                                                   const service::InstanceRef& ref,
                                                   const std::string& container_id,
                                                   const runtime::RunAs& as);
  // Writes spec.json, job.sh and the name files; returns the sbatch argv.
  StatusOr<std::vector<std::string>> PrepareJob(const spec::Assembly& assembly,
                                                const spec::Component& component,
                                                const service::InstanceRef& ref,
                                                const std::string& container_id,
                                                const runtime::RunAs& as);
  void DoStop(const service::InstanceRef& ref, const std::string& container_id);
  void DoRecover(const service::InstanceRef& ref, const std::string& container_id);
  void DoProbe(const spec::Assembly& assembly, const service::InstanceRef& ref,
               const std::string& container_id, const spec::ReadinessCheck& check);
  void DoCleanup(const service::InstanceRef& ref, bool logs);
  void DoDestroyAssembly(const std::string& user, const std::string& assembly);

  // One pass of the poller over `jobs` (squeue's answer).
  void Observe(const std::vector<SlurmJob>& jobs);
  // Observe's part for one gang member.
  void ObserveMember(const std::string& key, Tracked& t,
                     const std::vector<SlurmJob>& jobs);  // REQUIRES: mu_ held
  // SIGTERM to a member's step, `<component job id>.<step>` (SIGKILL with `hard`).
  void SignalStep(const std::string& key, int64_t component_job, int64_t step, bool hard);
  void PollLoop();

  void Emit(service::BackendEvent event);  // REQUIRES: mu_ held
  // The address file the job (or step) wrote for `t`.
  StatusOr<ReportedAddress> ReadAddress(const Tracked& t) const;
  // kWaiting with `detail`, once per change of it; kStarted at `a`.
  void NoteWaiting(const std::string& key, Tracked& t,
                   const std::string& detail);  // REQUIRES: mu_ held
  void NoteStarted(const std::string& key, Tracked& t,
                   const ReportedAddress& a);  // REQUIRES: mu_ held
  void EmitStartFailed(const std::string& key, const std::string& container_id,
                       const std::string& detail);
  // kExited once per container id; stops tracking it when it is the one tracked.
  // `container_id` by value: it may be a field of the entry this erases.
  void ReportExit(const std::string& key, std::string container_id, runtime::ExitInfo exit,
                  bool preempted = false);  // REQUIRES: mu_ held
  runtime::ExitInfo MadeUpExit(const std::string& diagnostics) const;
  // How a job that squeue no longer lists ended: Slurm's jobcomp record of it when the
  // controller keeps a jobcomp/filetxt file, else the shim's exit.json in the instance
  // directory (removed before every start, so one there is this start's), else a made-up
  // exit saying `lost`.
  runtime::ExitInfo EndOfVanishedJob(const Tracked& t, const std::string& lost) const;

  const Options options_;
  std::string slurm_conf_;           // resolved: options_.slurm_conf or $SLURM_CONF at Create
  std::unique_ptr<PortBook> ports_;  // set by Create
  std::string jobcomp_file_;         // JobCompLoc of jobcomp/filetxt, read by Create; "" none

  mutable std::mutex place_mu_;
  std::unordered_map<std::string, Request> requests_;  // by key; guarded by place_mu_

  mutable std::mutex nodes_mu_;
  std::vector<SlurmNode> nodes_;  // guarded by nodes_mu_
  std::chrono::steady_clock::time_point nodes_read_{};

  std::mutex mu_;  // guards the maps below and every call of options_.events
  std::unordered_map<std::string, Tracked> tracked_;  // by instance key
  ExitLedger exits_;  // the containers whose kExited was sent ("exactly once")
  std::unordered_map<std::string, std::string> hosts_lines_;  // by "user/assembly"
  std::map<std::string, Gang> gangs_;                         // by "user/assembly"

  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool stopping_ = false;  // guarded by poll_mu_
  std::thread poller_;

  std::unique_ptr<SerialQueue> work_;  // last two: their threads use everything above
  std::unique_ptr<SerialQueue> probes_;
};

}  // namespace tarn::backend
