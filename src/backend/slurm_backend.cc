#include "backend/slurm_backend.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/file.h"
#include "common/number.h"
#include "common/subprocess.h"
#include "service/readiness_probe.h"
#include "spec/substitution.h"

namespace tarn::backend {

using service::BackendEvent;
using service::InstanceRef;

// One thread running tasks in the order posted. The destructor drops tasks not yet begun
// and joins the thread. Thread-safe.
class SerialQueue {
 public:
  SerialQueue() : thread_([this] { Work(); }) {}
  ~SerialQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Returns once no task is queued or running.
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return tasks_.empty() && !running_; });
  }
  void Post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
    cv_.notify_one();
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      running_ = true;
      lock.unlock();
      try {
        task();
      } catch (const std::exception& e) {
        std::cerr << std::string("tarn: slurm backend: ") + e.what() + "\n";
      }
      lock.lock();
      running_ = false;
      if (tasks_.empty()) idle_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  bool stopping_ = false;
  bool running_ = false;
  std::deque<std::function<void()>> tasks_;
  std::thread thread_;  // last: it uses the members above
};

namespace {

namespace fs = std::filesystem;

// squeue passes that must miss a job before it counts as lost (a job just submitted may not
// be listed by the very next pass on a busy controller).
constexpr int kMissesBeforeLost = 3;
constexpr auto kNodesMaxAge = std::chrono::seconds(5);

void LogSlurmError(const std::string& message) {
  std::cerr << "tarn: slurm backend: " + message + "\n";
}

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

Status CheckSharedDir(const std::string& dir) {
  const std::string key = "backend.shared_dir \"" + dir + "\"";
  struct stat st {};
  if (dir.empty() || dir[0] != '/') return FailedPreconditionError(key + ": not an absolute path");
  if (::stat(dir.c_str(), &st) != 0) {
    return FailedPreconditionError(key + ": " + std::strerror(errno) +
                                   " (create it on a filesystem every Slurm node mounts)");
  }
  if (!S_ISDIR(st.st_mode)) return FailedPreconditionError(key + ": not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return FailedPreconditionError(key + ": not writable by tarn server: " + std::strerror(errno));
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<SlurmBackend>> SlurmBackend::Create(Options options) {
  if (options.clock == nullptr) return InvalidArgumentError("slurm backend: no clock");
  if (!options.events) return InvalidArgumentError("slurm backend: no event sink");
  RETURN_IF_ERROR(CheckSharedDir(options.shared_dir));
  auto backend = std::unique_ptr<SlurmBackend>(new SlurmBackend(std::move(options)));
  StatusOr<std::unique_ptr<PortBook>> ports =
      PortBook::Load(backend->options_.port_range, backend->options_.shared_dir);
  if (!ports.ok()) return ports.status().WithContext("slurm backend: assigned ports");
  backend->ports_ = std::move(*ports);
  // Slurm must answer now: a wrong slurm_conf is a clear error at server start.
  RETURN_IF_ERROR(backend->RefreshNodes().WithContext("slurm backend"));
  // Where final job states are kept, for jobs that end while tarn server is down.
  StatusOr<CommandResult> config = backend->RunSlurm({"scontrol", "show", "config"});
  if (config.ok() && config->success()) backend->jobcomp_file_ = JobCompFile(config->out);
  backend->StartThreads();
  return backend;
}

SlurmBackend::SlurmBackend(Options options) : options_(std::move(options)) {
  slurm_conf_ = options_.slurm_conf;
  if (slurm_conf_.empty()) {
    const char* env = std::getenv("SLURM_CONF");
    if (env != nullptr) slurm_conf_ = env;
  }
}

void SlurmBackend::StartThreads() {
  work_ = std::make_unique<SerialQueue>();
  probes_ = std::make_unique<SerialQueue>();
  if (options_.poll_interval.count() > 0) poller_ = std::thread([this] { PollLoop(); });
}

SlurmBackend::~SlurmBackend() {
  {
    std::lock_guard<std::mutex> lock(poll_mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  work_.reset();  // waits for the task under way; the jobs go on
  probes_.reset();
}

// ---- Slurm commands ----

StatusOr<CommandResult> SlurmBackend::RunSlurm(const std::vector<std::string>& argv,
                                               std::chrono::milliseconds timeout,
                                               const runtime::RunAs* as) const {
  std::vector<std::string> full;
  if (as != nullptr && as->account.uid != ::geteuid()) {
    // The kernel's uid is what Slurm's authentication (munge) vouches for: the job is the
    // tenant's, run and accounted as it. --init-groups: the account's own groups, not ours.
    full = {"setpriv", "--reuid=" + std::to_string(as->account.uid),
            "--regid=" + std::to_string(as->account.gid), "--init-groups"};
  }
  if (!slurm_conf_.empty()) full.insert(full.end(), {"env", "SLURM_CONF=" + slurm_conf_});
  full.insert(full.end(), argv.begin(), argv.end());
  const std::chrono::milliseconds limit = timeout.count() > 0 ? timeout : options_.command_timeout;
  if (options_.run_command) return options_.run_command(full, limit);
  return RunCommand(full, limit);
}

std::string SlurmBackend::PartitionFor(const spec::Assembly& assembly) const {
  return assembly.queue.empty() || assembly.queue == "default" ? options_.partition
                                                               : assembly.queue;
}

scheduler::QueueConfig SlurmBackend::QueueOf(const spec::Assembly& assembly) const {
  const std::string name = assembly.queue.empty() ? "default" : assembly.queue;
  for (const scheduler::QueueConfig& q : options_.queues) {
    if (q.name == name) return q;
  }
  scheduler::QueueConfig q;
  q.name = name;
  return q;
}

SlurmPriority SlurmBackend::PriorityOf(const spec::Assembly& assembly) const {
  const scheduler::QueueConfig q = QueueOf(assembly);
  return MapPriority(q.PriorityFor(assembly.priority), q.max_priority, options_.priority_qos);
}

SbatchRequest SlurmBackend::NewSbatch(const std::string& job_name, const std::string& partition,
                                      const SlurmPriority& priority, const std::string& dir) const {
  SbatchRequest r;
  r.job_name = job_name;
  r.partition = partition;
  r.account = options_.account;
  r.qos = priority.qos.empty() ? options_.qos : priority.qos;
  r.nice = priority.nice;
  r.extra_options = options_.sbatch_options;
  if (!dir.empty()) {
    r.stdout_path = dir + "/stdout.log";
    r.stderr_path = dir + "/stderr.log";
    r.script_path = dir + "/job.sh";
    r.chdir = dir;
  }
  return r;
}

StatusOr<std::vector<SlurmJob>> SlurmBackend::ListJobs() const {
  ASSIGN_OR_RETURN(CommandResult r, RunSlurm({"squeue", "--json"}));
  if (!r.success()) return UnavailableError("squeue --json: " + SlurmError(r.err));
  return ParseSqueueJson(r.out);
}

Status SlurmBackend::RefreshNodes() {
  ASSIGN_OR_RETURN(CommandResult r, RunSlurm({"sinfo", "--json"}));
  if (!r.success()) return UnavailableError("sinfo --json: " + SlurmError(r.err));
  ASSIGN_OR_RETURN(std::vector<SlurmNode> nodes, ParseSinfoJson(r.out));
  if (nodes.empty()) return FailedPreconditionError("sinfo lists no nodes");
  std::lock_guard<std::mutex> lock(nodes_mu_);
  nodes_ = std::move(nodes);
  nodes_read_ = std::chrono::steady_clock::now();
  return OkStatus();
}

std::vector<SlurmNode> SlurmBackend::CachedNodes() const {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  return nodes_;
}

// ---- Placement ----

Status SlurmBackend::RequestPlacement(const spec::Assembly& assembly,
                                      const std::vector<InstanceRef>& members, bool gang) {
  std::vector<SlurmNode> nodes = CachedNodes();
  std::map<std::string, Request> asked;
  for (const InstanceRef& ref : members) {
    const spec::Component* c = spec::FindComponent(assembly, ref.component);
    if (c == nullptr) {
      return InvalidArgumentError(ref.Key() + ": assembly \"" + assembly.name +
                                  "\" has no component \"" + ref.component + "\"");
    }
    const int64_t cpus = c->resource.cpus.value_or(1);
    const int64_t mem = c->resource.memory_mib.value_or(0);
    const int64_t gpus = c->resource.gpus.value_or(0);
    Request r;
    // Infeasible only when no node could ever hold it; when sinfo cannot be read, sbatch
    // decides (and says why) at launch.
    if (!nodes.empty()) {
      int64_t max_cpus = 0, max_mem = 0, max_gpus = 0;
      bool fits = false;
      for (const SlurmNode& n : nodes) {
        max_cpus = std::max(max_cpus, n.cpus);
        max_mem = std::max(max_mem, n.memory_mib);
        max_gpus = std::max(max_gpus, n.gpus);
        fits |= n.cpus >= cpus && n.memory_mib >= mem && n.gpus >= gpus;
      }
      if (!fits) {
        // Slurm has the last word (the inventory may be stale) and its own reason:
        // `sbatch --test-only` submits nothing. Rare (only what seems never to fit), so it
        // may run here, on the service loop, with a short time limit.
        SbatchRequest test = NewSbatch(JobName(ref.user, ref.assembly, ref.instance, "test"),
                                       PartitionFor(assembly), PriorityOf(assembly), "");
        test.cpus = cpus;
        test.memory_mib = mem;
        test.gpus = gpus;
        test.test_only = true;
        StatusOr<CommandResult> verdict = RunSlurm(SbatchArgv(test), std::chrono::seconds(5));
        if (!verdict.ok() || !verdict->success()) {
          r.infeasible = true;
          r.reason = "no Slurm node has " + std::to_string(cpus) + " CPUs, " + std::to_string(mem) +
                     " MiB and " + std::to_string(gpus) + " GPUs (the largest have " +
                     std::to_string(max_cpus) + " CPUs, " + std::to_string(max_mem) + " MiB, " +
                     std::to_string(max_gpus) + " GPUs); Slurm: " +
                     (verdict.ok() ? SlurmError(verdict->err) : verdict.status().message());
        }
      }
    }
    asked[ref.Key()] = r;
  }
  if (gang && members.size() >= 2) {
    // One heterogeneous job for the gang: a component per tarn component, in the
    // assembly's order, with as many tasks as it has members here.
    Gang g;
    const InstanceRef& first = members.front();
    g.job_name =
        JobName(first.user, first.assembly, "gang", std::to_string(options_.clock->WallMillis()));
    g.partition = PartitionFor(assembly);
    g.priority = PriorityOf(assembly);
    for (const spec::Component& c : assembly.components) {
      const int64_t n = std::count_if(members.begin(), members.end(),
                                      [&](const InstanceRef& r) { return r.component == c.name; });
      if (n == 0) continue;
      g.group_of[c.name] = static_cast<int>(g.components.size());
      g.component_of.push_back(c.name);
      g.components.push_back({n, c.resource.cpus.value_or(1), c.resource.memory_mib.value_or(0),
                              c.resource.gpus.value_or(0)});
    }
    const std::string gang_key = first.user + "/" + first.assembly;
    if (!nodes.empty() && g.components.size() > nodes.size()) {
      LogSlurmError(gang_key + ": its gang has " + std::to_string(g.components.size()) +
                    " components but Slurm has " + std::to_string(nodes.size()) +
                    " nodes, and puts the components of a heterogeneous job on distinct nodes: its "
                    "members run as jobs of their own");
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      Gang* old = FindGang(gang_key);
      if (old != nullptr && !old->over && old->job_id != 0) {
        const int64_t stale = old->job_id;
        work_->Post([this, stale] { RunSlurm({"scancel", std::to_string(stale)}).ok(); });
      }
      gangs_[gang_key] = std::move(g);
    }
  }
  std::lock_guard<std::mutex> lock(place_mu_);
  for (auto& [key, r] : asked) requests_[key] = std::move(r);
  return OkStatus();
}

std::vector<std::string> SlurmBackend::Place() {
  std::vector<std::string> placed;
  std::lock_guard<std::mutex> lock(place_mu_);
  for (auto& [key, r] : requests_) {
    if (r.infeasible || r.placed) continue;
    r.placed = true;
    placed.push_back(key);
  }
  return placed;
}

service::PlacementStatus SlurmBackend::GetPlacement(const std::string& key) const {
  service::PlacementStatus st;
  std::lock_guard<std::mutex> lock(place_mu_);
  auto it = requests_.find(key);
  if (it == requests_.end()) return st;
  if (it->second.infeasible) {
    st.phase = service::PlacementStatus::Phase::kInfeasible;
    st.reason = it->second.reason;
  } else if (it->second.placed) {
    st.phase = service::PlacementStatus::Phase::kPlaced;  // node and ip come with kStarted
  } else {
    st.phase = service::PlacementStatus::Phase::kPending;
  }
  return st;
}

Status SlurmBackend::RestorePlacement(const spec::Assembly&, const InstanceRef& ref,
                                      const service::Placement&) {
  std::lock_guard<std::mutex> lock(place_mu_);
  requests_[ref.Key()].placed = true;
  return OkStatus();
}

void SlurmBackend::ReleasePlacement(const std::string& key) {
  std::lock_guard<std::mutex> lock(place_mu_);
  requests_.erase(key);
}

// ---- Containers: queued ----

void SlurmBackend::Launch(const spec::Assembly& assembly, const InstanceRef& ref,
                          const service::Placement&, const std::string& container_id) {
  work_->Post([this, assembly, ref, container_id] { DoLaunch(assembly, ref, container_id); });
}

void SlurmBackend::Stop(const InstanceRef& ref, const std::string& container_id) {
  work_->Post([this, ref, container_id] { DoStop(ref, container_id); });
}

void SlurmBackend::Recover(const spec::Assembly&, const InstanceRef& ref,
                           const std::string& container_id) {
  work_->Post([this, ref, container_id] { DoRecover(ref, container_id); });
}

void SlurmBackend::Probe(const spec::Assembly& assembly, const InstanceRef& ref,
                         const std::string& container_id, const spec::ReadinessCheck& check) {
  probes_->Post(
      [this, assembly, ref, container_id, check] { DoProbe(assembly, ref, container_id, check); });
}

void SlurmBackend::Cleanup(const InstanceRef& ref, bool logs) {
  work_->Post([this, ref, logs] { DoCleanup(ref, logs); });
}

void SlurmBackend::DestroyAssembly(const std::string& user, const std::string& assembly) {
  work_->Post([this, user, assembly] { DoDestroyAssembly(user, assembly); });
}

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
    const LaunchContext ctx = ContextFor(ref.user);
    spec::Variables vars =
        spec::InstanceVariables(spec::AssemblyVariables(assembly, ref.user, ctx.domain), assembly,
                                *component, ref.index, ref.user, ctx.domain);
    vars.Set("CONTAINER_ID", container_id);
    vars.Set("SERVICE_HDFS_DIR", backend::SharedDir(ctx, assembly.name));
    spec::ReadinessCheck substituted = check;
    for (auto& [name, value] : substituted.properties) value = spec::Substitute(value, vars).text;
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

void SlurmBackend::PollLoop() {
  std::unique_lock<std::mutex> lock(poll_mu_);
  while (!stopping_) {
    lock.unlock();
    PollForTest();
    lock.lock();
    poll_cv_.wait_for(lock, options_.poll_interval, [&] { return stopping_; });
  }
}

void SlurmBackend::PollForTest() {
  bool stale = false;
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    stale = std::chrono::steady_clock::now() - nodes_read_ >= kNodesMaxAge;
  }
  if (stale) {
    Status s = RefreshNodes();
    if (!s.ok()) LogSlurmError(s.message());  // the last good inventory stays
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tracked_.empty()) return;
  }
  StatusOr<std::vector<SlurmJob>> jobs = ListJobs();
  if (!jobs.ok()) return LogSlurmError(jobs.status().message());  // look again next time
  Observe(*jobs);
}

void SlurmBackend::WaitForIdleForTest() {
  work_->WaitIdle();
  probes_->WaitIdle();
}

void SlurmBackend::Observe(const std::vector<SlurmJob>& jobs) {
  std::unordered_map<int64_t, const SlurmJob*> by_id;
  for (const SlurmJob& j : jobs) by_id[j.job_id] = &j;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  for (const auto& [key, t] : tracked_) keys.push_back(key);
  for (const std::string& key : keys) {
    Tracked& t = tracked_.at(key);
    if (t.het_group >= 0) {
      ObserveMember(key, t, jobs);
      continue;
    }
    if (!t.recover_name.empty()) {
      // Recovering: its job by the id recorded at submit, else by name (the newest).
      const SlurmJob* job = nullptr;
      for (const SlurmJob& j : jobs) {
        if (j.job_id != t.job_id && j.name != t.recover_name) continue;
        if (job == nullptr || j.job_id > job->job_id) job = &j;
      }
      if (job == nullptr && t.job_id != 0) {
        // Submitted, and ended long enough ago for squeue to have forgotten it.
        ReportExit(key, t.container_id,
                   EndOfVanishedJob(t, "lost: Slurm job " + std::to_string(t.job_id) +
                                           " ended while tarn server was down; how it ended "
                                           "is unknown"));
        continue;
      }
      if (job == nullptr) {
        BackendEvent e;
        e.kind = BackendEvent::Kind::kStartFailed;
        e.key = key;
        e.container_id = t.container_id;
        e.detail =
            "container " + t.container_id + " never started: Slurm has no job " + t.recover_name;
        tracked_.erase(key);
        Emit(std::move(e));
        continue;
      }
      t.job_id = job->job_id;
      t.recover_name.clear();
    }
    auto found = by_id.find(t.job_id);
    if (found == by_id.end()) {
      if (++t.misses >= kMissesBeforeLost) {
        ReportExit(
            key, t.container_id,
            EndOfVanishedJob(t, "lost: Slurm no longer lists job " + std::to_string(t.job_id) +
                                    " and no end state of it was seen"));
      }
      continue;
    }
    t.misses = 0;
    const JobView v = ViewJob(*found->second);
    switch (v.phase) {
      case JobView::Phase::kPending:
        NoteWaiting(key, t, v.detail);
        break;
      case JobView::Phase::kRunning: {
        if (t.started) break;
        StatusOr<ReportedAddress> a = ReadAddress(t);
        if (!a.ok() || a->job_id != t.job_id) break;  // half written, or an older job's
        NoteStarted(key, t, *a);
        break;
      }
      case JobView::Phase::kEnded:
        ReportExit(key, t.container_id, v.exit, v.preempted);
        break;
    }
  }
  // A gang whose job has ended (or is gone) is over: its members' next starts are jobs of
  // their own.
  for (auto& [gang_key, g] : gangs_) {
    if (g.over || g.job_id == 0) continue;
    int rows = 0, ended = 0;
    for (const SlurmJob& j : jobs) {
      if (j.het_job_id != g.job_id) continue;
      ++rows;
      ended += ViewJob(j).phase == JobView::Phase::kEnded;
    }
    g.misses = rows == 0 ? g.misses + 1 : 0;
    if ((rows > 0 && ended == rows) || g.misses >= kMissesBeforeLost) {
      g.over = true;
      ::unlink(GangRecord(gang_key).c_str());
    }
  }
}

void SlurmBackend::ObserveMember(const std::string& key, Tracked& t,
                                 const std::vector<SlurmJob>& jobs) {
  // Its step ended: launch.sh recorded srun's status; the shim, how the instance ended.
  StatusOr<std::string> end_text = ReadFileNoFollow(t.instance_dir + "/step.end", 4096);
  StatusOr<StepEnd> end =
      end_text.ok() ? ParseStepEnd(*end_text) : StatusOr<StepEnd>(end_text.status());
  if (end.ok() && end->container_id == t.container_id) {
    runtime::ExitInfo e;
    StatusOr<std::string> shim = ReadFileNoFollow(t.instance_dir + "/exit.json", 1 << 16);
    nlohmann::json j = shim.ok() ? nlohmann::json::parse(*shim, nullptr, false) : nlohmann::json();
    StatusOr<runtime::ExitInfo> recorded = j.is_object()
                                               ? runtime::ExitInfoFromJson(j)
                                               : StatusOr<runtime::ExitInfo>(NotFoundError(""));
    if (recorded.ok()) {
      e = *recorded;
      if (e.diagnostics.empty()) e.diagnostics = runtime::DescribeExit(e);
    } else if (t.stop_asked && !t.started) {
      e = MadeUpExit("stopped before it started");
    } else {
      e = MadeUpExit("its srun step in Slurm job " + std::to_string(t.job_id) + "+" +
                     std::to_string(t.het_group) + " ended with status " +
                     std::to_string(end->exit_status) +
                     (t.started ? " and the shim recorded no exit (killed with it?)"
                                : " before the instance ran (see its stderr.log)"));
    }
    // Slurm's preemption of the gang's job ends its steps too: once it lists the job
    // PREEMPTED, so are they (an end seen before that reads as the instance's own).
    const bool preempted = std::any_of(jobs.begin(), jobs.end(), [&](const SlurmJob& j) {
      return j.het_job_id == t.job_id && j.het_job_offset == t.het_group && j.state == "PREEMPTED";
    });
    return ReportExit(key, t.container_id, e, preempted);
  }
  const SlurmJob* row = nullptr;
  for (const SlurmJob& j : jobs) {
    if (j.het_job_id == t.job_id && j.het_job_offset == t.het_group) row = &j;
  }
  const std::string component = std::to_string(t.job_id) + "+" + std::to_string(t.het_group);
  if (row == nullptr) {
    if (++t.misses >= kMissesBeforeLost) {
      ReportExit(key, t.container_id,
                 EndOfVanishedJob(t, "lost: Slurm no longer lists job " + component +
                                         " and no end of its step was seen"));
    }
    return;
  }
  t.misses = 0;
  t.component_job = row->job_id;
  const JobView v = ViewJob(*row);
  switch (v.phase) {
    case JobView::Phase::kPending:
      NoteWaiting(key, t, v.detail + ", for the whole gang (job " + component + ")");
      break;
    case JobView::Phase::kRunning: {
      if (!t.started) {
        StatusOr<ReportedAddress> a = ReadAddress(t);
        if (!a.ok() || a->container_id != t.container_id) break;  // not yet
        t.step_id = a->step_id;
        NoteStarted(key, t, *a);
      }
      // A stop asked before the step said where it runs; SIGKILL when SIGTERM was not
      // enough within a minute.
      const auto now = std::chrono::steady_clock::now();
      const bool sent = t.stop_sent != std::chrono::steady_clock::time_point{};
      if (t.stop_asked && t.step_id >= 0 &&
          (!sent || now - t.stop_sent > std::chrono::minutes(1))) {
        t.stop_sent = now;
        const int64_t job = t.component_job, step = t.step_id;
        work_->Post([this, key, job, step, sent] { SignalStep(key, job, step, sent); });
      }
      break;
    }
    case JobView::Phase::kEnded:
      ReportExit(key, t.container_id, v.exit, v.preempted);
      break;
  }
}

// ---- Events ----

StatusOr<ReportedAddress> SlurmBackend::ReadAddress(const Tracked& t) const {
  StatusOr<std::string> text = ReadFileNoFollow(t.instance_dir + "/address", 4096);
  if (!text.ok()) return text.status();  // not reported yet
  return ParseAddressFile(*text);
}

void SlurmBackend::NoteWaiting(const std::string& key, Tracked& t, const std::string& detail) {
  if (detail == t.waiting_reason) return;  // said once per reason
  t.waiting_reason = detail;
  BackendEvent e;
  e.kind = BackendEvent::Kind::kWaiting;
  e.key = key;
  e.container_id = t.container_id;
  e.detail = detail;
  Emit(std::move(e));
}

void SlurmBackend::NoteStarted(const std::string& key, Tracked& t, const ReportedAddress& a) {
  t.started = true;
  BackendEvent e;
  e.kind = BackendEvent::Kind::kStarted;
  e.key = key;
  e.container_id = t.container_id;
  e.ip = a.ip;
  e.node = a.node;
  Emit(std::move(e));
}

void SlurmBackend::Emit(BackendEvent event) { options_.events(std::move(event)); }

void SlurmBackend::EmitStartFailed(const std::string& key, const std::string& container_id,
                                   const std::string& detail) {
  BackendEvent e;
  e.kind = BackendEvent::Kind::kStartFailed;
  e.key = key;
  e.container_id = container_id;
  e.detail = detail;
  std::lock_guard<std::mutex> lock(mu_);
  Emit(std::move(e));
}

void SlurmBackend::ReportExit(const std::string& key, std::string container_id,
                              runtime::ExitInfo exit, bool preempted) {
  auto t = tracked_.find(key);
  std::string gang;
  if (t != tracked_.end() && t->second.container_id == container_id) {
    gang = t->second.gang;
    if (exit.exit_code != 0 || exit.signal != 0) {
      exit.last_stderr = runtime::LastLogLine(t->second.instance_dir + "/stderr.log");
    }
    tracked_.erase(t);
  }
  if (!gang.empty()) {
    // The last member gone: the allocation is given back (the next starts are single jobs).
    const bool any = std::any_of(tracked_.begin(), tracked_.end(),
                                 [&](const auto& e) { return e.second.gang == gang; });
    auto g = gangs_.find(gang);
    if (!any && g != gangs_.end() && !g->second.over) {
      g->second.over = true;
      const int64_t job = g->second.job_id;
      const std::string file = GangRecord(gang);
      work_->Post([this, job, file] {
        ::unlink(file.c_str());
        if (job != 0) RunSlurm({"scancel", std::to_string(job)}).ok();
      });
    }
  }
  if (!exits_.Record(key, container_id)) return;
  BackendEvent e;
  e.kind = BackendEvent::Kind::kExited;
  e.key = key;
  e.container_id = container_id;
  e.exit = std::move(exit);
  e.preempted = preempted;
  Emit(std::move(e));
}

runtime::ExitInfo SlurmBackend::EndOfVanishedJob(const Tracked& t, const std::string& lost) const {
  const std::string job = "Slurm job " + std::to_string(t.job_id);
  if (!jobcomp_file_.empty()) {
    StatusOr<std::string> text = ReadFileToString(jobcomp_file_, 256u << 20);
    std::optional<SlurmJob> record = text.ok() ? FindJobCompRecord(*text, t.job_id) : std::nullopt;
    if (record) {
      runtime::ExitInfo e = ViewJob(*record).exit;
      if (e.finished_at_ms == 0) e.finished_at_ms = options_.clock->WallMillis();
      e.diagnostics += " (" + job + ", from Slurm's job completion log)";
      return e;
    }
  }
  StatusOr<std::string> text = ReadFileNoFollow(t.instance_dir + "/exit.json", 1 << 16);
  if (text.ok()) {
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    StatusOr<runtime::ExitInfo> e = j.is_object()
                                        ? runtime::ExitInfoFromJson(j)
                                        : StatusOr<runtime::ExitInfo>(DataLossError("not JSON"));
    if (e.ok()) {
      e->diagnostics = runtime::DescribeExit(*e) + " (" + job +
                       " is gone from squeue; this is what the instance's shim recorded)";
      return *e;
    }
  }
  return MadeUpExit(lost);
}

runtime::ExitInfo SlurmBackend::MadeUpExit(const std::string& diagnostics) const {
  return backend::MadeUpExit(*options_.clock, diagnostics);
}

// ---- Views ----

std::vector<scheduler::NodeUsage> SlurmBackend::Nodes() const {
  std::vector<scheduler::NodeUsage> out;
  for (const SlurmNode& n : CachedNodes()) {
    scheduler::NodeUsage u;
    u.name = n.name;
    u.capacity = {n.cpus, n.memory_mib, n.gpus};
    u.free = {n.cpus - n.alloc_cpus, n.memory_mib - n.alloc_memory_mib, n.gpus - n.alloc_gpus};
    out.push_back(std::move(u));
  }
  return out;
}

std::vector<scheduler::QueueUsage> SlurmBackend::Queues() const {
  std::vector<scheduler::QueueUsage> out(1);
  std::set<std::string> partitions;
  for (const SlurmNode& n : CachedNodes()) {
    partitions.insert(n.partitions.begin(), n.partitions.end());
  }
  partitions.erase("default");  // the first entry either way
  spec::Assembly in;
  out[0].config = QueueOf(in);
  for (const std::string& p : partitions) {
    in.queue = p;
    scheduler::QueueUsage q;
    q.config = QueueOf(in);
    out.push_back(std::move(q));
  }
  return out;
}

std::string SlurmBackend::LogFile(const InstanceRef& ref, bool stderr_stream) const {
  const std::string dir = InstanceDir(ref);
  const std::string current = dir + (stderr_stream ? "/stderr.log" : "/stdout.log");
  if (::access(current.c_str(), F_OK) == 0) return current;
  const std::string previous = current + ".previous";
  return ::access(previous.c_str(), F_OK) == 0 ? previous : "";
}

std::string SlurmBackend::SharedDir(const std::string& user, const std::string& assembly) const {
  return backend::SharedDir(ContextFor(user), assembly);
}

void SlurmBackend::NamesChanged(const std::string& user, const std::string& assembly,
                                const std::string& hosts_lines) {
  if (options_.names.mode != NameResolution::Mode::kHosts) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hosts_lines_[user + "/" + assembly] = hosts_lines;
  }
  work_->Post([this, user, assembly] {
    const std::string dir = options_.shared_dir + "/.tarn/names/" + user + "/" + assembly;
    std::string lines;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = hosts_lines_.find(user + "/" + assembly);
      if (it == hosts_lines_.end()) return;  // destroyed meanwhile
      lines = it->second;
    }
    Status s = MakeDirectories(dir, 0755);
    if (s.ok()) {
      s = RewriteInPlace(dir + "/hosts",
                         RenderHostsFile(ReadFileToString("/etc/hosts", 1 << 20).value_or(""),
                                         lines, user, assembly));
    }
    if (!s.ok()) LogSlurmError(user + "/" + assembly + ": hosts file: " + s.message());
  });
}

}  // namespace tarn::backend
