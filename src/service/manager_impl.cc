// Manager::Impl's transitions, reconciliation and loading (manager_impl.h).
#include "service/manager_impl.h"

#include <algorithm>
#include <cstdio>

#include "common/crash_point.h"
#include "common/number.h"
#include "spec/parser.h"
#include "spec/substitution.h"

namespace tarn::service {
namespace {

using json = nlohmann::json;

std::string Seconds(Duration d) {
  double s = std::chrono::duration<double>(d).count();
  char buf[32];
  if (s < 10) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else {
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  }
  return buf;
}

std::string GpusJson(const std::vector<int>& gpus) { return json(gpus).dump(); }

std::vector<int> GpusFromJson(const std::string& text) {
  try {
    return json::parse(text).get<std::vector<int>>();
  } catch (const json::exception&) {
    return {};
  }
}

// "<user>_<assembly>_<instance>_<n>", n counting every start of the instance.
std::string NextContainerId(const InstanceRef& ref, const std::string& previous) {
  int64_t n = 0;
  auto us = previous.rfind('_');
  if (us != std::string::npos) n = ParseInt64(previous.substr(us + 1)).value_or(0);
  return ref.user + "_" + ref.assembly + "_" + ref.instance + "_" + std::to_string(n + 1);
}

// " on node-1", or "" when the node is not known yet (the backend picks it at launch).
std::string OnNode(const std::string& node) { return node.empty() ? "" : " on " + node; }

bool IsTerminal(const std::string& state) {
  return state == kStopped || state == kSucceeded || state == kFailed;
}

}  // namespace

void Manager::Impl::AddEvent(Asm& a, const std::string& component, const std::string& instance,
                             const std::string& type, const std::string& message) {
  a.events.push_back({clock.WallMillis(), component, instance, type, message});
  a.last_event = ++event_serial;
  while (a.events.size() > options.events_per_assembly) a.events.pop_front();
}

void Manager::Impl::MarkDirty(Asm& a, const Inst& i) {
  dirty.insert({AsmKey(a.rec.user, a.rec.name), i.ref.instance});
}

StatusOr<spec::Assembly> Manager::Impl::ParseSpec(const std::string& user,
                                                  const json& spec_json) const {
  spec::ParseOptions po;
  po.user = user;
  po.domain = options.domain;
  spec::ParseResult r = spec::ParseAssemblyJson(spec_json, po);
  if (!r.ok()) {
    std::string msg;
    for (const auto& d : r.diagnostics) {
      if (!msg.empty()) msg += "; ";
      msg += d.path + ": " + d.message;
    }
    return InvalidArgumentError("stored assembly no longer parses: " + msg);
  }
  return std::move(*r.assembly);
}

void Manager::Impl::BuildComps(Asm& a) {
  const std::string queue = a.spec.queue.empty() ? "default" : a.spec.queue;
  for (const scheduler::QueueUsage& q : backend.Queues()) {
    if (q.config.name != queue) continue;
    a.priority = q.config.PriorityFor(a.spec.priority);
  }
  a.comps.clear();
  for (size_t k = 0; k < a.spec.components.size(); ++k) {
    Comp c;
    c.spec_index = k;
    c.options = OptionsFor(a.spec.components[k]);
    c.failures = std::make_unique<ComponentFailures>(c.options, clock);
    if (const auto& scale = a.spec.components[k].autoscale) {
      c.autoscaler = std::make_unique<Autoscaler>(*scale, clock);
    }
    a.comps.push_back(std::move(c));
  }
}

RestartOptions Manager::Impl::OptionsFor(const spec::Component& cs) const {
  RestartOptions out = RestartOptions::FromProperties(cs.configuration.properties);
  // Defaults the server's configuration changed and the component did not.
  const RestartOptions builtin;
  if (out.initial_backoff == builtin.initial_backoff)
    out.initial_backoff = options.restart.initial_backoff;
  if (out.max_backoff == builtin.max_backoff) out.max_backoff = options.restart.max_backoff;
  if (out.healthy_reset == builtin.healthy_reset) out.healthy_reset = options.restart.healthy_reset;
  return out;
}

Manager::Impl::Inst& Manager::Impl::NewInstance(Asm& a, Comp& c, int64_t index) {
  const spec::Component& cs = CompSpec(a, c);
  Inst inst;
  inst.ref = {a.rec.user, a.rec.name, cs.name, spec::InstanceName(cs.name, index), index};
  inst.rec.user = a.rec.user;
  inst.rec.assembly = a.rec.name;
  inst.rec.name = inst.ref.instance;
  inst.rec.component = cs.name;
  inst.rec.index = index;
  inst.rec.state = kPending;
  inst.rec.version = a.spec.version;
  inst.restarts = std::make_unique<InstanceRestarts>(cs.restart_policy, c.options, clock);
  auto [it, inserted] = c.instances.emplace(index, std::move(inst));
  by_key[it->second.ref.Key()] = {&a, &it->second};
  MarkDirty(a, it->second);
  return it->second;
}

Manager::Impl::Comp* Manager::Impl::FindComp(Asm& a, const std::string& name) {
  for (Comp& c : a.comps) {
    if (CompSpec(a, c).name == name) return &c;
  }
  return nullptr;
}

void Manager::Impl::ReleasePlace(Inst& i) {
  if (i.has_placement || i.phase == Phase::kRequested) backend.ReleasePlacement(i.ref.Key());
  i.has_placement = false;
  i.placement = {};
}

void Manager::Impl::Finish(Asm& a, Inst& i, const char* state, const std::string& why) {
  ReleasePlace(i);
  i.phase = Phase::kDone;
  i.ready = false;
  i.rec.state = state;
  i.diagnostics = why;
  MarkDirty(a, i);
}

void Manager::Impl::AskStop(Asm& a, Inst& i, const std::string& why) {
  switch (i.phase) {
    case Phase::kStarting:
    case Phase::kRunning: {
      i.phase = Phase::kStopping;
      i.diagnostics = "stopping: " + why;
      i.stop_deadline = clock.Now() + GraceOf(a, i) + options.stop_timeout;
      AddEvent(a, i.ref.component, i.ref.instance, "STOP", why);
      InstanceRef ref = i.ref;
      std::string id = i.rec.container_id;
      actions.push_back([this, ref, id] { backend.Stop(ref, id); });
      break;
    }
    case Phase::kWaiting:
    case Phase::kRequested:
    case Phase::kPlaced:
    case Phase::kBackoff:
      Finish(a, i, kStopped, why);
      break;
    case Phase::kStopping:
    case Phase::kDone:
      break;
  }
}

void Manager::Impl::FailAssembly(Asm& a, const std::string& why) {
  if (a.rec.state == kFailed) return;
  a.rec.state = kFailed;
  a.rec.diagnostics = why;
  dirty_assemblies.insert(AsmKey(a.rec.user, a.rec.name));
  AddEvent(a, "", "", "FAILED", why);
  for (Comp& c : a.comps) {
    for (auto& [idx, i] : c.instances) AskStopInOrder(a, i, "the assembly failed");
  }
}

// An instance's run ended (not by our stop): restart it, or leave it finished.
void Manager::Impl::OnExit(Asm& a, Comp& c, Inst& i, const runtime::ExitInfo& exit) {
  std::string how = exit.diagnostics.empty() ? runtime::DescribeExit(exit) : exit.diagnostics;
  // Where users look (status, events): why it failed, in the program's own last words.
  if (!exit.last_stderr.empty()) how += "; its last stderr line: " + exit.last_stderr;
  bool success = exit.exit_code == 0 && exit.signal == 0;
  i.ready = false;
  i.rec.last_exit = how;
  AddEvent(a, i.ref.component, i.ref.instance, "EXITED", how);
  RestartDecision d = i.restarts->Exited(success, how);
  if (!success) {
    std::string reason = c.failures->Failed(CompSpec(a, c).name);
    if (!reason.empty()) {
      c.failed = true;
      c.diagnostics = reason;
      Finish(a, i, kFailed, how);
      FailAssembly(a, reason);
      return;
    }
  }
  switch (d.action) {
    case RestartDecision::Action::kRestart:
      i.phase = Phase::kBackoff;
      i.restart_at = clock.Now() + d.delay;
      i.rec.state = kBackoff;
      ++i.rec.restarts;
      i.diagnostics = "restarting in " + Seconds(d.delay) + " after it " + how;
      AddEvent(a, i.ref.component, i.ref.instance, "RESTART", i.diagnostics);
      MarkDirty(a, i);
      break;
    case RestartDecision::Action::kSucceeded:
      Finish(a, i, kSucceeded, d.reason.empty() ? how : d.reason);
      break;
    case RestartDecision::Action::kFailed:
      Finish(a, i, kFailed, d.reason.empty() ? how : d.reason);
      c.failed = true;
      c.diagnostics = i.ref.instance + " failed: " + i.diagnostics;
      FailAssembly(a, c.diagnostics);
      break;
  }
}

// The instance's address: its own from placement on (its name resolves before it
// starts); with a backend that knows it only once the instance runs (Slurm: its node's),
// the one kStarted brought, while it runs.
std::string Manager::Impl::AddressOf(const Inst& i) const {
  if (i.has_placement && !i.placement.ip.empty()) return i.placement.ip;
  return i.phase == Phase::kRunning || i.phase == Phase::kStopping ? i.ip : "";
}

void Manager::Impl::Launch(Asm& a, Inst& i) {
  i.rec.container_id = NextContainerId(i.ref, i.rec.container_id);
  i.rec.node = i.placement.node;
  i.rec.gpus_json = GpusJson(i.placement.gpus);
  i.rec.ip = i.placement.ip;
  i.rec.state = kStarting;
  i.rec.launched_ms = clock.WallMillis();
  i.phase = Phase::kStarting;
  i.ready = false;
  i.probe_in_flight = false;
  i.unready_until.reset();
  i.diagnostics = "starting" + OnNode(i.placement.node);
  if (a.preempted) Resumed(a, i);
  i.preempted.clear();
  i.resume_step.reset();
  MarkDirty(a, i);
  AddEvent(a, i.ref.component, i.ref.instance, "LAUNCH",
           i.rec.container_id + OnNode(i.placement.node));
  InstanceRef ref = i.ref;
  Placement placement = i.placement;
  std::string id = i.rec.container_id;
  actions.push_back([this, ref, placement, id] {
    CrashPoint("launch-committed");
    auto it = by_key.find(ref.Key());
    if (it == by_key.end()) return;
    backend.Launch(SpecOf(*it->second.first, *it->second.second), ref, placement, id);
  });
}

bool Manager::Impl::ComponentReady(const Asm& a, const std::string& name) const {
  for (const Comp& c : a.comps) {
    if (CompSpec(a, c).name != name) continue;
    int64_t n = CompSpec(a, c).number_of_containers;
    for (int64_t k = 0; k < n; ++k) {
      auto it = c.instances.find(k);
      if (it == c.instances.end()) return false;
      const Inst& i = it->second;
      bool ok = (i.phase == Phase::kRunning && i.ready) ||
                (i.phase == Phase::kDone && i.rec.state == kSucceeded);
      if (!ok) return false;
    }
    return true;
  }
  return true;
}

std::string Manager::Impl::WaitingFor(const Asm& a, const Comp& c) const {
  std::string names;
  for (const std::string& d : CompSpec(a, c).dependencies) {
    if (ComponentReady(a, d)) continue;
    if (!names.empty()) names += ", ";
    names += d;
  }
  return names;
}

bool Manager::Impl::InGang(const Asm& a, const Comp& c) const {
  return a.spec.gang && CompSpec(a, c).tf_role != spec::TfRole::kNone;
}

void Manager::Impl::Reconcile(Asm& a) {
  const bool run =
      a.rec.desired_state == kDesiredStarted && a.rec.state != kFailed && a.rec.state != kSucceeded;
  StopDeferred(a);
  if (!run) {
    for (Comp& c : a.comps) {
      for (auto& [idx, i] : c.instances) {
        AskStopInOrder(a, i,
                       a.rec.desired_state == kDesiredDestroyed ? "destroying the assembly"
                                                                : "stopping the assembly");
      }
    }
    ForgetRemoved(a);
    return;
  }
  // Instances 0..n-1 exist; those beyond n go.
  for (Comp& c : a.comps) {
    int64_t n = CompSpec(a, c).number_of_containers;
    for (int64_t k = 0; k < n; ++k) {
      auto it = c.instances.find(k);
      if (it == c.instances.end()) {
        NewInstance(a, c, k);
      } else if (it->second.remove) {
        it->second.remove = false;  // flexed back up before it was gone
        if (it->second.phase == Phase::kDone) {
          it->second.phase = Phase::kWaiting;
          it->second.rec.state = kPending;
          MarkDirty(a, it->second);
        }
      }
    }
    for (auto& [idx, i] : c.instances) {
      if (idx >= n && !i.remove) {
        i.remove = true;
        AskStop(a, i, "flexed down");
      }
    }
  }
  ForgetRemoved(a);

  // Placement requests: the gang together (the first time, and again once every member
  // has stopped after a preemption), everything else one by one once its dependencies are
  // READY.
  bool gang_stopped = true;
  for (Comp& c : a.comps) {
    if (!InGang(a, c)) continue;
    for (auto& [idx, i] : c.instances) {
      gang_stopped &= i.remove || i.phase == Phase::kWaiting || i.phase == Phase::kDone;
    }
  }
  std::vector<InstanceRef> gang;
  for (Comp& c : a.comps) {
    if (!InGang(a, c) || a.gang_placed || !gang_stopped) continue;
    for (auto& [idx, i] : c.instances) {
      if (i.phase == Phase::kWaiting && !i.remove) gang.push_back(i.ref);
    }
  }
  if (!gang.empty()) {
    Status s = RequestPlacements(a, gang, /*gang=*/true);
    for (const InstanceRef& r : gang) {
      Inst& i = *by_key.at(r.Key()).second;
      if (s.ok()) {
        i.phase = Phase::kRequested;
      } else {
        i.diagnostics = "cannot be placed: " + s.message();
      }
    }
    if (s.ok()) a.gang_placed = true;
  }
  for (Comp& c : a.comps) {
    std::string waiting = WaitingFor(a, c);
    std::vector<InstanceRef> singles;
    for (auto& [idx, i] : c.instances) {
      if (i.remove) continue;
      switch (i.phase) {
        case Phase::kWaiting:
          if (InGang(a, c) && !a.gang_placed) break;
          if (!waiting.empty() && !InGang(a, c)) {
            i.diagnostics = "waiting for " + waiting + " to be READY";
            break;
          }
          singles.push_back(i.ref);
          break;
        case Phase::kPlaced:
          if (!waiting.empty()) {
            i.diagnostics =
                "placed" + OnNode(i.placement.node) + "; waiting for " + waiting + " to be READY";
            break;
          }
          Launch(a, i);
          break;
        default:
          break;
      }
    }
    if (!singles.empty()) {
      Status s = RequestPlacements(a, singles, /*gang=*/false);
      for (const InstanceRef& r : singles) {
        Inst& i = *by_key.at(r.Key()).second;
        if (s.ok()) {
          i.phase = Phase::kRequested;
        } else {
          i.diagnostics = "cannot be placed: " + s.message();
        }
      }
    }
  }
}

// Flexed-away instances that have stopped are forgotten: records, files, logs.
void Manager::Impl::ForgetRemoved(Asm& a) {
  for (Comp& c : a.comps) {
    for (auto it = c.instances.begin(); it != c.instances.end();) {
      Inst& i = it->second;
      if (!i.remove || i.phase != Phase::kDone) {
        ++it;
        continue;
      }
      std::string key = AsmKey(a.rec.user, a.rec.name);
      dirty.erase({key, i.ref.instance});
      Status s = store.DeleteInstance(a.rec.user, a.rec.name, i.ref.instance);
      (void)s;  // an instance row left behind is removed again at the next start
      AddEvent(a, i.ref.component, i.ref.instance, "REMOVED", "flexed down");
      InstanceRef ref = i.ref;
      actions.push_back([this, ref] { backend.Cleanup(ref, /*logs=*/true); });
      if (options.registry != nullptr) {
        options.registry->Remove(i.ref.user, i.ref.assembly, i.ref.instance);
      }
      by_key.erase(i.ref.Key());
      it = c.instances.erase(it);
    }
  }
}

// Derived states of the components and the assembly.
void Manager::Impl::UpdateStates(Asm& a) {
  std::string before = a.rec.state;
  if (a.rec.desired_state != kDesiredStarted) {
    a.rec.state = kStopped;
  } else if (a.rec.state != kFailed && a.rec.state != kSucceeded) {
    bool all_succeeded = !a.comps.empty();
    bool all_stable = true;
    bool flexing = false;
    bool any_started = false;
    for (Comp& c : a.comps) {
      const spec::Component& cs = CompSpec(a, c);
      int64_t n = cs.number_of_containers;
      int64_t live = 0, succeeded = 0, ready = 0;
      for (auto& [idx, i] : c.instances) {
        if (i.remove) {
          flexing = true;
          continue;
        }
        ++live;
        if (i.phase != Phase::kWaiting && i.phase != Phase::kRequested) any_started = true;
        if (i.phase == Phase::kDone && i.rec.state == kSucceeded) ++succeeded;
        if (i.phase == Phase::kRunning && i.ready) ++ready;
      }
      if (live != n) flexing = true;
      bool comp_succeeded =
          n > 0 && succeeded == n && cs.restart_policy != spec::RestartPolicy::kAlways;
      if (!comp_succeeded && !(n == 0 && cs.restart_policy != spec::RestartPolicy::kAlways)) {
        all_succeeded = false;
      }
      if (ready + succeeded < n) all_stable = false;
    }
    if (all_succeeded) {
      a.rec.state = kSucceeded;
      a.rec.diagnostics = "every instance finished its work";
      AddEvent(a, "", "", "SUCCEEDED", a.rec.diagnostics);
    } else if (flexing && any_started && before != "ACCEPTED") {
      a.rec.state = "FLEX";
    } else if (all_stable) {
      a.rec.state = "STABLE";
    } else if (any_started) {
      a.rec.state = "STARTED";
    } else {
      a.rec.state = "ACCEPTED";
    }
  }
  if (a.upgrade && a.rec.desired_state == kDesiredStarted && a.rec.state != kFailed &&
      a.rec.state != kSucceeded) {
    a.rec.state = a.upgrade->state;  // YARN's: the upgrade's state is the service's
  }
  if (a.rec.state != before) {
    dirty_assemblies.insert(AsmKey(a.rec.user, a.rec.name));
    if (a.rec.state != kFailed && a.rec.state != kSucceeded) {
      AddEvent(a, "", "", "STATE", before + " -> " + a.rec.state);
    }
  }
}

void Manager::Impl::Step() {
  Clock::TimePoint now = clock.Now();
  int64_t wall = clock.WallMillis();
  std::vector<std::string> expired;
  for (auto& [key, a] : assemblies) {
    if (a.rec.lifetime_deadline_ms > 0 && wall >= a.rec.lifetime_deadline_ms &&
        a.rec.desired_state != kDesiredDestroyed) {
      expired.push_back(key);
    }
    for (Comp& c : a.comps) {
      for (auto& [idx, i] : c.instances) {
        const spec::Component& cs = CompSpecOf(a, i);
        if (i.phase == Phase::kBackoff && now >= i.restart_at) {
          i.phase = i.has_placement ? Phase::kPlaced : Phase::kWaiting;
          i.diagnostics = "restarting";
        }
        if (i.phase == Phase::kRunning && cs.readiness_check &&
            cs.readiness_check->type != spec::ReadinessType::kDefault && !i.probe_in_flight &&
            now >= i.next_probe) {
          i.probe_in_flight = true;
          InstanceRef ref = i.ref;
          std::string id = i.rec.container_id;
          spec::ReadinessCheck check = *cs.readiness_check;
          actions.push_back([this, ref, id, check] {
            auto it = by_key.find(ref.Key());
            if (it != by_key.end()) {
              backend.Probe(SpecOf(*it->second.first, *it->second.second), ref, id, check);
            }
          });
        }
        if (i.phase == Phase::kStopping && now >= i.stop_deadline) {
          AddEvent(a, i.ref.component, i.ref.instance, "STOP",
                   "no exit reported " + Seconds(options.stop_timeout) +
                       " after the stop; giving up on it");
          Finish(a, i, kStopped, "stopped (its exit was never reported)");
        }
      }
    }
  }
  for (const std::string& key : expired) {
    Asm& a = assemblies.at(key);
    AddEvent(a, "", "", "LIFETIME", "its lifetime ran out; destroying it");
    a.rec.desired_state = kDesiredDestroyed;
    a.rec.diagnostics = "its lifetime ran out";
    dirty_assemblies.insert(key);
  }
  for (auto& [key, a] : assemblies) Autoscale(a);
  for (auto& [key, a] : assemblies) RollUpgrade(a);
  // Reconcile (which asks for placements), place, and reconcile again (which launches
  // what was placed).
  for (auto& [key, a] : assemblies) Reconcile(a);
  if (PlacePass()) {
    for (auto& [key, a] : assemblies) Reconcile(a);
  }
  for (auto& [key, a] : assemblies) UpdateStates(a);
  PublishNames();
  Flush();
  FinishDestroys();
  RunActions();
}

// The registry holds a name for every instance that holds a place (and so an address):
// its A record from placement on, listed under its component once READY.
void Manager::Impl::PublishNames() {
  if (options.registry == nullptr) return;
  for (auto& [key, a] : assemblies) {
    for (Comp& c : a.comps) {
      for (auto& [idx, i] : c.instances) {
        const spec::Component& cs = CompSpecOf(a, i);
        const std::string ip = AddressOf(i);
        const bool named = i.has_placement && i.phase != Phase::kDone && !ip.empty();
        if (!named) {
          if (i.published) {
            options.registry->Remove(i.ref.user, i.ref.assembly, i.ref.instance);
            i.published.reset();
          }
          continue;
        }
        registry::InstanceRecords r;
        r.user = i.ref.user;
        r.assembly = i.ref.assembly;
        r.component = i.ref.component;
        r.instance = i.ref.instance;
        r.ip = ip;
        r.ready = i.phase == Phase::kRunning && i.ready;
        r.container_id = i.rec.container_id;
        for (const spec::NamedPort& p : backend.InstancePorts(i.ref, cs)) {
          r.ports.push_back({p.name, p.port});
        }
        if (!i.published || *i.published != r) {
          options.registry->Upsert(r);
          i.published = std::move(r);
        }
      }
    }
  }
  // Backends whose containers read a hosts file get each assembly's changed names.
  const uint64_t generation = options.registry->generation();
  if (generation == names_generation) return;
  names_generation = generation;
  for (auto& [key, a] : assemblies) {
    std::string lines = options.registry->HostsLines(a.rec.user, a.rec.name);
    if (a.hosts_sent == lines) continue;
    backend.NamesChanged(a.rec.user, a.rec.name, lines);
    a.hosts_sent = std::move(lines);
  }
}

// One placement pass; true when it placed something.
bool Manager::Impl::PlacePass() {
  bool requested = false;
  for (auto& [key, pair] : by_key) requested |= pair.second->phase == Phase::kRequested;
  if (!requested) return false;
  NoteCheckpoints();
  bool any = false;
  // A second pass when preemption freed places at once (its victims had not started).
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::string& key : backend.Place()) {
      auto it = by_key.find(key);
      if (it == by_key.end()) continue;
      Inst& i = *it->second.second;
      PlacementStatus ps = backend.GetPlacement(key);
      if (ps.phase != PlacementStatus::Phase::kPlaced || i.phase != Phase::kRequested) continue;
      i.placement = ps.placement;
      i.has_placement = true;
      i.phase = Phase::kPlaced;
      any = true;
      AddEvent(*it->second.first, i.ref.component, i.ref.instance, "PLACED",
               (ps.placement.node.empty() ? "by the backend, which picks the node at launch"
                                          : "on " + ps.placement.node) +
                   (ps.placement.gpus.empty() ? "" : " with GPUs " + GpusJson(ps.placement.gpus)));
    }
    if (!ActOnPreemptions()) break;
  }
  return any;
}

void Manager::Impl::Flush() {
  if (dirty.empty() && dirty_assemblies.empty()) return;
  Status s = store.Transaction([&]() -> Status {
    for (const std::string& key : dirty_assemblies) {
      auto it = assemblies.find(key);
      if (it == assemblies.end()) continue;
      RETURN_IF_ERROR(store.UpdateAssembly(it->second.rec));
      ++it->second.rec.generation;
    }
    for (const auto& [akey, name] : dirty) {
      auto it = assemblies.find(akey);
      if (it == assemblies.end()) continue;
      auto bk = by_key.find(akey + "/" + name);
      if (bk == by_key.end()) continue;
      Inst& i = *bk->second.second;
      store::InstanceRecord rec = i.rec;
      RETURN_IF_ERROR(store.PutInstance(rec));
    }
    return OkStatus();
  });
  if (!s.ok()) {
    // The store is the server's memory of what runs; without it nothing is safe to do.
    // Drop the actions so that nothing starts that a restart could not find again.
    std::fprintf(stderr, "tarn server: cannot write the state store: %s\n", s.ToString().c_str());
    actions.clear();
  }
  dirty.clear();
  dirty_assemblies.clear();
}

void Manager::Impl::FinishDestroys() {
  for (auto it = assemblies.begin(); it != assemblies.end();) {
    Asm& a = it->second;
    bool all_done = true;
    for (Comp& c : a.comps) {
      for (auto& [idx, i] : c.instances) all_done &= i.phase == Phase::kDone;
    }
    if (a.rec.desired_state != kDesiredDestroyed || !all_done) {
      ++it;
      continue;
    }
    Status s = store.DeleteAssembly(a.rec.user, a.rec.name);
    if (!s.ok()) {
      ++it;
      continue;
    }
    CrashPoint("destroy-committed");
    for (Comp& c : a.comps) {
      for (auto& [idx, i] : c.instances) by_key.erase(i.ref.Key());
    }
    std::string user = a.rec.user, name = a.rec.name;
    if (options.registry != nullptr) options.registry->RemoveAssembly(user, name);
    actions.push_back([this, user, name] { backend.DestroyAssembly(user, name); });
    it = assemblies.erase(it);
  }
}

void Manager::Impl::RunActions() {
  std::vector<std::function<void()>> now;
  now.swap(actions);
  for (auto& f : now) f();
}

Status Manager::Impl::Load() {
  ASSIGN_OR_RETURN(std::vector<store::AssemblyRecord> records, store.ListAssemblies());
  for (store::AssemblyRecord& rec : records) {
    Asm a;
    a.rec = rec;
    try {
      a.spec_json = json::parse(rec.spec_json);
    } catch (const json::exception& e) {
      return DataLossError("assembly " + rec.user + "/" + rec.name + ": stored spec: " + e.what());
    }
    ASSIGN_OR_RETURN(a.spec, ParseSpec(rec.user, a.spec_json));
    RETURN_IF_ERROR(LoadUpgrade(a));
    std::string key = AsmKey(rec.user, rec.name);
    auto [it, inserted] = assemblies.emplace(key, std::move(a));
    Asm& as = it->second;
    BuildComps(as);
    ASSIGN_OR_RETURN(std::vector<store::InstanceRecord> instances,
                     store.ListInstances(rec.user, rec.name));
    for (store::InstanceRecord& ir : instances) {
      Comp* c = FindComp(as, ir.component);
      if (c == nullptr) {
        Status s = store.DeleteInstance(ir.user, ir.assembly, ir.name);
        (void)s;
        continue;
      }
      Inst& i = NewInstance(as, *c, ir.index);
      dirty.erase({key, i.ref.instance});
      i.rec = ir;
      if (i.rec.version.empty()) i.rec.version = as.spec.version;  // stored before upgrades
      // The restart count survives a server restart; the backoff starts over.
      // A backend that picks the node at launch (Slurm) records none before kStarted.
      const bool has_container = !ir.container_id.empty();
      if (IsTerminal(ir.state)) {
        i.phase = Phase::kDone;
        i.diagnostics = ir.last_exit;
        continue;
      }
      if (!has_container || ir.state == kPending) {
        i.phase = Phase::kWaiting;
        continue;
      }
      i.placement = {ir.node, GpusFromJson(ir.gpus_json), ir.ip};
      Status placed = backend.RestorePlacement(SpecOf(as, i), i.ref, i.placement);
      if (!placed.ok()) {
        // Its place is gone (the node inventory changed): find a new one after it is
        // stopped or found dead.
        i.diagnostics = "its old place is gone: " + placed.message();
      } else {
        i.has_placement = true;
        if (InGang(as, *c)) as.gang_placed = true;
      }
      if (ir.state == kBackoff) {
        i.phase = i.has_placement ? Phase::kBackoff : Phase::kWaiting;
        i.restart_at = clock.Now() + c->options.initial_backoff;
        i.diagnostics = "restarting after it " + ir.last_exit;
        continue;
      }
      i.phase = Phase::kStarting;
      i.recovering = true;
      i.diagnostics = "recovering after a server restart";
      InstanceRef ref = i.ref;
      std::string id = ir.container_id;
      actions.push_back([this, ref, id] {
        auto it2 = by_key.find(ref.Key());
        if (it2 != by_key.end()) {
          backend.Recover(SpecOf(*it2->second.first, *it2->second.second), ref, id);
        }
      });
    }
    AddEvent(as, "", "", "RECOVERED", "loaded from the store after a server start");
  }
  return OkStatus();
}

}  // namespace tarn::service
