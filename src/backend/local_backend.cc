#include "backend/local_backend.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <variant>

#include "common/file.h"
#include "service/readiness_probe.h"
#include "spec/substitution.h"

namespace tarn::backend {

using runtime::ContainerState;
using service::BackendEvent;
using service::InstanceRef;

// A fixed pool of threads running tasks posted under a key: tasks of one key run one at a
// time in the order posted (a strand); tasks of different keys run in parallel. The
// destructor drops tasks not yet begun and joins the threads. Thread-safe.
class KeyedWorkQueue {
 public:
  explicit KeyedWorkQueue(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~KeyedWorkQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // Returns once no task is queued or running.
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return queues_.empty(); });
  }

  void Post(const std::string& key, std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    auto [it, fresh] = queues_.try_emplace(key);
    it->second.push_back(std::move(task));
    // A key already present is queued in ready_ or running: its worker picks this up next.
    if (fresh) {
      ready_.push_back(key);
      cv_.notify_one();
    }
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
      if (stopping_) return;
      std::string key = std::move(ready_.front());
      ready_.pop_front();
      std::deque<std::function<void()>>& tasks = queues_.at(key);  // nodes are stable
      std::function<void()> task = std::move(tasks.front());
      tasks.pop_front();
      lock.unlock();
      try {
        task();
      } catch (const std::exception& e) {
        std::cerr << "tarn: local backend: " + key + ": " + e.what() + "\n";
      }
      lock.lock();
      auto it = queues_.find(key);
      if (it->second.empty()) {
        queues_.erase(it);
        if (queues_.empty()) idle_cv_.notify_all();
      } else {
        ready_.push_back(key);
        cv_.notify_one();
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  bool stopping_ = false;
  std::deque<std::string> ready_;  // keys whose next task may run now
  // Tasks not yet begun, by key; a key is present while one of its tasks is queued or runs.
  std::unordered_map<std::string, std::deque<std::function<void()>>> queues_;
  std::vector<std::thread> threads_;
};

namespace {

namespace fs = std::filesystem;

// How long a start waits for an untracked earlier run it stopped (the shim's grace period,
// then SIGKILL).
constexpr std::chrono::milliseconds kOrphanStopWait{30000};

// A start that waits (an image that cannot be pulled now) is tried again after 2 s, then
// after twice as long each time, up to a minute (Kubernetes' image pull back-off).
constexpr std::chrono::milliseconds kWaitingFirstDelay{2000};
constexpr std::chrono::milliseconds kWaitingMaxDelay{60000};

void LogLocalError(const std::string& message) {
  std::cerr << "tarn: local backend: " + message + "\n";
}

scheduler::Resources ResourcesOf(const spec::Component& c) {
  return {c.resource.cpus.value_or(0), c.resource.memory_mib.value_or(0),
          c.resource.gpus.value_or(0)};
}

StatusOr<scheduler::Request> RequestFor(const spec::Assembly& a, const InstanceRef& ref) {
  const spec::Component* c = spec::FindComponent(a, ref.component);
  if (c == nullptr) {
    return InvalidArgumentError(ref.Key() + ": assembly \"" + a.name + "\" has no component \"" +
                                ref.component + "\"");
  }
  return scheduler::Request{ref.Key(), ref.user, a.queue, ResourcesOf(*c), a.priority};
}

// The start a shim directory holds, from the TARN_CONTAINER_ID in its spec.json; none when
// that cannot be told.
std::optional<std::string> RecordedContainerId(const std::string& shim_dir) {
  auto text = ReadFileToString(shim_dir + "/spec.json");
  if (!text.ok()) return std::nullopt;
  static const std::string kPrefix = "TARN_CONTAINER_ID=";
  try {
    const nlohmann::json spec = nlohmann::json::parse(*text);
    for (const auto& e : spec.at("env")) {
      std::string var = e.get<std::string>();
      if (var.rfind(kPrefix, 0) == 0) return var.substr(kPrefix.size());
    }
  } catch (const nlohmann::json::exception&) {
  }
  return std::nullopt;
}

bool Holds(const std::string& shim_dir, const std::string& container_id) {
  std::optional<std::string> recorded = RecordedContainerId(shim_dir);
  return !recorded || *recorded == container_id;
}

std::string PreviousDir(const std::string& shim_dir) { return shim_dir + ".previous"; }

// The names in `dir` (none when it cannot be read).
std::vector<std::string> ListDirectory(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  return names;
}

// The files of a run worth keeping: its output (rotated ones too), the shim's own log and how
// it ended.
bool IsLogFile(const std::string& name) {
  return name.rfind("stdout.log", 0) == 0 || name.rfind("stderr.log", 0) == 0 ||
         name == "shim.log" || name == "exit.json";
}

// Moves the run's logs into <shim_dir>.previous/, replacing the generation before.
Status KeepLogs(const std::string& shim_dir) {
  std::vector<std::string> logs = ListDirectory(shim_dir);
  logs.erase(std::remove_if(logs.begin(), logs.end(), [](const auto& n) { return !IsLogFile(n); }),
             logs.end());
  if (logs.empty()) return OkStatus();  // nothing new: the older generation stays
  const std::string previous = PreviousDir(shim_dir);
  std::error_code ec;
  fs::remove_all(previous, ec);
  if (ec) return InternalError(previous + ": cannot remove: " + ec.message());
  RETURN_IF_ERROR(MakeDirectories(previous, 0700));
  for (const std::string& name : logs) {
    fs::rename(shim_dir + "/" + name, previous + "/" + name, ec);
    if (ec) return InternalError(shim_dir + "/" + name + ": cannot keep: " + ec.message());
  }
  return OkStatus();
}

std::string Describe(const ContainerState& st) {
  switch (st.phase) {
    case ContainerState::Phase::kRunning:
      return "running, shim pid " + std::to_string(st.shim_pid);
    case ContainerState::Phase::kExited:
      return st.diagnostics;
    case ContainerState::Phase::kLost:
      return "lost: " + st.diagnostics;
  }
  return "";
}

}  // namespace

StatusOr<std::unique_ptr<LocalBackend>> LocalBackend::Create(Options options) {
  if (options.clock == nullptr) return InvalidArgumentError("local backend: no clock");
  if (options.runtime == nullptr) return InvalidArgumentError("local backend: no runtime");
  if (!options.events) return InvalidArgumentError("local backend: no event sink");
  if (options.launch.state_dir.empty()) {
    return InvalidArgumentError("local backend: no state directory");
  }
  if (options.worker_threads < 1) {
    return InvalidArgumentError("local backend: worker_threads must be at least 1, not " +
                                std::to_string(options.worker_threads));
  }
  scheduler::Scheduler::Options so;
  so.nodes = options.nodes;
  so.queues = options.queues;
  so.clock = options.clock;
  so.reservation_after = options.reservation_after;
  so.preemption = options.preemption;
  auto scheduler = scheduler::Scheduler::Create(std::move(so));
  if (!scheduler.ok()) return scheduler.status().WithContext("local backend");
  uint32_t first = 0, last = 0;
  if (!options.address_range.empty()) {
    ASSIGN_OR_RETURN(auto range, ParseLoopbackRange(options.address_range));
    first = range.first;
    last = range.second;
  }
  auto backend = std::unique_ptr<LocalBackend>(
      new LocalBackend(std::move(options), std::move(scheduler).value()));
  backend->range_first_ = first;
  backend->range_last_ = last;
  return backend;
}

StatusOr<std::pair<uint32_t, uint32_t>> ParseLoopbackRange(const std::string& cidr) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("address range \"" + cidr + "\": " + why);
  };
  auto slash = cidr.find('/');
  if (slash == std::string::npos) return bad("expected CIDR notation such as 127.42.0.0/16");
  in_addr a{};
  if (::inet_pton(AF_INET, cidr.substr(0, slash).c_str(), &a) != 1) {
    return bad("not an IPv4 address");
  }
  const std::string bits_text = cidr.substr(slash + 1);
  if (bits_text.empty() || bits_text.size() > 2 ||
      !std::all_of(bits_text.begin(), bits_text.end(), ::isdigit)) {
    return bad("expected a prefix length");
  }
  const int bits = std::stoi(bits_text);
  if (bits < 8 || bits > 30) return bad("the prefix length must be 8..30");
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
  const uint32_t network = ntohl(a.s_addr) & mask;
  if ((network >> 24) != 127) {
    return bad("must be inside 127.0.0.0/8 (loopback: nothing sent there leaves the machine)");
  }
  // network + 1 is kept for tarn's DNS server; the broadcast address is not used.
  return std::make_pair(network + 2, (network | ~mask) - 1);
}

StatusOr<std::string> ReservedDnsAddress(const std::string& cidr) {
  ASSIGN_OR_RETURN(auto range, ParseLoopbackRange(cidr));
  in_addr a{};
  a.s_addr = htonl(range.first - 1);
  char text[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, text, sizeof text);
  return std::string(text);
}

LocalBackend::LocalBackend(Options options, std::unique_ptr<scheduler::Scheduler> scheduler)
    : options_(std::move(options)), scheduler_(std::move(scheduler)) {
  work_ = std::make_unique<KeyedWorkQueue>(options_.worker_threads);
  if (options_.poll_interval.count() > 0) monitor_ = std::thread([this] { MonitorLoop(); });
}

LocalBackend::~LocalBackend() {
  {
    std::lock_guard<std::mutex> lock(monitor_mu_);
    stopping_ = true;
  }
  monitor_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  work_.reset();  // waits for the tasks under way; the containers go on
}

// ---- Placement ----

Status LocalBackend::RequestPlacement(const spec::Assembly& assembly,
                                      const std::vector<InstanceRef>& members, bool gang) {
  std::vector<scheduler::Request> requests;
  for (const InstanceRef& ref : members) {
    ASSIGN_OR_RETURN(scheduler::Request r, RequestFor(assembly, ref));
    requests.push_back(std::move(r));
  }
  if (requests.empty()) return OkStatus();
  std::lock_guard<std::mutex> lock(scheduler_mu_);
  if (gang) {
    return scheduler_->SubmitGang(members[0].user + "/" + assembly.name, requests);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    Status s = scheduler_->Submit(requests[i]);
    if (!s.ok()) {
      // All asked for or none: withdraw the ones already queued.
      for (size_t j = 0; j < i; ++j) (void)scheduler_->Release(requests[j].id);
      return s;
    }
  }
  return OkStatus();
}

std::vector<std::string> LocalBackend::Place() {
  std::vector<scheduler::Placement> placed;
  {
    std::lock_guard<std::mutex> lock(scheduler_mu_);
    placed = scheduler_->Schedule();
  }
  std::vector<std::string> keys;
  keys.reserve(placed.size());
  std::lock_guard<std::mutex> lock(scheduler_mu_);
  for (scheduler::Placement& p : placed) {
    if (range_first_ != 0 && !address_of_.count(p.id)) {
      // The lowest free address; with the range used up the instance shares `ip`.
      uint32_t a = range_first_;
      for (uint32_t used : addresses_used_) {
        if (used != a) break;
        ++a;
      }
      if (a <= range_last_) {
        address_of_[p.id] = a;
        addresses_used_.insert(a);
      }
    }
    keys.push_back(std::move(p.id));
  }
  return keys;
}

std::vector<scheduler::Preemption> LocalBackend::TakePreemptions() {
  std::lock_guard<std::mutex> lock(scheduler_mu_);
  return scheduler_->TakePreemptions();
}

void LocalBackend::NoteCheckpoint(const std::string& key, Clock::TimePoint at) {
  std::lock_guard<std::mutex> lock(scheduler_mu_);
  scheduler_->SetLastCheckpoint(key, at);
}

service::PlacementStatus LocalBackend::GetPlacement(const std::string& key) const {
  StatusOr<scheduler::Decision> d = [&] {
    std::lock_guard<std::mutex> lock(scheduler_mu_);
    return scheduler_->Get(key);
  }();
  service::PlacementStatus st;
  if (!d.ok()) return st;  // kUnknown
  if (const auto* placed = std::get_if<scheduler::Placed>(&*d)) {
    st.phase = service::PlacementStatus::Phase::kPlaced;
    st.placement = {placed->node, placed->gpus, AddressOf(key)};
  } else if (const auto* pending = std::get_if<scheduler::Pending>(&*d)) {
    st.phase = service::PlacementStatus::Phase::kPending;
    st.reason = pending->reason;
  } else if (const auto* preempt = std::get_if<scheduler::Preempt>(&*d)) {
    st.phase = service::PlacementStatus::Phase::kPending;  // until its victims are gone
    st.reason = preempt->reason;
  } else {
    st.phase = service::PlacementStatus::Phase::kInfeasible;
    st.reason = std::get<scheduler::Infeasible>(*d).reason;
  }
  return st;
}

Status LocalBackend::RestorePlacement(const spec::Assembly& assembly, const InstanceRef& ref,
                                      const service::Placement& placement) {
  RETURN_IF_ERROR(RestorePlace(assembly, ref, placement));
  // Its wall, recorded while the walls are held (the server loads them all at once once
  // every instance is restored).
  const spec::Component* component = spec::FindComponent(assembly, ref.component);
  if (component != nullptr && options_.walls != nullptr) {
    StatusOr<runtime::RunAs> as = RunAsFor(ref.user, component->run_privileged_container);
    Status s = as.ok() ? SetWall(ref, *component, as->account.uid) : as.status();
    if (!s.ok()) std::cerr << "tarn server: " << ref.Key() << ": its wall: " << s.message() << "\n";
  }
  return OkStatus();
}

Status LocalBackend::RestorePlace(const spec::Assembly& assembly, const InstanceRef& ref,
                                  const service::Placement& placement) {
  ASSIGN_OR_RETURN(scheduler::Request r, RequestFor(assembly, ref));
  std::lock_guard<std::mutex> lock(scheduler_mu_);
  uint32_t address = 0;
  if (range_first_ != 0 && !placement.ip.empty()) {
    in_addr a{};
    if (::inet_pton(AF_INET, placement.ip.c_str(), &a) != 1 || ntohl(a.s_addr) < range_first_ ||
        ntohl(a.s_addr) > range_last_) {
      return FailedPreconditionError(ref.Key() + ": its address " + placement.ip +
                                     " is outside the configured range " + options_.address_range);
    }
    address = ntohl(a.s_addr);
    if (addresses_used_.count(address)) {
      return FailedPreconditionError(ref.Key() + ": its address " + placement.ip +
                                     " is already held by another instance");
    }
  }
  RETURN_IF_ERROR(scheduler_->Restore(r, placement.node, placement.gpus));
  if (address != 0) {
    address_of_[ref.Key()] = address;
    addresses_used_.insert(address);
  }
  return OkStatus();
}

void LocalBackend::ReleasePlacement(const std::string& key) {
  // With the walls' lock: a launch setting this instance's wall either finishes first (and
  // the wall goes here) or finds the address gone (and sets none).
  std::lock_guard<std::mutex> walls_lock(walls_mu_);
  {
    std::lock_guard<std::mutex> lock(scheduler_mu_);
    (void)scheduler_->Release(key);  // NotFound: nothing to release
    if (auto it = address_of_.find(key); it != address_of_.end()) {
      addresses_used_.erase(it->second);
      address_of_.erase(it);
    }
  }
  // Before the address can go to another instance (Place runs on this same thread).
  if (options_.walls != nullptr) {
    if (Status s = options_.walls->Remove(key); !s.ok()) {
      std::cerr << "tarn server: " << key << ": its wall stays: " << s.message() << "\n";
    }
  }
}

StatusOr<runtime::RunAs> LocalBackend::RunAsFor(const std::string& user, bool privileged) const {
  if (options_.run_as) return *options_.run_as;
  return runtime::ResolveRunAs(options_.run_as_policy, user, privileged, ::geteuid(),
                               options_.accounts);
}

Status LocalBackend::SetWall(const InstanceRef& ref, const spec::Component& component, uid_t uid) {
  if (options_.walls == nullptr || !options_.walls->on()) return OkStatus();
  const std::string key = ref.Key();
  std::lock_guard<std::mutex> walls_lock(walls_mu_);  // see ReleasePlacement
  {
    std::lock_guard<std::mutex> lock(scheduler_mu_);
    // Only an address of its own can be walled (one shared with others, when the range is
    // used up or not configured, cannot tell them apart).
    if (!address_of_.count(key)) return OkStatus();
  }
  Wall wall{AddressOf(key), uid, {}};
  const std::vector<spec::NamedPort> ports = InstancePorts(ref, component);
  for (const std::string& name : component.public_ports) {
    for (const spec::NamedPort& p : ports) {
      if (p.name == name) wall.public_ports.push_back(p.port);
    }
  }
  return options_.walls->Set(key, std::move(wall));
}

std::string LocalBackend::DescribeNetworkWalls() const {
  if (options_.walls != nullptr) return options_.walls->describe();
  if (range_first_ == 0) {
    return "off: every instance shares one address (no address_range), so no wall can tell "
           "them apart; any local account can connect to any instance";
  }
  return "off: not set up by this server; any local account can connect to any instance";
}

std::string LocalBackend::AddressOf(const std::string& key) const {
  uint32_t a = 0;
  {
    std::lock_guard<std::mutex> lock(scheduler_mu_);
    auto it = address_of_.find(key);
    if (it == address_of_.end()) return options_.ip;
    a = it->second;
  }
  in_addr addr{};
  addr.s_addr = htonl(a);
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &addr, buf, sizeof buf);
  return buf;
}

// ---- Containers: queued ----

void LocalBackend::Launch(const spec::Assembly& assembly, const InstanceRef& ref,
                          const service::Placement& placement, const std::string& container_id) {
  work_->Post(ref.Key(), [this, assembly, ref, placement, container_id] {
    DoLaunch(assembly, ref, placement, container_id);
  });
}

void LocalBackend::Stop(const InstanceRef& ref, const std::string& container_id) {
  work_->Post(ref.Key(), [this, ref, container_id] { DoStop(ref, container_id); });
}

void LocalBackend::Recover(const spec::Assembly& /*assembly*/, const InstanceRef& ref,
                           const std::string& container_id) {
  work_->Post(ref.Key(), [this, ref, container_id] { DoRecover(ref, container_id); });
}

void LocalBackend::Probe(const spec::Assembly& assembly, const InstanceRef& ref,
                         const std::string& container_id, const spec::ReadinessCheck& check) {
  // Apart from the instance's other work: a probe may block for its whole timeout.
  work_->Post("probe " + ref.Key(), [this, assembly, ref, container_id, check] {
    DoProbe(assembly, ref, container_id, check);
  });
}

void LocalBackend::Cleanup(const InstanceRef& ref, bool logs) {
  work_->Post(ref.Key(), [this, ref, logs] { DoCleanup(ref, logs); });
}

void LocalBackend::DestroyAssembly(const std::string& user, const std::string& assembly) {
  work_->Post(user + "/" + assembly, [this, user, assembly] { DoDestroyAssembly(user, assembly); });
}

// ---- Containers: the work ----

LaunchContext LocalBackend::ContextFor(const std::string& user) const {
  LaunchContext ctx = options_.launch;
  ctx.user = user;
  ctx.ip = options_.ip;
  return ctx;
}

std::string LocalBackend::ShimDirOf(const InstanceRef& ref) const {
  return ShimDir(ContextFor(ref.user), ref.assembly, ref.instance);
}

Status LocalBackend::PrepareSharedDir(const LaunchContext& ctx, const std::string& assembly) {
  const std::string dir = backend::SharedDir(ctx, assembly);
  const std::string user_dir = fs::path(dir).parent_path().string();
  // The users' directories can be passed through, not listed; the assembly's belongs to
  // the account its instances run as.
  RETURN_IF_ERROR(MakeDirectories(fs::path(user_dir).parent_path().string(), 0711));
  RETURN_IF_ERROR(MakeDirectories(user_dir, 0711));
  RETURN_IF_ERROR(MakeDirectories(dir, 0750));
  if (::geteuid() == 0 &&
      ::chown(dir.c_str(), ctx.run_as.account.uid, ctx.run_as.account.gid) != 0) {
    return InternalError(dir + ": chown: " + std::strerror(errno));
  }
  return OkStatus();
}

std::string LocalBackend::NamesDir(const std::string& user, const std::string& assembly) const {
  return options_.launch.state_dir + "/names/" + user + "/" + assembly;
}

void LocalBackend::NamesChanged(const std::string& user, const std::string& assembly,
                                const std::string& hosts_lines) {
  if (options_.names.mode != NameResolution::Mode::kHosts) return;
  {
    std::lock_guard<std::mutex> lock(names_mu_);
    hosts_lines_[user + "/" + assembly] = hosts_lines;
  }
  // One key per assembly: rewrites run in order, each writing the newest lines.
  work_->Post("names:" + user + "/" + assembly, [this, user, assembly] {
    Status s = WriteHostsFile(user, assembly, /*only_if_known=*/true);
    if (!s.ok()) LogLocalError(user + "/" + assembly + ": hosts file: " + s.message());
  });
}

Status LocalBackend::WriteHostsFile(const std::string& user, const std::string& assembly,
                                    bool only_if_known) {
  std::lock_guard<std::mutex> lock(names_mu_);
  auto it = hosts_lines_.find(user + "/" + assembly);
  if (it == hosts_lines_.end() && only_if_known) return OkStatus();
  const std::string lines = it == hosts_lines_.end() ? "" : it->second;
  // The machine's own lines (localhost, this host) come first, read afresh each time.
  const std::string machine = ReadFileToString("/etc/hosts", 1 << 20).value_or("");
  const std::string dir = NamesDir(user, assembly);
  RETURN_IF_ERROR(MakeDirectories(dir, 0755));
  return RewriteInPlace(dir + "/hosts", RenderHostsFile(machine, lines, user, assembly));
}

Status LocalBackend::PrepareNameFiles(const std::string& user, const std::string& assembly,
                                      runtime::ContainerSpec* spec) {
  const std::string dir = NamesDir(user, assembly);
  switch (options_.names.mode) {
    case NameResolution::Mode::kNone:
      return OkStatus();
    case NameResolution::Mode::kResolvConf: {
      RETURN_IF_ERROR(MakeDirectories(dir, 0755));
      const std::string path = dir + "/resolv.conf";
      const std::string text =
          RenderResolvConf(options_.names.resolver_ip, user, assembly, options_.launch.domain);
      if (ReadFileToString(path, 1 << 16).value_or("") != text) {
        RETURN_IF_ERROR(RewriteInPlace(path, text));
      }
      spec->resolv_conf = path;
      return OkStatus();
    }
    case NameResolution::Mode::kHosts:
      RETURN_IF_ERROR(WriteHostsFile(user, assembly, /*only_if_known=*/false));
      spec->hosts_file = dir + "/hosts";
      return OkStatus();
  }
  return OkStatus();
}

void LocalBackend::DoLaunch(const spec::Assembly& assembly, const InstanceRef& ref,
                            const service::Placement& placement, const std::string& container_id) {
  const std::string key = ref.Key();
  const spec::Component* component = spec::FindComponent(assembly, ref.component);
  if (component == nullptr) {
    return EmitStartFailed(
        key, container_id,
        "assembly \"" + assembly.name + "\" has no component \"" + ref.component + "\"");
  }
  if (Status s = CheckArtifactRuns(*component, options_.runtime->RunsImages()); !s.ok()) {
    return EmitStartFailed(key, container_id, s.message());
  }
  const std::string shim_dir = ShimDirOf(ref);
  StatusOr<ContainerState> before = options_.runtime->State(shim_dir);
  if (before.ok() && before->phase == ContainerState::Phase::kRunning) {
    std::optional<std::string> running = RecordedContainerId(shim_dir);
    bool tracked = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = watched_.find(key);
      tracked = it != watched_.end() && running && it->second.container_id == *running;
    }
    const std::string copy = key + " already runs as container " + running.value_or("?") +
                             " (shim pid " + std::to_string(before->shim_pid) + ")";
    if (tracked) return EmitStartFailed(key, container_id, copy + "; not starting a second copy");
    // A run nothing tracks: recovery (which comes first for a key) did not adopt it, so it is
    // one the manager no longer knows (the server died between recording this instance's
    // next start and stopping that run). Nothing would ever stop it; it goes, logs kept.
    LogLocalError(copy + ", which nothing tracks: stopping it before starting " + container_id);
    Status stopped = options_.runtime->Stop(shim_dir);
    before = options_.runtime->Wait(shim_dir, kOrphanStopWait);
    if (!stopped.ok() || !before.ok() || before->phase == ContainerState::Phase::kRunning) {
      return EmitStartFailed(
          key, container_id,
          copy + ", which nothing tracks, and it did not stop: " +
              (!stopped.ok()  ? stopped.message()
               : !before.ok() ? before.status().message()
                              : "still running after " +
                                    std::to_string(kOrphanStopWait.count() / 1000) + " s"));
    }
  }
  if (before.ok()) {
    Status retired = Retire(key, shim_dir, *before, /*keep_logs=*/true);
    if (!retired.ok()) {
      return EmitStartFailed(key, container_id,
                             "cannot clear the previous run: " + retired.message());
    }
  } else if (before.status().code() != StatusCode::kNotFound) {
    return EmitStartFailed(
        key, container_id,
        "cannot tell whether an earlier copy still runs: " + before.status().message());
  }

  LaunchContext ctx = ContextFor(ref.user);
  ctx.container_id = container_id;
  if (!placement.ip.empty()) ctx.ip = placement.ip;
  if (options_.secrets) ctx.assembly_secret = options_.secrets(ref.user, ref.assembly);
  // A peer's address exists once the scheduler has placed it (and is kept with its place).
  ctx.peer_address = [this, prefix = ref.user + "/" + ref.assembly + "/"](const std::string& peer) {
    const std::string key = prefix + peer;
    StatusOr<scheduler::Decision> d = [&] {
      std::lock_guard<std::mutex> lock(scheduler_mu_);
      return scheduler_->Get(key);
    }();
    if (!d.ok() || !std::holds_alternative<scheduler::Placed>(*d)) return std::string();
    return AddressOf(key);
  };
  {
    StatusOr<runtime::RunAs> run_as = RunAsFor(ref.user, component->run_privileged_container);
    if (!run_as.ok()) return EmitStartFailed(key, container_id, run_as.status().message());
    ctx.run_as = *run_as;
  }
  StatusOr<runtime::ContainerSpec> spec =
      BuildContainerSpec(assembly, *component, ref.index, placement.gpus, ctx);
  if (!spec.ok()) return EmitStartFailed(key, container_id, spec.status().message());
  // Its directories are under the state directory: an account that cannot reach it would
  // crash-loop on "Permission denied", seen only in its own stderr.
  if (::geteuid() == 0) {
    if (Status reach = runtime::CheckCanEnter(ctx.state_dir, ctx.run_as.account); !reach.ok()) {
      return EmitStartFailed(key, container_id,
                             "state directory " + ctx.state_dir + ": " + reach.message() +
                                 ", so its instances could not reach their files; let it in "
                                 "(chmod o+x) or give the server a --state-dir it can reach");
    }
  }
  if (Status shared = PrepareSharedDir(ctx, ref.assembly); !shared.ok()) {
    return EmitStartFailed(key, container_id, "shared directory: " + shared.message());
  }
  if (Status names = PrepareNameFiles(ref.user, ref.assembly, &*spec); !names.ok()) {
    return EmitStartFailed(key, container_id, "name resolution: " + names.message());
  }
  // Its wall stands before it runs.
  if (Status wall = SetWall(ref, *component, ctx.run_as.account.uid); !wall.ok()) {
    return EmitStartFailed(key, container_id, "network walls: " + wall.message());
  }
  StatusOr<ContainerState> started = options_.runtime->Start(*spec);
  if (!started.ok() && started.status().code() == StatusCode::kUnavailable) {
    // Not yet (the image cannot be pulled now): it waits, and is tried again later.
    BackendEvent e;
    e.kind = BackendEvent::Kind::kWaiting;
    e.key = key;
    e.container_id = container_id;
    std::lock_guard<std::mutex> lock(mu_);
    WaitingLaunch& w = waiting_[key];
    const bool again = w.container_id == container_id;
    w.delay = again ? std::min(w.delay * 2, kWaitingMaxDelay) : kWaitingFirstDelay;
    w.assembly = assembly;
    w.ref = ref;
    w.placement = placement;
    w.container_id = container_id;
    w.due = options_.clock->Now() + w.delay;
    w.posted = false;
    e.detail = started.status().message() + "; trying again in " +
               std::to_string(w.delay.count() / 1000) + " s";
    return Emit(std::move(e));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.erase(key);
  }
  if (!started.ok()) return EmitStartFailed(key, container_id, started.status().message());
  // Even one that has already ended did start; the monitor reports its exit next.
  StartedAndWatch(key, container_id, shim_dir);
}

void LocalBackend::DoRetryLaunch(const std::string& key, const std::string& container_id) {
  WaitingLaunch w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = waiting_.find(key);
    if (it == waiting_.end() || it->second.container_id != container_id) return;  // stopped
    w = it->second;
  }
  DoLaunch(w.assembly, w.ref, w.placement, w.container_id);
}

void LocalBackend::DoStop(const InstanceRef& ref, const std::string& container_id) {
  const std::string key = ref.Key();
  const std::string shim_dir = ShimDirOf(ref);
  bool watched = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = waiting_.find(key);
        it != waiting_.end() && it->second.container_id == container_id) {
      waiting_.erase(it);  // it never started: the State() below says so
    }
    auto it = watched_.find(key);
    watched = it != watched_.end() && it->second.container_id == container_id;
    if (!watched && exits_.Reported(key, container_id)) {
      return;  // it has ended and said so: whatever runs there now is a later start
    }
  }
  StatusOr<ContainerState> st = options_.runtime->State(shim_dir);
  if (!st.ok()) {
    if (watched && st.status().code() != StatusCode::kNotFound) {
      // Unknown for now: the monitor keeps looking and reports the exit.
      return LogLocalError(key + ": stop: " + st.status().message());
    }
    return ReportExit(key, container_id,
                      MadeUpExit(watched ? "its shim directory " + shim_dir + " is gone"
                                         : "stopped before it started"));
  }
  if (!watched && !Holds(shim_dir, container_id)) {
    return ReportExit(key, container_id, MadeUpExit("stopped before it started"));
  }
  if (st->phase != ContainerState::Phase::kRunning) {
    if (st->phase == ContainerState::Phase::kLost && st->shim_pid == 0) {
      return ReportExit(key, container_id,
                        MadeUpExit("stopped before it started: its shim never started"));
    }
    return ReportExit(key, container_id,
                      st->phase == ContainerState::Phase::kExited
                          ? st->exit
                          : MadeUpExit("lost: " + st->diagnostics));
  }
  Status stopped = options_.runtime->Stop(shim_dir);
  if (!stopped.ok()) LogLocalError(key + ": stop: " + stopped.message());
  if (!watched) {
    // Found running without having been recovered yet: the monitor reports its end.
    std::lock_guard<std::mutex> lock(mu_);
    watched_[key] = Watched{container_id, shim_dir};
  }
}

void LocalBackend::DoRecover(const InstanceRef& ref, const std::string& container_id) {
  const std::string key = ref.Key();
  const std::string shim_dir = ShimDirOf(ref);
  const std::string never = "container " + container_id + " never started: ";
  StatusOr<ContainerState> st = options_.runtime->State(shim_dir);
  if (!st.ok()) {
    if (st.status().code() == StatusCode::kNotFound) {
      return EmitStartFailed(key, container_id, never + shim_dir + " holds no container");
    }
    return EmitStartFailed(
        key, container_id,
        "cannot tell whether container " + container_id + " runs: " + st.status().message());
  }
  std::optional<std::string> recorded = RecordedContainerId(shim_dir);
  if (recorded && *recorded != container_id) {
    return EmitStartFailed(
        key, container_id,
        never + shim_dir + " holds container " + *recorded + " (" + Describe(*st) + ")");
  }
  switch (st->phase) {
    case ContainerState::Phase::kRunning:
      return StartedAndWatch(key, container_id, shim_dir);
    case ContainerState::Phase::kExited:
      return ReportExit(key, container_id, st->exit);
    case ContainerState::Phase::kLost:
      if (st->shim_pid == 0) return EmitStartFailed(key, container_id, never + st->diagnostics);
      return ReportExit(key, container_id, MadeUpExit("lost: " + st->diagnostics));
  }
}

void LocalBackend::DoProbe(const spec::Assembly& assembly, const InstanceRef& ref,
                           const std::string& container_id, const spec::ReadinessCheck& check) {
  BackendEvent e;
  e.kind = BackendEvent::Kind::kProbed;
  e.key = ref.Key();
  e.container_id = container_id;
  const spec::Component* component = spec::FindComponent(assembly, ref.component);
  if (component == nullptr) {
    e.detail = "assembly \"" + assembly.name + "\" has no component \"" + ref.component + "\"";
  } else {
    const LaunchContext ctx = ContextFor(ref.user);
    spec::Variables vars =
        spec::InstanceVariables(spec::AssemblyVariables(assembly, ref.user, ctx.domain), assembly,
                                *component, ref.index, ref.user, ctx.domain);
    vars.Set("CONTAINER_ID", container_id);
    vars.Set("SERVICE_HDFS_DIR", backend::SharedDir(ctx, assembly.name));
    spec::ReadinessCheck substituted = check;
    for (auto& [name, value] : substituted.properties) value = spec::Substitute(value, vars).text;
    service::ProbeResult r = service::Probe(substituted, AddressOf(e.key));
    e.ready = r.ready;
    e.detail = std::move(r.detail);
  }
  std::lock_guard<std::mutex> lock(mu_);
  Emit(std::move(e));
}

void LocalBackend::DoCleanup(const InstanceRef& ref, bool logs) {
  const std::string key = ref.Key();
  const std::string shim_dir = ShimDirOf(ref);
  StatusOr<ContainerState> st = options_.runtime->State(shim_dir);
  if (!st.ok() && st.status().code() != StatusCode::kNotFound) {
    return LogLocalError(key + ": cleanup: " + st.status().message());
  }
  if (st.ok()) {
    if (st->phase == ContainerState::Phase::kRunning) {
      return LogLocalError(key + ": cleanup: the container still runs; left alone");
    }
    Status s = Retire(key, shim_dir, *st, /*keep_logs=*/!logs);
    if (!s.ok()) return LogLocalError(key + ": cleanup: " + s.message());
  }
  if (!logs) return;
  Status s = RemoveTree(PreviousDir(shim_dir));
  if (s.ok()) s = RemoveTree(WorkDir(ContextFor(ref.user), ref.assembly, ref.instance));
  if (!s.ok()) LogLocalError(key + ": cleanup: " + s.message());
  std::lock_guard<std::mutex> lock(mu_);
  exits_.Forget(key);  // the instance is gone for good
}

void LocalBackend::DoDestroyAssembly(const std::string& user, const std::string& assembly) {
  const LaunchContext ctx = ContextFor(user);
  const std::string prefix = user + "/" + assembly + "/";
  // The assembly's directories: the parents of any instance's.
  const std::string shims = fs::path(ShimDir(ctx, assembly, "i")).parent_path().string();
  const std::string works = fs::path(WorkDir(ctx, assembly, "i")).parent_path().string();
  std::vector<std::string> running;  // instances whose directories stay
  for (const std::string& name : ListDirectory(shims)) {
    if (name.ends_with(".previous")) continue;
    const std::string shim_dir = shims + "/" + name;
    StatusOr<ContainerState> st = options_.runtime->State(shim_dir);
    if (st.ok() && st->phase != ContainerState::Phase::kRunning) {
      Status s = Retire(prefix + name, shim_dir, *st, /*keep_logs=*/false);
      if (s.ok()) continue;
      LogLocalError(prefix + name + ": destroy: " + s.message());
    } else if (!st.ok() && st.status().code() == StatusCode::kNotFound) {
      continue;
    } else if (!st.ok()) {
      LogLocalError(prefix + name + ": destroy: " + st.status().message());
    }
    running.push_back(name);
  }
  Status s = RemoveTree(backend::SharedDir(ctx, assembly));
  if (!s.ok()) LogLocalError(s.message());
  if (running.empty()) {
    for (const std::string& dir : {shims, works}) {
      s = RemoveTree(dir);
      if (!s.ok()) LogLocalError(s.message());
    }
    std::lock_guard<std::mutex> lock(names_mu_);
    hosts_lines_.erase(user + "/" + assembly);
    s = RemoveTree(NamesDir(user, assembly));
    if (!s.ok()) LogLocalError(s.message());
  } else {
    LogLocalError(prefix + "*: destroy: left the directories of containers that still run: " + [&] {
      std::string list;
      for (const std::string& r : running) list += (list.empty() ? "" : ", ") + r;
      return list;
    }());
    for (const std::string& dir : {shims, works}) {
      for (const std::string& name : ListDirectory(dir)) {
        std::string instance = name.substr(0, name.find('.'));
        if (std::find(running.begin(), running.end(), instance) != running.end()) continue;
        s = RemoveTree(dir + "/" + name);
        if (!s.ok()) LogLocalError(s.message());
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  exits_.ForgetPrefix(prefix);
}

Status LocalBackend::Retire(const std::string& key, const std::string& shim_dir,
                            const ContainerState& state, bool keep_logs) {
  std::optional<std::string> watched_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = watched_.find(key);
    if (it != watched_.end() && it->second.shim_dir == shim_dir) {
      watched_id = it->second.container_id;
    }
  }
  // Its exit goes out before its traces do (the monitor may not have looked yet).
  if (watched_id) {
    ReportExit(key, *watched_id,
               state.phase == ContainerState::Phase::kExited
                   ? state.exit
                   : MadeUpExit("lost: " + state.diagnostics));
  }
  if (keep_logs) RETURN_IF_ERROR(KeepLogs(shim_dir));
  Status removed = options_.runtime->Remove(shim_dir);
  if (!removed.ok() && removed.code() != StatusCode::kNotFound) return removed;
  return OkStatus();
}

// ---- Events ----

void LocalBackend::Emit(BackendEvent event) { options_.events(std::move(event)); }

void LocalBackend::EmitStartFailed(const std::string& key, const std::string& container_id,
                                   const std::string& detail) {
  BackendEvent e;
  e.kind = BackendEvent::Kind::kStartFailed;
  e.key = key;
  e.container_id = container_id;
  e.detail = detail;
  std::lock_guard<std::mutex> lock(mu_);
  Emit(std::move(e));
}

void LocalBackend::StartedAndWatch(const std::string& key, const std::string& container_id,
                                   const std::string& shim_dir) {
  BackendEvent e;
  e.kind = BackendEvent::Kind::kStarted;
  e.key = key;
  e.container_id = container_id;
  e.ip = AddressOf(key);
  // One critical section: the monitor cannot report the exit before the start is out.
  std::lock_guard<std::mutex> lock(mu_);
  Emit(std::move(e));
  watched_[key] = Watched{container_id, shim_dir};
}

void LocalBackend::ReportExit(const std::string& key, const std::string& container_id,
                              runtime::ExitInfo exit, bool only_if_watched) {
  std::lock_guard<std::mutex> lock(mu_);
  auto w = watched_.find(key);
  const bool watched = w != watched_.end() && w->second.container_id == container_id;
  std::string shim_dir;
  if (watched) {
    shim_dir = w->second.shim_dir;
    watched_.erase(w);
  } else if (only_if_watched) {
    return;
  }
  if (!exits_.Record(key, container_id)) return;
  if (exit.exit_code != 0 || exit.signal != 0) {
    // What the program said last, for `tarn status` (a failed run's, as Kubernetes does).
    if (shim_dir.empty()) {  // not watched (found ended at Recover): "user/assembly/instance"
      const size_t a = key.find('/'), i = key.rfind('/');
      if (a != i && i != std::string::npos) {
        shim_dir =
            ShimDir(ContextFor(key.substr(0, a)), key.substr(a + 1, i - a - 1), key.substr(i + 1));
      }
    }
    if (!shim_dir.empty()) exit.last_stderr = runtime::LastLogLine(shim_dir + "/stderr.log");
  }
  BackendEvent e;
  e.kind = BackendEvent::Kind::kExited;
  e.key = key;
  e.container_id = container_id;
  e.exit = std::move(exit);
  Emit(std::move(e));
}

runtime::ExitInfo LocalBackend::MadeUpExit(const std::string& diagnostics) const {
  return backend::MadeUpExit(*options_.clock, diagnostics);
}

// ---- The monitor ----

void LocalBackend::MonitorLoop() {
  std::unique_lock<std::mutex> lock(monitor_mu_);
  while (!stopping_) {
    lock.unlock();
    CheckContainers();
    lock.lock();
    monitor_cv_.wait_for(lock, options_.poll_interval, [&] { return stopping_; });
  }
}

void LocalBackend::CheckContainersForTest() { CheckContainers(); }

void LocalBackend::WaitForIdleForTest() { work_->WaitIdle(); }

void LocalBackend::CheckContainers() {
  options_.runtime->ReapEnded();  // shims that ended after their instance was let go
  std::vector<std::pair<std::string, Watched>> watched;
  std::vector<std::pair<std::string, std::string>> due;  // waiting starts to try again
  {
    std::lock_guard<std::mutex> lock(mu_);
    watched.assign(watched_.begin(), watched_.end());
    const Clock::TimePoint now = options_.clock->Now();
    for (auto& [key, w] : waiting_) {
      if (w.posted || w.due > now) continue;
      w.posted = true;
      due.emplace_back(key, w.container_id);
    }
  }
  for (const auto& [key, container_id] : due) {
    work_->Post(key, [this, key, container_id] { DoRetryLaunch(key, container_id); });
  }
  for (const auto& [key, w] : watched) {
    StatusOr<ContainerState> st = options_.runtime->State(w.shim_dir);
    std::optional<runtime::ExitInfo> exit;
    if (st.ok()) {
      if (st->phase == ContainerState::Phase::kExited) exit = st->exit;
      if (st->phase == ContainerState::Phase::kLost) exit = MadeUpExit("lost: " + st->diagnostics);
    } else if (st.status().code() == StatusCode::kNotFound) {
      exit = MadeUpExit("its shim directory " + w.shim_dir + " is gone; how it ended is unknown");
    } else if (st.status().code() == StatusCode::kDataLoss) {
      exit = MadeUpExit(st.status().message());
    }  // else: unknown for now; look again next time
    // Only while it is still the one watched: Launch, Stop or Cleanup may have reported it
    // (and a newer start may be watched) since the copy above was taken.
    if (exit) ReportExit(key, w.container_id, std::move(*exit), /*only_if_watched=*/true);
  }
}

// ---- Views ----

std::vector<scheduler::NodeUsage> LocalBackend::Nodes() const {
  std::lock_guard<std::mutex> lock(scheduler_mu_);
  return scheduler_->Nodes();
}

std::vector<scheduler::QueueUsage> LocalBackend::Queues() const {
  std::lock_guard<std::mutex> lock(scheduler_mu_);
  return scheduler_->Queues();
}

std::string LocalBackend::LogFile(const InstanceRef& ref, bool stderr_stream) const {
  const std::string current = ShimDirOf(ref) + (stderr_stream ? "/stderr.log" : "/stdout.log");
  if (::access(current.c_str(), F_OK) == 0) return current;
  return PreviousLogFile(ref, stderr_stream);
}

std::string LocalBackend::PreviousLogFile(const InstanceRef& ref, bool stderr_stream) const {
  const std::string previous =
      PreviousDir(ShimDirOf(ref)) + (stderr_stream ? "/stderr.log" : "/stdout.log");
  return ::access(previous.c_str(), F_OK) == 0 ? previous : "";
}

std::string LocalBackend::SharedDir(const std::string& user, const std::string& assembly) const {
  return backend::SharedDir(ContextFor(user), assembly);
}

}  // namespace tarn::backend
