// The Slurm command lines the slurm backend runs and the answers it reads, as pure functions:
// the sbatch argv and batch script of an instance, the jobs of `squeue --json` and how each
// maps to tarn (pending with a reason, running, or ended with an ExitInfo), the nodes of
// `sinfo --json`. Kept apart from SlurmBackend so that they are tested without a Slurm.
//
// Facts relied on (Slurm 22.05, tests/slurm/README.md): squeue's exit_code and
// derived_exit_code are raw wait statuses; an OOM kill inside an srun step ends the job as
// FAILED with derived_exit_code 253 (0:125); ended jobs stay in squeue for MinJobAge.
// Thread-compatible (no state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/container_spec.h"

namespace tarn::backend {

// One job of `squeue --json` (the fields tarn reads).
struct SlurmJob {
  int64_t job_id = 0;
  std::string name;
  std::string state;   // PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, ...
  std::string reason;  // state_reason: None, Resources, Priority, NonZeroExitCode, NodeDown...
  std::string nodes;
  int64_t exit_code = 0;  // raw wait status
  int64_t derived_exit_code = 0;
  int64_t end_time = 0;  // seconds since the epoch (in the future while running)
  // A component of a heterogeneous job: the leader's id (0 when not heterogeneous) and
  // which component (0, 1, ...). Each component has its own job_id (leader + offset).
  int64_t het_job_id = 0;
  int64_t het_job_offset = 0;
};

// One node of `sinfo --json`.
struct SlurmNode {
  std::string name;
  std::string address;
  int64_t cpus = 0;
  int64_t memory_mib = 0;
  int64_t gpus = 0;  // from gres "gpu:2" / "gpu:a100:2(S:0)"
  int64_t alloc_cpus = 0;
  int64_t alloc_memory_mib = 0;
  int64_t alloc_gpus = 0;  // from gres_used
  std::string state;       // idle, mixed, allocated, down, ...
  std::vector<std::string> partitions;
};

// `text` is squeue's or sinfo's --json output; errors name the command.
StatusOr<std::vector<SlurmJob>> ParseSqueueJson(const std::string& text);
StatusOr<std::vector<SlurmNode>> ParseSinfoJson(const std::string& text);

// The final record of `job_id` in a jobcomp/filetxt file (one "JobId=N ... JobState=S ...
// EndTime=T ... DerivedExitCode=E:S ExitCode=E:S" line per ended job; the last one when a
// requeued job has several), as the SlurmJob squeue would have shown: exit codes as wait
// statuses, end_time from EndTime (the controller's local time), no reason. nullopt when
// the file has no such line.
std::optional<SlurmJob> FindJobCompRecord(const std::string& text, int64_t job_id);
// From `scontrol show config`: the file jobcomp/filetxt writes (JobCompLoc), "" when the
// controller keeps no such file (another JobCompType, or none).
std::string JobCompFile(const std::string& show_config);

// How a job stands, for tarn.
struct JobView {
  enum class Phase { kPending, kRunning, kEnded };
  Phase phase = Phase::kPending;
  // kPending: "Slurm: PENDING (Resources)"; kEnded: exit.diagnostics says the same.
  std::string detail;
  runtime::ExitInfo exit;  // kEnded: code or signal from the wait status, OOM, diagnostics
  bool preempted = false;  // kEnded: Slurm preempted it (PREEMPTED: its QOS or partition rules)
};
// COMPLETING counts as running (its processes are being killed; the end state follows). An
// ended job's ExitInfo is stamped with its end_time; an end other than COMPLETED never
// reads as exit code 0.
JobView ViewJob(const SlurmJob& job);

// "tarn.<user>.<assembly>.<instance>.<n>": the job of a start, found again by a restarted
// server. `container_id` is the Manager's "<user>_<assembly>_<instance>_<n>"; its counter
// <n> tells starts apart (the whole id when it has no counter).
std::string JobName(const std::string& user, const std::string& assembly,
                    const std::string& instance, const std::string& container_id);

// Everything sbatch is told about one instance.
struct SbatchRequest {
  std::string job_name;
  int64_t cpus = 1;
  int64_t memory_mib = 0;  // always passed (Slurm's default may be a whole node)
  int64_t gpus = 0;
  std::string partition, account, qos;  // "" = Slurm's default
  // --nice=N when > 0: Slurm subtracts it from the job's priority (any user may lower
  // their own; only an operator may raise one).
  int64_t nice = 0;
  std::vector<std::string> extra_options;
  std::string stdout_path, stderr_path;
  std::string script_path;
  // The job's working directory (--chdir), when set: sbatch's own is the server's, which the
  // tenant the job runs as may not enter.
  std::string chdir;
  // `sbatch --test-only ... --wrap=true`: asks Slurm whether it could ever run such a job
  // (its reason when not) without submitting anything; the paths are not used.
  bool test_only = false;
};
// How a tarn priority (tarn.priority, capped by its queue's max-application-priority) is
// said to Slurm: nice = max_priority - priority, so the most urgent work of a queue has
// none and the rest queues behind it in Slurm's own order (its priority plugins subtract
// nice), with no privilege needed; and the QOS of the `priority_qos` entry with the
// highest priority at or below it ("" when none: the configured one), for sites whose
// Slurm preempts by QOS (PreemptType=preempt/qos).
struct PriorityQos {
  int priority = 0;
  std::string qos;
  friend bool operator==(const PriorityQos&, const PriorityQos&) = default;
};
struct SlurmPriority {
  int64_t nice = 0;
  std::string qos;
};
SlurmPriority MapPriority(int priority, int max_priority, const std::vector<PriorityQos>& table);

// sbatch --parsable --no-requeue --job-name=... --cpus-per-task=N --mem=NM [--gres=gpu:N]
// [--partition/--account/--qos] [--nice=N] [extra] [--chdir=DIR] -o OUT -e ERR SCRIPT. One argv
// entry per option, for exec (never a shell).
std::vector<std::string> SbatchArgv(const SbatchRequest& r);
// One component of a gang's heterogeneous job: `tasks` members of one tarn component, each
// with `cpus`, `memory_mib` (as --mem-per-cpu, rounded up, so memory follows the tasks to
// whichever node) and `gpus`.
struct HetComponent {
  int64_t tasks = 1;
  int64_t cpus = 1;
  int64_t memory_mib = 0;
  int64_t gpus = 0;
};
// sbatch --parsable --no-requeue --job-name=N [common] -o OUT -e ERR <component 0> : [common]
// <component 1> : ... SCRIPT, where a component is --ntasks=T --cpus-per-task=C
// [--mem-per-cpu=MM] [--gpus-per-task=G] and `common` the partition/account/QOS/nice/extra
// options (repeated for every component: Slurm reads them per component). `r`'s cpus,
// memory and gpus are not used.
std::vector<std::string> GangSbatchArgv(const SbatchRequest& r,
                                        const std::vector<HetComponent>& components);
// The srun options of one member's step in component `group`: --het-group=G --ntasks=1
// --exact --cpus-per-task=C [--mem-per-cpu=MM] [--gpus-per-task=G] (the component's
// per-task share, so the members of a component run side by side).
std::vector<std::string> StepSrunOptions(int group, const HetComponent& component);

// sbatch --parsable's answer "1234" or "1234;cluster" -> 1234.
StatusOr<int64_t> ParseSbatchJobId(const std::string& out);
// Slurm's own words from a failed command's stderr: "sbatch: error: Batch job submission
// failed: Requested node configuration is not available" -> "Batch job submission failed:
// Requested node configuration is not available" (the last error line; all of it if none).
std::string SlurmError(const std::string& err);

// What the batch script needs to run one instance under tarn-shim.
struct BatchScript {
  std::string slurm_conf;    // exported for sinfo/srun inside the job ("" = inherited)
  std::string instance_dir;  // the shim directory: spec.json, address file, exit.json
  std::string shim_binary;   // tarn-shim, at a path every node sees
  int64_t cpus = 1;
  int64_t gpus = 0;
  // Set for a member of a gang: the script is the body of an srun step in the gang's
  // allocation (it runs the shim itself), and its address line also names this container
  // id and the step ("<ip> <node> <job id> <container id> <step id>"). Before anything it
  // exits 143 when <instance_dir>/stop names this container (stopped before it ran).
  std::string step_container_id;
};
// A /bin/sh script: finds the node's address (`sinfo -h -N -n $SLURMD_NODENAME -o %o`),
// writes "<ip> <node> <job id>" to <instance_dir>/address (the job reports its address
// back), then execs `srun ... tarn-shim --foreground <instance_dir> --env TARN_IP=<ip>
// --env CUDA_VISIBLE_DEVICES=... --env NVIDIA_VISIBLE_DEVICES=...` so that the job ends as
// the instance does. Every path is single-quoted.
std::string RenderBatchScript(const BatchScript& b);
// What a gang's batch script does: holds the heterogeneous allocation and, for every
// request file tarn writes into <gang_dir>/requests/ (its content: an instance directory),
// runs that directory's launch.sh in the background (srun of the member's step, then its
// end recorded in step.end). It takes a request by renaming it, so tarn can withdraw one
// that was not taken yet by renaming it first.
std::string RenderGangScript(const std::string& slurm_conf, const std::string& gang_dir);
// A member's launch.sh: `srun <srun_options> -o stdout.log -e stderr.log /bin/sh step.sh`,
// then "<container id> <srun's exit status>" into <instance_dir>/step.end (atomically).
std::string RenderLaunchScript(const std::string& instance_dir, const std::string& container_id,
                               const std::string& job_name,
                               const std::vector<std::string>& srun_options);

// The address file's content "<ip> <node> <job id>", and for a gang member's step also
// "<container id> <step id>".
struct ReportedAddress {
  std::string ip, node;
  int64_t job_id = 0;
  std::string container_id;  // gang steps only
  int64_t step_id = -1;      // gang steps only
};
StatusOr<ReportedAddress> ParseAddressFile(const std::string& text);

// A gang member's step.end: "<container id> <srun's exit status>".
struct StepEnd {
  std::string container_id;
  int exit_status = 0;
};
StatusOr<StepEnd> ParseStepEnd(const std::string& text);

// "'it'\''s'": one shell word.
std::string ShellQuote(const std::string& s);

}  // namespace tarn::backend
