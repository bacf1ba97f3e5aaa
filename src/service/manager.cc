// Manager's commands, the backend's events and the clock (manager.h); the state they act on
// is Manager::Impl (manager_impl.h).
#include "service/manager.h"

#include <algorithm>

#include "common/crash_point.h"
#include "service/manager_impl.h"

namespace tarn::service {
namespace {

using json = nlohmann::json;

}  // namespace

Manager::Manager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Manager::~Manager() = default;

StatusOr<std::unique_ptr<Manager>> Manager::Create(Options options) {
  if (options.clock == nullptr || options.store == nullptr || options.backend == nullptr) {
    return InvalidArgumentError("Manager needs a clock, a store and a backend");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  RETURN_IF_ERROR(impl->Load());
  std::unique_ptr<Manager> m(new Manager(std::move(impl)));
  m->impl_->Step();
  return m;
}

Status Manager::Launch(const std::string& user, const spec::Assembly& assembly,
                       const std::string& spec_json) {
  Impl& d = *impl_;
  std::string key = Impl::AsmKey(user, assembly.name);
  if (auto it = d.assemblies.find(key); it != d.assemblies.end()) {
    if (it->second.rec.desired_state == kDesiredDestroyed) {
      return AlreadyExistsError("assembly " + assembly.name +
                                " is being destroyed; launch it again once it is gone");
    }
    return AlreadyExistsError("assembly " + assembly.name + " already exists (user " + user +
                              "); destroy it first or choose another name");
  }
  {
    // The queue must exist: refused now rather than pending forever. Whether it admits the
    // caller (acl_submit_applications) is the API's to decide: it knows the caller's groups.
    // A priority above the queue's max-application-priority is refused, naming the cap.
    const std::string queue = assembly.queue.empty() ? "default" : assembly.queue;
    std::string names;
    bool found = false;
    for (const scheduler::QueueUsage& q : d.backend.Queues()) {
      names += (names.empty() ? "" : ", ") + q.config.name;
      if (q.config.name != queue) continue;
      found = true;
      if (assembly.priority && *assembly.priority > q.config.max_priority) {
        return PermissionDeniedError(
            "configuration.properties[\"tarn.priority\"]: " + std::to_string(*assembly.priority) +
            " is above queue " + queue + "'s max-application-priority (" +
            std::to_string(q.config.max_priority) + "; the server's config sets it per queue)");
      }
    }
    if (!found && !names.empty()) {
      return InvalidArgumentError("queue: there is no queue \"" + queue + "\" (queues: " + names +
                                  ")");
    }
  }
  Impl::Asm a;
  try {
    a.spec_json = json::parse(spec_json);
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("assembly JSON: ") + e.what());
  }
  a.spec = assembly;
  a.rec.user = user;
  a.rec.name = assembly.name;
  a.rec.spec_json = spec_json;
  a.rec.desired_state =
      assembly.desired_state == spec::DesiredState::kStopped ? kDesiredStopped : kDesiredStarted;
  a.rec.state = a.rec.desired_state == kDesiredStopped ? kStopped : "ACCEPTED";
  a.rec.created_ms = d.clock.WallMillis();
  if (assembly.lifetime_seconds && *assembly.lifetime_seconds > 0) {
    a.rec.lifetime_deadline_ms = a.rec.created_ms + *assembly.lifetime_seconds * 1000;
  }
  RETURN_IF_ERROR(d.store.CreateAssembly(a.rec));
  CrashPoint("create-committed");
  auto [it, inserted] = d.assemblies.emplace(key, std::move(a));
  d.BuildComps(it->second);
  d.AddEvent(
      it->second, "", "", "ACCEPTED",
      "launched by " + user + (assembly.queue.empty() ? "" : " into queue " + assembly.queue));
  d.Step();
  return OkStatus();
}

namespace {
template <typename Map>
auto* FindOwned(Map& assemblies, const std::string& user, const std::string& name) {
  auto it = assemblies.find(user + "/" + name);
  return it == assemblies.end() ? nullptr : &it->second;
}
}  // namespace

Status AssemblyNotFoundError(const std::string& name) {
  return NotFoundError("assembly " + name + " not found");
}

Status Manager::Stop(const std::string& user, const std::string& name) {
  Impl& d = *impl_;
  Impl::Asm* a = FindOwned(d.assemblies, user, name);
  if (a == nullptr || a->rec.desired_state == kDesiredDestroyed) return AssemblyNotFoundError(name);
  if (a->rec.desired_state == kDesiredStopped) return OkStatus();
  store::AssemblyRecord rec = a->rec;
  rec.desired_state = kDesiredStopped;
  rec.state = kStopped;
  rec.diagnostics = "stopped by " + user;
  RETURN_IF_ERROR(d.store.UpdateAssembly(rec));
  ++rec.generation;
  a->rec = rec;
  d.AddEvent(*a, "", "", "STOP", rec.diagnostics);
  d.Step();
  return OkStatus();
}

Status Manager::Start(const std::string& user, const std::string& name) {
  Impl& d = *impl_;
  Impl::Asm* a = FindOwned(d.assemblies, user, name);
  if (a == nullptr || a->rec.desired_state == kDesiredDestroyed) return AssemblyNotFoundError(name);
  bool finished = a->rec.state == kFailed || a->rec.state == kSucceeded;
  if (a->rec.desired_state == kDesiredStarted && !finished) {
    return FailedPreconditionError("assembly " + name + " is already running (state " +
                                   a->rec.state + ")");
  }
  for (Impl::Comp& c : a->comps) {
    for (auto& [idx, i] : c.instances) {
      if (i.phase != Impl::Phase::kDone) {
        return FailedPreconditionError("assembly " + name + " is still stopping (" +
                                       i.ref.instance + "); start it once it has stopped");
      }
    }
  }
  store::AssemblyRecord rec = a->rec;
  rec.desired_state = kDesiredStarted;
  rec.state = "ACCEPTED";
  rec.diagnostics = "";
  if (a->spec.lifetime_seconds && *a->spec.lifetime_seconds > 0) {
    rec.lifetime_deadline_ms = d.clock.WallMillis() + *a->spec.lifetime_seconds * 1000;
  }
  RETURN_IF_ERROR(d.store.UpdateAssembly(rec));
  ++rec.generation;
  a->rec = rec;
  a->gang_placed = false;
  for (Impl::Comp& c : a->comps) {
    c.failed = false;
    c.diagnostics.clear();
    c.failures = std::make_unique<ComponentFailures>(c.options, d.clock);
    const spec::Component& cs = d.CompSpec(*a, c);
    for (auto& [idx, i] : c.instances) {
      i.phase = Impl::Phase::kWaiting;
      i.rec.state = kPending;
      i.diagnostics.clear();
      i.restarts = std::make_unique<InstanceRestarts>(cs.restart_policy, c.options, d.clock);
      d.MarkDirty(*a, i);
    }
  }
  d.AddEvent(*a, "", "", "START", "started by " + user);
  d.Step();
  return OkStatus();
}

Status Manager::Destroy(const std::string& user, const std::string& name) {
  Impl& d = *impl_;
  Impl::Asm* a = FindOwned(d.assemblies, user, name);
  if (a == nullptr) return AssemblyNotFoundError(name);
  if (a->rec.desired_state == kDesiredDestroyed) return OkStatus();
  store::AssemblyRecord rec = a->rec;
  rec.desired_state = kDesiredDestroyed;
  rec.state = kStopped;
  rec.diagnostics = "being destroyed";
  RETURN_IF_ERROR(d.store.UpdateAssembly(rec));
  ++rec.generation;
  a->rec = rec;
  d.AddEvent(*a, "", "", "DESTROY", "destroyed by " + user);
  d.Step();
  return OkStatus();
}

StatusOr<int64_t> Manager::Flex(const std::string& user, const std::string& name,
                                const std::string& component, int64_t count) {
  Impl& d = *impl_;
  Impl::Asm* a = FindOwned(d.assemblies, user, name);
  if (a == nullptr || a->rec.desired_state == kDesiredDestroyed) return AssemblyNotFoundError(name);
  if (count < 0 || count > spec::kMaxContainersPerComponent) {
    return InvalidArgumentError("number_of_containers: " + std::to_string(count) +
                                " is out of range 0.." +
                                std::to_string(spec::kMaxContainersPerComponent));
  }
  Impl::Comp* c = d.FindComp(*a, component);
  if (c == nullptr) {
    return NotFoundError("assembly " + name + " has no component " + component);
  }
  if (a->upgrade) {
    return FailedPreconditionError("assembly " + name + " is upgrading to version " +
                                   a->upgrade->to_version + " (" + a->upgrade->state +
                                   "): flex it once the upgrade is finalized or cancelled");
  }
  // A finished assembly starts nothing: a new count stored now would say what never runs.
  // (A STOPPED one takes it: its next start starts that many.)
  if (a->rec.state == kFailed || a->rec.state == kSucceeded) {
    return FailedPreconditionError("assembly " + name + " is " + a->rec.state +
                                   ": flexing it would start nothing; start it again first "
                                   "(tarn start " +
                                   name + "), then flex");
  }
  const spec::Component& cs = a->spec.components[c->spec_index];
  if (cs.autoscale && (count < cs.autoscale->min || count > cs.autoscale->max)) {
    return InvalidArgumentError("number_of_containers: component " + component +
                                " autoscales from " + std::to_string(cs.autoscale->min) + " to " +
                                std::to_string(cs.autoscale->max) +
                                " replicas (tarn.autoscale.min, tarn.autoscale.max); " +
                                std::to_string(count) + " is outside them");
  }
  int64_t before = cs.number_of_containers;
  if (before == count) return before;
  RETURN_IF_ERROR(d.SetCount(*a, *c, count, "FLEX",
                             "from " + std::to_string(before) + " to " + std::to_string(count)));
  d.Step();
  return before;
}

Status Manager::Impl::SetCount(Asm& a, Comp& c, int64_t count, const std::string& type,
                               const std::string& message) {
  spec::Component& cs = a.spec.components[c.spec_index];
  json spec_json = a.spec_json;
  bool found = false;
  for (json& comp : spec_json["components"]) {
    if (comp.value("name", "") == cs.name) {
      comp["number_of_containers"] = count;
      found = true;
    }
  }
  if (!found) return InternalError("component " + cs.name + " missing from the stored spec");
  store::AssemblyRecord rec = a.rec;
  rec.spec_json = spec_json.dump();
  RETURN_IF_ERROR(store.UpdateAssembly(rec));
  ++rec.generation;
  CrashPoint("flex-committed");
  a.rec = rec;
  a.spec_json = std::move(spec_json);
  cs.number_of_containers = count;
  AddEvent(a, cs.name, "", type, message);
  return OkStatus();
}

Status Manager::SetLifetime(const std::string& user, const std::string& name, int64_t seconds) {
  Impl& d = *impl_;
  Impl::Asm* a = FindOwned(d.assemblies, user, name);
  if (a == nullptr || a->rec.desired_state == kDesiredDestroyed) return AssemblyNotFoundError(name);
  if (seconds < -1 || seconds == 0) {
    return InvalidArgumentError("lifetime: " + std::to_string(seconds) +
                                " must be a positive number of seconds, or -1 for unlimited");
  }
  store::AssemblyRecord rec = a->rec;
  rec.lifetime_deadline_ms = seconds < 0 ? 0 : d.clock.WallMillis() + seconds * 1000;
  RETURN_IF_ERROR(d.store.UpdateAssembly(rec));
  ++rec.generation;
  a->rec = rec;
  d.AddEvent(*a, "", "", "LIFETIME",
             seconds < 0 ? "unlimited" : std::to_string(seconds) + " s from now");
  d.Step();
  return OkStatus();
}

void Manager::Handle(const BackendEvent& e) {
  HandleOne(e);
  impl_->Step();
}

void Manager::Handle(const std::vector<BackendEvent>& events) {
  for (const BackendEvent& e : events) HandleOne(e);
  impl_->Step();
}

void Manager::HandleOne(const BackendEvent& e) {
  Impl& d = *impl_;
  auto it = d.by_key.find(e.key);
  if (it == d.by_key.end()) return;
  Impl::Asm& a = *it->second.first;
  Impl::Inst& i = *it->second.second;
  if (e.container_id != i.rec.container_id) return;  // news of an older start
  Impl::Comp* c = d.FindComp(a, i.ref.component);
  if (c == nullptr) return;
  const spec::Component& cs = d.CompSpecOf(a, i);
  switch (e.kind) {
    case BackendEvent::Kind::kStarted:
      if (i.phase != Impl::Phase::kStarting && i.phase != Impl::Phase::kStopping) break;
      i.ip = e.ip;
      if (i.placement.node.empty()) i.rec.node = e.node;  // the backend placed it itself
      if (i.phase == Impl::Phase::kStopping) break;       // the stop already asked for will end it
      i.phase = Impl::Phase::kRunning;
      i.restarts->Started();
      i.ready = !cs.readiness_check || cs.readiness_check->type == spec::ReadinessType::kDefault;
      i.next_probe = d.clock.Now();
      i.rec.state = i.ready ? kReady : kUnready;
      i.diagnostics = i.recovering ? "found running after a server restart" : "";
      // Not written: running and readiness are observations a restarted server makes
      // again (it recovers every STARTING instance), and 1,000 starts are 1,000 fsyncs.
      d.AddEvent(a, i.ref.component, i.ref.instance, i.recovering ? "ADOPTED" : "STARTED",
                 i.rec.container_id + (i.ip.empty() ? "" : " at " + i.ip));
      if (i.ready)
        d.AddEvent(a, i.ref.component, i.ref.instance, "READY", "running (DEFAULT check)");
      i.recovering = false;
      break;
    case BackendEvent::Kind::kStartFailed:
      if (i.phase == Impl::Phase::kStopping) {
        d.Finish(a, i, kStopped, "stopped before it started");
        d.Requeue(a, i);
        break;
      }
      if (i.phase != Impl::Phase::kStarting) break;
      if (i.recovering) {
        // Committed but never started (the server died in between): start it now.
        i.recovering = false;
        d.AddEvent(a, i.ref.component, i.ref.instance, "RECOVER",
                   "no container found (" + e.detail + "); launching it");
        i.phase = i.has_placement ? Impl::Phase::kPlaced : Impl::Phase::kWaiting;
        break;
      }
      d.AddEvent(a, i.ref.component, i.ref.instance, "START_FAILED", e.detail);
      i.restarts->Started();
      {
        runtime::ExitInfo exit;
        exit.exit_code = 127;
        exit.diagnostics = "could not start: " + e.detail;
        d.OnExit(a, *c, i, exit);
      }
      break;
    case BackendEvent::Kind::kExited:
      if (i.phase == Impl::Phase::kStopping) {
        // Stopped on purpose: not judged by its exit code (no restart counted, no failure).
        i.rec.last_exit =
            e.exit.diagnostics.empty() ? runtime::DescribeExit(e.exit) : e.exit.diagnostics;
        if (!e.exit.last_stderr.empty()) {
          i.rec.last_exit += "; its last stderr line: " + e.exit.last_stderr;
        }
        d.AddEvent(a, i.ref.component, i.ref.instance, "STOPPED", i.rec.last_exit);
        d.Finish(a, i, kStopped, "stopped");
        // Preempted, or stopped for a flex that was undone meanwhile: it runs again.
        d.Requeue(a, i);
        break;
      }
      if (i.phase != Impl::Phase::kRunning && i.phase != Impl::Phase::kStarting) break;
      if (i.phase == Impl::Phase::kStarting) i.restarts->Started();
      i.recovering = false;
      if (e.preempted) {
        d.PreemptedByBackend(a, i, e.exit);
        break;
      }
      d.OnExit(a, *c, i, e.exit);
      break;
    case BackendEvent::Kind::kWaiting:
      if (i.phase != Impl::Phase::kStarting || e.detail.empty()) break;
      if (i.diagnostics != e.detail) {
        i.diagnostics = e.detail;
        d.AddEvent(a, i.ref.component, i.ref.instance, "WAITING", e.detail);
      }
      break;
    case BackendEvent::Kind::kProbed:
      i.probe_in_flight = false;
      if (i.phase != Impl::Phase::kRunning) break;
      i.next_probe = d.clock.Now() + d.options.probe_interval;
      if (i.unready_until) break;  // leaving the ready set for its upgrade
      if (e.ready != i.ready) {
        i.ready = e.ready;
        i.rec.state = e.ready ? kReady : kUnready;
        d.AddEvent(a, i.ref.component, i.ref.instance, e.ready ? "READY" : "UNREADY", e.detail);
      }
      i.diagnostics = e.ready ? "" : "readiness check: " + e.detail;
      break;
  }
}

void Manager::Tick() { impl_->Step(); }

std::optional<Clock::TimePoint> Manager::NextDeadline() const {
  const Impl& d = *impl_;
  std::optional<Clock::TimePoint> next;
  auto consider = [&next](Clock::TimePoint t) {
    if (!next || t < *next) next = t;
  };
  int64_t wall = d.clock.WallMillis();
  Clock::TimePoint now = d.clock.Now();
  for (const auto& [key, a] : d.assemblies) {
    if (a.rec.lifetime_deadline_ms > 0 && a.rec.desired_state != kDesiredDestroyed) {
      consider(now +
               std::chrono::milliseconds(std::max<int64_t>(0, a.rec.lifetime_deadline_ms - wall)));
    }
    if (std::optional<Clock::TimePoint> t = d.NextAutoscale(a)) consider(*t);
    if (std::optional<Clock::TimePoint> t = d.NextUpgradeDeadline(a)) consider(*t);
    for (const Impl::Comp& c : a.comps) {
      for (const auto& [idx, i] : c.instances) {
        const spec::Component& cs = d.CompSpecOf(a, i);
        bool probes =
            cs.readiness_check && cs.readiness_check->type != spec::ReadinessType::kDefault;
        if (i.phase == Impl::Phase::kBackoff) consider(i.restart_at);
        if (i.phase == Impl::Phase::kStopping) consider(i.stop_deadline);
        if (!i.stop_after.empty()) consider(i.stop_after_deadline);
        if (i.unready_until) consider(*i.unready_until);
        if (i.phase == Impl::Phase::kRunning && probes && !i.probe_in_flight)
          consider(i.next_probe);
      }
    }
  }
  return next;
}

Backend& Manager::backend() const { return impl_->backend; }

bool Manager::Busy() const {
  for (const auto& [key, pair] : impl_->by_key) {
    auto phase = pair.second->phase;
    if (phase == Impl::Phase::kStarting || phase == Impl::Phase::kStopping) return true;
  }
  return false;
}

}  // namespace tarn::service
