// SlurmBackend (slurm_backend.h), the container work on its serial queue: preparing and
// submitting an instance's job or a gang member's step, the gangs' heterogeneous jobs and
// their records, stopping, recovering, probing and cleaning up.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/slurm_backend.h"
#include "backend/work_queues.h"
#include "common/file.h"
#include "common/number.h"
#include "service/readiness_probe.h"

namespace tarn::backend {

using service::BackendEvent;
using service::InstanceRef;

namespace {

namespace fs = std::filesystem;

// What a Launch recorded in the instance directory for `container_id`: "<job id>
// <container id>", and for a gang member " <het group>" (its job id is the gang's).
struct RecordedStart {
  int64_t job_id = 0;  // 0: none
  int het_group = -1;
};
RecordedStart RecordedJob(const std::string& record, const std::string& container_id) {
  RecordedStart r;
  auto text = ReadFileToString(record, 4096);
  if (!text.ok()) return r;
  std::stringstream in(*text);
  std::string id, container, group;
  if (!(in >> id >> container) || container != container_id) return r;
  if (id.empty() || id.size() > 18 || !std::all_of(id.begin(), id.end(), ::isdigit)) return r;
  r.job_id = std::stoll(id);
  if (in >> group) {
    std::optional<int64_t> g = ParseInt64(group);
    if (g && *g >= 0 && *g < 1000) r.het_group = static_cast<int>(*g);
  }
  return r;
}

// The job id of component `group` of heterogeneous job `leader` before squeue has shown it:
// Slurm numbers the components leader, leader+1, ... (het_job_id_set "N-M").
int64_t ComponentJob(int64_t leader, int group) { return leader + group; }

}  // namespace

// ---- Containers: the work ----

namespace {

// mkdir -p `path` (0750), owned by `as` when the server is root. `path`'s parent must be the
// server's (so that no job can have put a link at `path`).
Status GiveDirectory(const std::string& path, const runtime::RunAs& as) {
  RETURN_IF_ERROR(MakeDirectories(path, 0750));
  if (::geteuid() == 0 && ::lchown(path.c_str(), as.account.uid, as.account.gid) != 0) {
    return InternalError(path + ": cannot give it to " + as.account.name + " (uid " +
                         std::to_string(as.account.uid) + "): " + std::strerror(errno));
  }
  return OkStatus();
}

}  // namespace

LaunchContext SlurmBackend::ContextFor(const std::string& user) const {
  LaunchContext ctx;
  // TARN_SHARED_DIR and the work directories go under <shared_dir>/.tarn/ (a user name,
  // a DNS label, never starts with a dot, so no user's directory meets them).
  ctx.state_dir = options_.shared_dir + "/.tarn";
  ctx.user = user;
  ctx.domain = options_.domain;
  ctx.bin_dir = options_.bin_dir;
  // The job runs as the account that submits it (RunAsFor); the shim keeps it.
  ctx.run_as.account.uid = ::geteuid();
  ctx.run_as.account.gid = ::getegid();
  ctx.run_as.reason = "Slurm runs jobs as the account that submits them";
  return ctx;
}

StatusOr<runtime::RunAs> SlurmBackend::RunAsFor(const std::string& user, bool privileged) const {
  StatusOr<runtime::RunAs> as = runtime::ResolveRunAs(options_.run_as_policy, user, privileged,
                                                      ::geteuid(), options_.accounts);
  if (as.ok() && ::geteuid() != 0) {
    as->reason = "tarn server is not root: Slurm runs every job as the server's account";
  }
  return as;
}

std::string SlurmBackend::AssemblyDir(const std::string& user, const std::string& assembly) const {
  return options_.shared_dir + "/" + user + "/" + assembly;
}

std::string SlurmBackend::InstanceDir(const InstanceRef& ref) const {
  return AssemblyDir(ref.user, ref.assembly) + "/" + ref.instance;
}

StatusOr<spec::PortLookup> SlurmBackend::AssignPorts(const spec::Assembly& assembly,
                                                     const InstanceRef& ref) {
  const spec::Component* own = spec::FindComponent(assembly, ref.component);
  if (own == nullptr) return NotFoundError("no component " + ref.component);
  RETURN_IF_ERROR(
      ports_->Assign(ref.user, ref.assembly, ref.instance, spec::DeclaredPorts(*own)).status());
  // TF_CONFIG names every member of the training cluster, started or not.
  if (own->tf_role != spec::TfRole::kNone) {
    for (const spec::Component& c : assembly.components) {
      if (c.tf_role == spec::TfRole::kNone) continue;
      for (int64_t i = 0; i < c.number_of_containers; ++i) {
        RETURN_IF_ERROR(ports_
                            ->Assign(ref.user, ref.assembly, spec::InstanceName(c.name, i),
                                     spec::DeclaredPorts(c))
                            .status());
      }
    }
  }
  PortBook* book = ports_.get();
  return spec::PortLookup([book, user = ref.user, name = ref.assembly](
                              const std::string& instance, const spec::NamedPort& declared) {
    return book->Find(user, name, instance, declared.name).value_or(declared.port);
  });
}

std::vector<spec::NamedPort> SlurmBackend::InstancePorts(const InstanceRef& ref,
                                                         const spec::Component& component) const {
  const std::vector<spec::NamedPort> declared = spec::DeclaredPorts(component);
  StatusOr<std::vector<spec::NamedPort>> assigned =
      ports_->Assign(ref.user, ref.assembly, ref.instance, declared);
  if (!assigned.ok()) {
    LogSlurmError(ref.Key() + ": " + assigned.status().message());
    return declared;
  }
  return *assigned;
}

StatusOr<runtime::ContainerSpec> SlurmBackend::PrepareInstance(const spec::Assembly& assembly,
                                                               const spec::Component& component,
                                                               const InstanceRef& ref,
                                                               const std::string& container_id,
                                                               const runtime::RunAs& as) {
  LaunchContext ctx = ContextFor(ref.user);
  ctx.container_id = container_id;
  ctx.run_as = as;
  if (options_.secrets) ctx.assembly_secret = options_.secrets(ref.user, ref.assembly);
  ctx.ip = "";  // known only where the job runs: the batch script passes TARN_IP to the shim
  // A peer's address is its node's, once its job runs and has reported it.
  ctx.peer_address = [dir = AssemblyDir(ref.user, ref.assembly)](const std::string& peer) {
    StatusOr<std::string> text = ReadFileNoFollow(dir + "/" + peer + "/address", 4096);
    if (!text.ok()) return std::string();
    StatusOr<ReportedAddress> a = ParseAddressFile(*text);
    return a.ok() ? a->ip : std::string();
  };
  ASSIGN_OR_RETURN(ctx.ports, AssignPorts(assembly, ref));
  ASSIGN_OR_RETURN(runtime::ContainerSpec spec,
                   BuildContainerSpec(assembly, component, ref.index, {}, ctx));
  const std::string dir = InstanceDir(ref);
  spec.shim_dir = dir;
  // Slurm's cgroup confines the job. Its namespaces: full ones for a job that runs as root
  // (a privileged container), a user namespace for a tenant's job submitted by a root
  // server (the shim runs as the tenant), none for the jobs of a server that is not root.
  const bool root_server = ::geteuid() == 0;
  spec.isolate = root_server && as.account.uid == 0;
  spec.user_namespace = root_server && as.account.uid != 0;
  spec.limits.gpu_minors.clear();

  // The job writes its logs, address and exit in its instance directory, and works in its
  // work and shared directories: they are its account's, and nobody else's (0750). Each
  // one's parent is the server's, so no job can put a link where these are made.
  const std::string shared = backend::SharedDir(ctx, ref.assembly);
  for (const std::string& path : {dir, spec.work_dir, shared}) {
    RETURN_IF_ERROR(GiveDirectory(path, as));
  }
  if (spec.isolate || spec.user_namespace) {
    const std::string names = options_.shared_dir + "/.tarn/names/" + ref.user + "/" + ref.assembly;
    switch (options_.names.mode) {
      case NameResolution::Mode::kNone:
        break;
      case NameResolution::Mode::kResolvConf:
        RETURN_IF_ERROR(MakeDirectories(names, 0755));
        RETURN_IF_ERROR(RewriteInPlace(
            names + "/resolv.conf",
            RenderResolvConf(options_.names.resolver_ip, ref.user, ref.assembly, options_.domain)));
        spec.resolv_conf = names + "/resolv.conf";
        break;
      case NameResolution::Mode::kHosts: {
        std::string lines;
        {
          std::lock_guard<std::mutex> lock(mu_);
          lines = hosts_lines_[ref.user + "/" + ref.assembly];
        }
        RETURN_IF_ERROR(MakeDirectories(names, 0755));
        RETURN_IF_ERROR(RewriteInPlace(
            names + "/hosts", RenderHostsFile(ReadFileToString("/etc/hosts", 1 << 20).value_or(""),
                                              lines, ref.user, ref.assembly)));
        spec.hosts_file = names + "/hosts";
        break;
      }
    }
  }
  // The previous run's output stays for one generation, as locally.
  for (const char* log : {"stdout.log", "stderr.log"}) {
    std::error_code ec;
    if (fs::exists(dir + "/" + log, ec)) {
      fs::rename(dir + "/" + log, dir + "/" + log + ".previous", ec);
    }
  }
  ::unlink(JobRecord(ref).c_str());
  for (const char* stale :
       {"address", "address.tmp", "exit.json", "stop", "step.end", "step.end.tmp"}) {
    std::error_code ec;
    fs::remove(dir + "/" + stale, ec);
  }
  RETURN_IF_ERROR(runtime::WriteFileAtomically(dir + "/spec.json", runtime::ToJson(spec).dump(2)));
  return spec;
}

StatusOr<std::vector<std::string>> SlurmBackend::PrepareJob(const spec::Assembly& assembly,
                                                            const spec::Component& component,
                                                            const InstanceRef& ref,
                                                            const std::string& container_id,
                                                            const runtime::RunAs& as) {
  RETURN_IF_ERROR(PrepareInstance(assembly, component, ref, container_id, as).status());
  const std::string dir = InstanceDir(ref);
  BatchScript b;
  b.slurm_conf = slurm_conf_;
  b.instance_dir = dir;
  b.shim_binary = options_.bin_dir + "/tarn-shim";
  b.cpus = component.resource.cpus.value_or(1);
  b.gpus = component.resource.gpus.value_or(0);
  RETURN_IF_ERROR(runtime::WriteFileAtomically(dir + "/job.sh", RenderBatchScript(b), true, 0755));

  SbatchRequest r = NewSbatch(JobName(ref.user, ref.assembly, ref.instance, container_id),
                              PartitionFor(assembly), PriorityOf(assembly), dir);
  r.cpus = b.cpus;
  r.memory_mib = component.resource.memory_mib.value_or(0);
  r.gpus = b.gpus;
  return SbatchArgv(r);
}

void SlurmBackend::DoLaunch(const spec::Assembly& assembly, const InstanceRef& ref,
                            const std::string& container_id) {
  const std::string key = ref.Key();
  const spec::Component* component = spec::FindComponent(assembly, ref.component);
  if (component == nullptr) {
    return EmitStartFailed(
        key, container_id,
        "assembly \"" + assembly.name + "\" has no component \"" + ref.component + "\"");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tracked_.find(key);
    if (it != tracked_.end()) {
      const std::string other = it->second.container_id;
      const int64_t job = it->second.job_id;
      BackendEvent e;
      e.kind = BackendEvent::Kind::kStartFailed;
      e.key = key;
      e.container_id = container_id;
      e.detail = key + " already runs as container " + other + " (Slurm job " +
                 std::to_string(job) + "); not starting a second copy";
      return Emit(std::move(e));
    }
  }
  if (Status s = CheckSharedDir(options_.shared_dir); !s.ok()) {
    return EmitStartFailed(key, container_id, s.message());
  }
  // The shim runs the instance on its node as a process: no image.
  if (Status s = CheckArtifactRuns(*component, false); !s.ok()) {
    return EmitStartFailed(key, container_id, s.message());
  }
  StatusOr<runtime::RunAs> as = RunAsFor(ref.user, component->run_privileged_container);
  if (!as.ok()) return EmitStartFailed(key, container_id, as.status().message());
  if (LaunchMember(assembly, *component, ref, container_id, *as)) return;
  StatusOr<std::vector<std::string>> argv =
      PrepareJob(assembly, *component, ref, container_id, *as);
  if (!argv.ok()) return EmitStartFailed(key, container_id, argv.status().message());
  StatusOr<CommandResult> r = RunSlurm(*argv, {}, &*as);
  if (!r.ok()) return EmitStartFailed(key, container_id, "sbatch: " + r.status().message());
  if (!r->success()) return EmitStartFailed(key, container_id, "sbatch: " + SlurmError(r->err));
  StatusOr<int64_t> job = ParseSbatchJobId(r->out);
  if (!job.ok()) return EmitStartFailed(key, container_id, job.status().message());
  // Recorded beside the job, so that a restarted server knows which job this start was
  // even once squeue has forgotten it.
  Status recorded = WriteRecord(JobRecord(ref), std::to_string(*job) + " " + container_id + "\n");
  if (!recorded.ok()) LogSlurmError(key + ": " + recorded.message());
  std::lock_guard<std::mutex> lock(mu_);
  Tracked t;
  t.container_id = container_id;
  t.job_id = *job;
  t.instance_dir = InstanceDir(ref);
  tracked_[key] = std::move(t);
}

std::string SlurmBackend::JobRecord(const InstanceRef& ref) const {
  return AssemblyDir(ref.user, ref.assembly) + "/.jobs/" + ref.instance;
}

std::string SlurmBackend::GangRecord(const std::string& gang_key) const {
  // An instance's name always has a '-': no instance's record is "gang".
  return options_.shared_dir + "/" + gang_key + "/.jobs/gang";
}

Status SlurmBackend::WriteRecord(const std::string& file, const std::string& text) const {
  RETURN_IF_ERROR(MakeDirectories(fs::path(file).parent_path().string(), 0700));
  return runtime::WriteFileAtomically(file, text);
}

std::string SlurmBackend::GangDir(const std::string& user, const std::string& assembly) const {
  // Instance names never start with a dot: no instance directory meets it.
  return AssemblyDir(user, assembly) + "/.gang";
}

SlurmBackend::Gang* SlurmBackend::FindGang(const std::string& gang_key) {
  auto it = gangs_.find(gang_key);
  if (it != gangs_.end()) return &it->second;
  // A restarted server: the gang file says which job holds the allocation.
  const std::string file = GangRecord(gang_key);
  StatusOr<std::string> text = ReadFileToString(file, 1 << 16);
  if (!text.ok()) return nullptr;
  std::stringstream in(*text);
  Gang g;
  std::string job, component;
  HetComponent h;
  if (!(in >> job >> g.job_name >> g.partition) || !ParseInt64(job)) {
    LogSlurmError(file + ": unreadable; the gang's members start as jobs of their own");
    return nullptr;
  }
  g.job_id = *ParseInt64(job);
  if (g.partition == "-") g.partition.clear();
  while (in >> component >> h.tasks >> h.cpus >> h.memory_mib >> h.gpus) {
    g.group_of[component] = static_cast<int>(g.components.size());
    g.component_of.push_back(component);
    g.components.push_back(h);
  }
  return &(gangs_[gang_key] = std::move(g));
}

bool SlurmBackend::SubmitGang(const std::string& gang_key, const std::string& gang_dir,
                              const runtime::RunAs& as) {
  Gang g;
  {
    std::lock_guard<std::mutex> lock(mu_);
    g = gangs_.at(gang_key);
  }
  auto refuse = [&](const std::string& why) {
    LogSlurmError(gang_key + ": the gang's heterogeneous job: " + why +
                  "; its members run as jobs of their own");
    std::lock_guard<std::mutex> lock(mu_);
    gangs_.at(gang_key).over = true;
    return false;
  };
  // The gang's job (the tenant's) writes its logs here and takes its requests.
  Status s = RemoveTree(gang_dir);
  if (s.ok()) s = GiveDirectory(gang_dir, as);
  if (s.ok()) s = GiveDirectory(gang_dir + "/requests", as);
  if (s.ok()) {
    s = runtime::WriteFileAtomically(gang_dir + "/job.sh", RenderGangScript(slurm_conf_, gang_dir),
                                     true, 0755);
  }
  if (!s.ok()) return refuse(s.message());
  StatusOr<CommandResult> out = RunSlurm(
      GangSbatchArgv(NewSbatch(g.job_name, g.partition, g.priority, gang_dir), g.components), {},
      &as);
  if (!out.ok()) return refuse("sbatch: " + out.status().message());
  if (!out->success()) return refuse("sbatch: " + SlurmError(out->err));
  StatusOr<int64_t> job = ParseSbatchJobId(out->out);
  if (!job.ok()) return refuse(job.status().message());
  // Recorded so that a restarted server finds the allocation again.
  std::string text = std::to_string(*job) + " " + g.job_name + " " +
                     (g.partition.empty() ? "-" : g.partition) + "\n";
  for (size_t i = 0; i < g.components.size(); ++i) {
    const HetComponent& h = g.components[i];
    text += g.component_of[i] + " " + std::to_string(h.tasks) + " " + std::to_string(h.cpus) + " " +
            std::to_string(h.memory_mib) + " " + std::to_string(h.gpus) + "\n";
  }
  s = WriteRecord(GangRecord(gang_key), text);
  if (!s.ok()) LogSlurmError(gang_key + ": " + s.message());
  std::lock_guard<std::mutex> lock(mu_);
  gangs_.at(gang_key).job_id = *job;
  return true;
}

bool SlurmBackend::LaunchMember(const spec::Assembly& assembly, const spec::Component& component,
                                const InstanceRef& ref, const std::string& container_id,
                                const runtime::RunAs& as) {
  const std::string key = ref.Key();
  const std::string gang_key = ref.user + "/" + ref.assembly;
  int group = -1;
  HetComponent share;
  int64_t job = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Gang* g = FindGang(gang_key);
    if (g == nullptr || g->over) return false;
    auto it = g->group_of.find(ref.component);
    // Beyond the gang's first size (flexed up): a job of its own.
    if (it == g->group_of.end() || ref.index >= g->components[it->second].tasks) return false;
    group = it->second;
    share = g->components[group];
    job = g->job_id;
  }
  // The gang's job runs as the tenant's plain account; a member that is to run as another
  // (a privileged container) is a job of its own.
  StatusOr<runtime::RunAs> gang_as = RunAsFor(ref.user, false);
  if (!gang_as.ok() || gang_as->account.uid != as.account.uid) return false;
  const std::string gang_dir = GangDir(ref.user, ref.assembly);
  if (job == 0) {
    if (!SubmitGang(gang_key, gang_dir, *gang_as)) return false;
    std::lock_guard<std::mutex> lock(mu_);
    job = gangs_.at(gang_key).job_id;
  }
  StatusOr<runtime::ContainerSpec> spec =
      PrepareInstance(assembly, component, ref, container_id, as);
  if (!spec.ok()) {
    EmitStartFailed(key, container_id, spec.status().message());
    return true;
  }
  const std::string dir = InstanceDir(ref);
  BatchScript b;
  b.slurm_conf = slurm_conf_;
  b.instance_dir = dir;
  b.shim_binary = options_.bin_dir + "/tarn-shim";
  b.cpus = share.cpus;
  b.gpus = share.gpus;
  b.step_container_id = container_id;
  const std::string request = gang_dir + "/requests/" + ref.instance;
  Status s = runtime::WriteFileAtomically(dir + "/step.sh", RenderBatchScript(b));
  if (s.ok()) {
    s = runtime::WriteFileAtomically(
        dir + "/launch.sh",
        RenderLaunchScript(dir, container_id,
                           JobName(ref.user, ref.assembly, ref.instance, container_id),
                           StepSrunOptions(group, share)));
  }
  if (s.ok()) {
    s = WriteRecord(JobRecord(ref),
                    std::to_string(job) + " " + container_id + " " + std::to_string(group) + "\n");
  }
  // Last: the request, which the gang's script takes as soon as it runs.
  if (s.ok()) s = runtime::WriteFileAtomically(request, dir + "\n");
  if (!s.ok()) {
    EmitStartFailed(key, container_id, s.message());
    return true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Tracked t;
  t.container_id = container_id;
  t.job_id = job;
  t.instance_dir = dir;
  t.het_group = group;
  t.gang = gang_key;
  tracked_[key] = std::move(t);
  return true;
}

void SlurmBackend::SignalStep(const std::string& key, int64_t component_job, int64_t step,
                              bool hard) {
  // "<leader>+<group>.<step>" is refused for a step; the component's own id is not.
  std::vector<std::string> argv = {"scancel"};
  if (!hard) argv.push_back("--signal=TERM");
  argv.push_back(std::to_string(component_job) + "." + std::to_string(step));
  StatusOr<CommandResult> r = RunSlurm(argv);
  if (!r.ok() || !r->success()) {
    LogSlurmError(key + ": scancel " + argv.back() + ": " +
                  (r.ok() ? SlurmError(r->err) : r.status().message()));
  }
}

void SlurmBackend::DoStop(const InstanceRef& ref, const std::string& container_id) {
  const std::string key = ref.Key();
  std::string target;  // the job id, or --name=... for a recovered job not yet found
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tracked_.find(key);
    if (it != tracked_.end() && it->second.container_id == container_id &&
        it->second.het_group >= 0) {
      Tracked& t = it->second;
      t.stop_asked = true;
      if (t.step_id >= 0) {
        t.stop_sent = std::chrono::steady_clock::now();
        const int64_t job =
            t.component_job != 0 ? t.component_job : ComponentJob(t.job_id, t.het_group);
        const int64_t step = t.step_id;
        work_->Post([this, key, job, step] { SignalStep(key, job, step, false); });
        return;
      }
      // Not running yet: withdraw the request while the gang's script has not taken it
      // (both rename it; one wins), else tell the step to stop before it runs; the poller
      // signals it if it got further.
      const std::string request = GangDir(ref.user, ref.assembly) + "/requests/" + ref.instance;
      if (::rename(request.c_str(), (request + ".withdrawn").c_str()) == 0) {
        ::unlink((request + ".withdrawn").c_str());
        ReportExit(key, container_id, MadeUpExit("stopped before it started"));
        return;
      }
      Status s = runtime::WriteFileAtomically(t.instance_dir + "/stop", container_id + "\n");
      if (!s.ok()) LogSlurmError(key + ": " + s.message());
      return;
    }
    if (it != tracked_.end() && it->second.container_id == container_id) {
      target = it->second.job_id != 0 ? std::to_string(it->second.job_id)
                                      : "--name=" + it->second.recover_name;
    } else {
      // Never submitted (its Launch failed), or it ended and said so already.
      ReportExit(key, container_id, MadeUpExit("stopped before it started"));
      return;
    }
  }
  StatusOr<CommandResult> r = RunSlurm({"scancel", target});
  if (!r.ok() || !r->success()) {
    LogSlurmError(key + ": scancel " + target + ": " +
                  (r.ok() ? SlurmError(r->err) : r.status().message()));
  }
  // The poller reports the end when squeue shows it.
}

void SlurmBackend::DoRecover(const InstanceRef& ref, const std::string& container_id) {
  // The poller settles it at its next squeue pass that succeeds: while Slurm's controller
  // does not answer, "no job" cannot be told from "cannot tell", and only the first may
  // lead to a new submission.
  Tracked t;
  t.container_id = container_id;
  t.instance_dir = InstanceDir(ref);
  const RecordedStart recorded = RecordedJob(JobRecord(ref), container_id);
  t.job_id = recorded.job_id;
  t.recover_name = JobName(ref.user, ref.assembly, ref.instance, container_id);
  std::lock_guard<std::mutex> lock(mu_);
  if (recorded.het_group >= 0) {
    // A gang member's step: the gang's job is known by its id (and its file).
    t.het_group = recorded.het_group;
    t.gang = ref.user + "/" + ref.assembly;
    t.recover_name.clear();
    FindGang(t.gang);
    // The step id, when it reported one, for a stop.
    StatusOr<ReportedAddress> a = ReadAddress(t);
    if (a.ok() && a->container_id == container_id) t.step_id = a->step_id;
  }
  tracked_[ref.Key()] = std::move(t);
}

void SlurmBackend::DoProbe(const spec::Assembly& assembly, const InstanceRef& ref,
                           const std::string& container_id, const spec::ReadinessCheck& check) {
  BackendEvent e;
  e.kind = BackendEvent::Kind::kProbed;
  e.key = ref.Key();
  e.container_id = container_id;
  const spec::Component* component = spec::FindComponent(assembly, ref.component);
  // The address the job reported: its node's.
  StatusOr<std::string> text = ReadFileNoFollow(InstanceDir(ref) + "/address", 4096);
  StatusOr<ReportedAddress> address =
      text.ok() ? ParseAddressFile(*text)
                : StatusOr<ReportedAddress>(NotFoundError("the job has not reported its address"));
  if (component == nullptr) {
    e.detail = "assembly \"" + assembly.name + "\" has no component \"" + ref.component + "\"";
  } else if (!address.ok()) {
    e.detail = address.status().message();
  } else {
    spec::ReadinessCheck substituted =
        SubstituteCheck(check, assembly, *component, ref.index, container_id, ContextFor(ref.user));
    // Written for the declared numbers; the instance listens on its assigned ones.
    substituted = MapCheckPorts(std::move(substituted), spec::DeclaredPorts(*component),
                                InstancePorts(ref, *component));
    service::ProbeResult r = service::Probe(substituted, address->ip);
    e.ready = r.ready;
    e.detail = std::move(r.detail);
  }
  std::lock_guard<std::mutex> lock(mu_);
  Emit(std::move(e));
}

void SlurmBackend::DoCleanup(const InstanceRef& ref, bool logs) {
  const std::string key = ref.Key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tracked_.count(key))
      return LogSlurmError(key + ": cleanup: its Slurm job still runs; left");
    if (logs) exits_.Forget(key);  // the instance is gone for good
  }
  if (!logs) return;  // the logs stay until the next start moves them to *.previous
  Status s = ports_->Release(ref.user, ref.assembly, ref.instance);
  if (!s.ok()) LogSlurmError(key + ": cleanup: its ports stay assigned: " + s.message());
  s = RemoveTree(InstanceDir(ref));
  ::unlink(JobRecord(ref).c_str());
  if (s.ok()) s = RemoveTree(WorkDir(ContextFor(ref.user), ref.assembly, ref.instance));
  if (!s.ok()) LogSlurmError(key + ": cleanup: " + s.message());
}

void SlurmBackend::DoDestroyAssembly(const std::string& user, const std::string& assembly) {
  const std::string prefix = user + "/" + assembly + "/";
  std::set<std::string> running;  // instances whose directories stay
  int64_t gang_job = 0;           // an allocation left behind, to cancel
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, t] : tracked_) {
      if (key.rfind(prefix, 0) == 0) running.insert(key.substr(prefix.size()));
    }
    exits_.ForgetPrefix(prefix);
    hosts_lines_.erase(user + "/" + assembly);
    auto g = gangs_.find(user + "/" + assembly);
    if (g != gangs_.end() && running.empty()) {
      if (!g->second.over) gang_job = g->second.job_id;
      gangs_.erase(g);
    }
  }
  if (gang_job != 0) RunSlurm({"scancel", std::to_string(gang_job)}).ok();
  if (running.empty()) ports_->ReleaseAssembly(user, assembly);
  const LaunchContext ctx = ContextFor(user);
  const std::string works = fs::path(WorkDir(ctx, assembly, "i")).parent_path().string();
  std::vector<std::string> dirs = {AssemblyDir(user, assembly), works};
  Status s = RemoveTree(backend::SharedDir(ctx, assembly));
  if (!s.ok()) LogSlurmError(s.message());
  if (running.empty()) {
    dirs.push_back(options_.shared_dir + "/.tarn/names/" + user + "/" + assembly);
    for (const std::string& d : dirs) {
      s = RemoveTree(d);
      if (!s.ok()) LogSlurmError(s.message());
    }
    return;
  }
  LogSlurmError(prefix + "*: destroy: left the directories of jobs that still run");
  for (const std::string& d : dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      if (running.count(it->path().filename().string())) continue;
      s = RemoveTree(it->path().string());
      if (!s.ok()) LogSlurmError(s.message());
    }
  }
}

// ---- The poller ----

}  // namespace tarn::backend
