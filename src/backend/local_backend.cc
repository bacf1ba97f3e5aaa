#include "backend/local_backend.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <variant>

#include "backend/work_queues.h"
#include "common/file.h"

namespace tarn::backend {

using runtime::ContainerState;
using service::BackendEvent;
using service::InstanceRef;

namespace {

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
  work_ = std::make_unique<KeyedWorkQueue>(options_.worker_threads, "local backend");
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

std::string LocalBackend::SharedDir(const std::string& user, const std::string& assembly) const {
  return backend::SharedDir(ContextFor(user), assembly);
}

}  // namespace tarn::backend
