// Manager's read-only views (manager.h): status, events, instances.
#include <algorithm>

#include "service/manager_impl.h"
#include "spec/substitution.h"

namespace tarn::service {

namespace {

InstanceStatus ViewInstance(const Manager::Impl& d, const Manager::Impl::Asm& a,
                            const spec::Component& cs, const Manager::Impl::Inst& i);

}  // namespace

StatusOr<AssemblyStatus> Manager::Get(const std::string& user, const std::string& name) const {
  const Impl& d = *impl_;
  auto it = d.assemblies.find(Impl::AsmKey(user, name));
  if (it == d.assemblies.end()) return AssemblyNotFoundError(name);
  const Impl::Asm& a = it->second;
  AssemblyStatus s;
  s.user = a.rec.user;
  s.name = a.rec.name;
  s.state = a.rec.state;
  s.diagnostics = a.rec.diagnostics;
  s.spec_json = a.rec.spec_json;
  s.version = a.spec.version;
  if (a.upgrade) s.upgrade_version = a.upgrade->to_version;
  s.queue = a.spec.queue.empty() ? "default" : a.spec.queue;
  s.priority = a.priority;
  s.created_ms = a.rec.created_ms;
  if (a.rec.lifetime_deadline_ms > 0) {
    s.lifetime_deadline_ms = a.rec.lifetime_deadline_ms;
    s.lifetime_remaining_s =
        std::max<int64_t>(0, (a.rec.lifetime_deadline_ms - d.clock.WallMillis() + 999) / 1000);
  }
  s.shared_dir = d.backend.SharedDir(a.rec.user, a.rec.name);
  s.name_resolution = d.backend.DescribeNameResolution();
  s.network_walls = d.backend.DescribeNetworkWalls();
  for (const Impl::Comp& c : a.comps) {
    const spec::Component& cs = d.CompSpec(a, c);
    ComponentStatus cv;
    cv.name = cs.name;
    cv.number_of_containers = cs.number_of_containers;
    int64_t succeeded = 0, stopped = 0, failed = 0, live = 0;
    std::string upgrade;  // the component's upgrade state, from its instances'
    for (const auto& [idx, i] : c.instances) {
      InstanceStatus iv = ViewInstance(d, a, d.CompSpecOf(a, i), i);
      if (!i.remove) {
        ++live;
        if (i.phase == Impl::Phase::kRunning && i.ready) ++cv.ready;
        if (i.rec.upgrade_state == kNeedsUpgrade && upgrade.empty()) upgrade = kNeedsUpgrade;
        if (i.rec.upgrade_state == kUpgrading || i.rec.upgrade_state == kFailedUpgrade) {
          upgrade = a.upgrade && a.upgrade->state == kUpgradeCancel ? kUpgradeCancel : kUpgrading;
        }
        if (iv.state == kSucceeded) ++succeeded;
        if (iv.state == kStopped) ++stopped;
        if (iv.state == kFailed) ++failed;
      }
      cv.instances.push_back(std::move(iv));
    }
    int64_t n = cs.number_of_containers;
    if (c.failed) {
      cv.state = kFailed;
      cv.diagnostics = c.diagnostics;
    } else if (a.rec.desired_state != kDesiredStarted) {
      cv.state = kStopped;
    } else if (a.rec.state == kFailed) {
      cv.state = kStopped;  // a healthy component, stopped with the assembly that failed
      cv.diagnostics = "stopped: the assembly failed";
    } else if (!upgrade.empty()) {
      cv.state = upgrade;  // YARN's NEEDS_UPGRADE, UPGRADING, CANCEL_UPGRADING
      cv.diagnostics = std::to_string(cv.ready) + " of " + std::to_string(n) + " ready";
    } else if (n > 0 && succeeded == n && cs.restart_policy != spec::RestartPolicy::kAlways) {
      cv.state = kSucceeded;
    } else if (live == n && cv.ready + succeeded == n) {
      cv.state = "STABLE";
    } else {
      cv.state = "FLEXING";
      cv.diagnostics = std::to_string(cv.ready) + " of " + std::to_string(n) + " ready";
    }
    (void)stopped;
    (void)failed;
    s.components.push_back(std::move(cv));
  }
  // An assembly that waits for room says why at its own level too (tarn list shows only
  // this): the first waiting instance's reason, and how many wait.
  if (s.diagnostics.empty()) {
    const InstanceStatus* first = nullptr;
    int waiting = 0;
    for (const ComponentStatus& c : s.components) {
      for (const InstanceStatus& i : c.instances) {
        if (i.state != kPending || (i.diagnostics.rfind("waiting for resources", 0) != 0 &&
                                    i.diagnostics.rfind("can never be placed", 0) != 0 &&
                                    i.diagnostics.rfind("preempted by", 0) != 0)) {
          continue;
        }
        if (first == nullptr) first = &i;
        ++waiting;
      }
    }
    if (first != nullptr) {
      s.diagnostics = first->name + " " + first->diagnostics;
      if (waiting > 1) s.diagnostics += " (and " + std::to_string(waiting - 1) + " more waiting)";
    }
  }
  return s;
}

namespace {

InstanceStatus ViewInstance(const Manager::Impl& d, const Manager::Impl::Asm& a,
                            const spec::Component& cs, const Manager::Impl::Inst& i) {
  using Phase = Manager::Impl::Phase;
  InstanceStatus v;
  v.name = i.ref.instance;
  v.component = i.ref.component;
  v.index = i.ref.index;
  v.container_id = i.rec.container_id;
  v.hostname = spec::InstanceHostname(i.ref.instance, a.rec.name, a.rec.user, d.options.domain);
  v.ip = d.AddressOf(i);
  v.node = i.has_placement && !i.placement.node.empty() ? i.placement.node : i.rec.node;
  v.gpus = i.has_placement ? i.placement.gpus : std::vector<int>{};
  for (const spec::NamedPort& p : d.backend.InstancePorts(i.ref, cs)) v.ports[p.name] = p.port;
  v.restarts = i.rec.restarts;
  v.last_exit = i.rec.last_exit;
  v.diagnostics = i.diagnostics;
  switch (i.phase) {
    case Phase::kWaiting:
      v.state = kPending;
      if (v.diagnostics.empty()) v.diagnostics = "waiting to be placed";
      break;
    case Phase::kRequested: {
      v.state = kPending;
      PlacementStatus ps = d.backend.GetPlacement(i.ref.Key());
      if (!i.preempted.empty()) {
        v.diagnostics = i.preempted;  // until it launches again
      } else if (ps.phase == PlacementStatus::Phase::kInfeasible) {
        v.diagnostics = "can never be placed: " + ps.reason;
      } else if (!ps.reason.empty()) {
        v.diagnostics = "waiting for resources: " + ps.reason;
      } else {
        v.diagnostics = "waiting for resources";
      }
      break;
    }
    case Phase::kPlaced:
    case Phase::kStarting:
    case Phase::kBackoff:
      v.state = kPending;
      break;
    case Phase::kRunning:
      v.state = i.ready ? kReady : kUnready;
      v.ready = i.ready;
      v.launch_time = i.rec.launched_ms;
      break;
    case Phase::kStopping:
      v.state = kUnready;
      v.launch_time = i.rec.launched_ms;
      break;
    case Phase::kDone:
      v.state = i.rec.state;
      break;
  }
  v.version = i.rec.version;
  // YARN's container states during an upgrade stand for READY (or whatever it is) until the
  // instance is upgraded; a finished one stays finished.
  if (!i.rec.upgrade_state.empty() && i.phase != Phase::kDone) v.state = i.rec.upgrade_state;
  return v;
}

}  // namespace

std::vector<AssemblyStatus> Manager::List(const std::string& user) const {
  std::vector<AssemblyStatus> out;
  for (const auto& [key, a] : impl_->assemblies) {
    if (!user.empty() && a.rec.user != user) continue;
    auto s = Get(a.rec.user, a.rec.name);
    if (s.ok()) out.push_back(std::move(*s));
  }
  return out;
}

StatusOr<std::vector<Event>> Manager::Events(const std::string& user,
                                             const std::string& name) const {
  auto it = impl_->assemblies.find(Impl::AsmKey(user, name));
  if (it == impl_->assemblies.end()) return AssemblyNotFoundError(name);
  return std::vector<Event>(it->second.events.begin(), it->second.events.end());
}

uint64_t Manager::LastEventSerial(const std::string& user, const std::string& name) const {
  auto it = impl_->assemblies.find(Impl::AsmKey(user, name));
  return it == impl_->assemblies.end() ? 0 : it->second.last_event;
}

StatusOr<InstanceRef> Manager::FindInstance(const std::string& user, const std::string& name,
                                            const std::string& instance) const {
  auto it = impl_->assemblies.find(Impl::AsmKey(user, name));
  if (it == impl_->assemblies.end()) return AssemblyNotFoundError(name);
  auto bk = impl_->by_key.find(Impl::AsmKey(user, name) + "/" + instance);
  if (bk == impl_->by_key.end()) {
    return NotFoundError("assembly " + name + " has no instance " + instance);
  }
  return bk->second.second->ref;
}

std::string Manager::InstanceContainer(const std::string& user, const std::string& name,
                                       const std::string& instance) const {
  auto bk = impl_->by_key.find(Impl::AsmKey(user, name) + "/" + instance);
  return bk == impl_->by_key.end() ? "" : bk->second.second->rec.container_id;
}

bool Manager::InstanceRunning(const std::string& user, const std::string& name,
                              const std::string& instance) const {
  auto bk = impl_->by_key.find(Impl::AsmKey(user, name) + "/" + instance);
  if (bk == impl_->by_key.end()) return false;
  auto phase = bk->second.second->phase;
  return phase == Impl::Phase::kStarting || phase == Impl::Phase::kRunning ||
         phase == Impl::Phase::kStopping;
}

}  // namespace tarn::service
