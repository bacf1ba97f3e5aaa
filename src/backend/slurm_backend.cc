#include "backend/slurm_backend.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/work_queues.h"
#include "common/file.h"
#include "common/number.h"
#include "common/subprocess.h"

namespace tarn::backend {

using service::BackendEvent;
using service::InstanceRef;

void SlurmBackend::LogSlurmError(const std::string& message) {
  std::cerr << "tarn: slurm backend: " + message + "\n";
}

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
  work_ = std::make_unique<SerialQueue>("slurm backend");
  probes_ = std::make_unique<SerialQueue>("slurm backend: probes");
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

void SlurmBackend::WaitForIdleForTest() {
  work_->WaitIdle();
  probes_->WaitIdle();
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
