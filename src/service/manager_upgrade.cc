// Upgrades (manager.h, docs/upgrades.md): YARN service upgrade's calls, and the roll that
// carries each component's instances to the target spec, one after another.
//
// Each instance records the spec version it runs (rec.version) and its upgrade state
// (rec.upgrade_state: NEEDS_UPGRADE, UPGRADING, FAILED_UPGRADE). An instance UPGRADING whose
// version is not yet the target waits its turn; one on the target (or stopping for it) is
// down for the upgrade until it is READY. At most max_unavailable of a component are down.
#include <algorithm>

#include "service/manager_impl.h"

namespace tarn::service {
namespace {

using json = nlohmann::json;
using Impl = Manager::Impl;

std::string Version(const std::string& v) { return v.empty() ? "(none)" : v; }

const char* ModeState(Manager::UpgradeMode mode) {
  switch (mode) {
    case Manager::UpgradeMode::kManual:
      return kUpgradeManual;
    case Manager::UpgradeMode::kAutoFinalize:
      return kUpgradeAuto;
    case Manager::UpgradeMode::kExpress:
      return kUpgradeExpress;
  }
  return kUpgradeManual;
}

Impl::Asm* FindUpgradable(Impl& d, const std::string& user, const std::string& name) {
  auto it = d.assemblies.find(Impl::AsmKey(user, name));
  if (it == d.assemblies.end() || it->second.rec.desired_state == kDesiredDestroyed) {
    return nullptr;
  }
  return &it->second;
}

// Down for the upgrade: on the target version (or stopping to get there), not READY yet.
bool Begun(const Impl::Inst& i, const std::string& target) {
  return !i.remove &&
         (i.rec.upgrade_state == kUpgrading || i.rec.upgrade_state == kFailedUpgrade) &&
         (i.upgrade_stop || i.rec.version == target);
}

bool Upgraded(const Impl::Inst& i, const std::string& target) {
  return i.rec.version == target && i.rec.upgrade_state.empty();
}

// Asks for `insts` (UPGRADING), after the checks every way of asking shares.
Status AskUpgrade(Impl& d, Impl::Asm& a, const std::vector<Impl::Inst*>& insts,
                  const std::string& what) {
  Impl::Upgrade& u = *a.upgrade;
  std::vector<std::pair<Impl::Inst*, std::string>> states;
  for (Impl::Inst* i : insts) {
    if (i->rec.upgrade_state != kUpgrading) states.emplace_back(i, kUpgrading);
  }
  store::AssemblyRecord rec = a.rec;
  const bool retry = !u.failed.empty();
  if (retry) {
    // Asking again after a failure: the upgrade rolls on, with fresh deadlines.
    Impl::Upgrade next = u;
    next.failed.clear();
    rec.upgrade_json = d.UpgradeJson(next);
    rec.diagnostics.clear();
  }
  RETURN_IF_ERROR(d.CommitUpgrade(a, rec, states));
  if (retry) {
    u.failed.clear();
    for (Impl::Inst* i : insts) i->upgrade_deadline.reset();
  }
  d.AddEvent(a, "", "", "UPGRADE",
             what + " asked to upgrade to version " + Version(u.to_version) +
                 (retry ? " (again, after the upgrade stopped)" : ""));
  d.Step();
  return OkStatus();
}

Status NotUpgrading(const Impl::Asm& a) {
  return FailedPreconditionError("assembly " + a.rec.name +
                                 " is not upgrading: start an upgrade first (tarn upgrade " +
                                 a.rec.name + " FILE)");
}

// The assembly whose upgrade instances or components are asked for; else why not.
StatusOr<Impl::Asm*> AskableUpgrade(Impl& d, const std::string& user, const std::string& name) {
  Impl::Asm* a = FindUpgradable(d, user, name);
  if (a == nullptr) return AssemblyNotFoundError(name);
  if (!a->upgrade) return NotUpgrading(*a);
  if (a->upgrade->state == kUpgradeCancel) {
    return FailedPreconditionError("assembly " + name + "'s upgrade is being cancelled");
  }
  return a;
}

}  // namespace

const spec::Assembly& Manager::Impl::SpecOf(const Asm& a, const Inst& i) const {
  if (a.upgrade && i.rec.version == a.upgrade->to_version) return a.upgrade->spec;
  return a.spec;
}

const spec::Component& Manager::Impl::CompSpecOf(const Asm& a, const Inst& i) const {
  if (const spec::Component* c = spec::FindComponent(SpecOf(a, i), i.ref.component)) return *c;
  return *spec::FindComponent(a.spec, i.ref.component);  // upgrades keep the components
}

std::string Manager::Impl::UpgradeTarget(const Asm& a) const {
  if (!a.upgrade) return a.spec.version;
  return a.upgrade->state == kUpgradeCancel ? a.upgrade->from_version : a.upgrade->to_version;
}

Status Manager::Impl::RequestPlacements(const Asm& a, const std::vector<InstanceRef>& refs,
                                        bool gang) {
  if (!a.upgrade) return backend.RequestPlacement(a.spec, refs, gang);
  std::vector<InstanceRef> old_spec, new_spec;
  for (const InstanceRef& r : refs) {
    const Inst& i = *by_key.at(r.Key()).second;
    (i.rec.version == a.upgrade->to_version ? new_spec : old_spec).push_back(r);
  }
  if (gang) {
    // A gang placed again mid-upgrade (after a preemption) stays one request: with the
    // resources of the spec most of its members run.
    return backend.RequestPlacement(new_spec.size() >= old_spec.size() ? a.upgrade->spec : a.spec,
                                    refs, true);
  }
  if (!old_spec.empty()) RETURN_IF_ERROR(backend.RequestPlacement(a.spec, old_spec, false));
  if (!new_spec.empty()) return backend.RequestPlacement(a.upgrade->spec, new_spec, false);
  return OkStatus();
}

void Manager::Impl::UpgradeStopped(Asm& a, Inst& i) {
  if (!i.upgrade_stop) return;
  i.upgrade_stop = false;
  i.rec.version = UpgradeTarget(a);
  // Its next start is a first start of the new spec, with that spec's restart policy.
  const spec::Component& cs = CompSpecOf(a, i);
  i.restarts = std::make_unique<InstanceRestarts>(cs.restart_policy, OptionsFor(cs), clock);
  MarkDirty(a, i);
}

void Manager::Impl::BeginUpgrade(Asm& a, Comp& c, Inst& i) {
  const std::string target = UpgradeTarget(a);
  const spec::Assembly& ts = target == a.upgrade->to_version ? a.upgrade->spec : a.spec;
  i.upgrade_deadline =
      clock.Now() + std::chrono::seconds(ts.components[c.spec_index].upgrade_deadline_secs);
  AddEvent(a, i.ref.component, i.ref.instance, "UPGRADING",
           "to version " + Version(target) + " from " + Version(i.rec.version));
  const int64_t delay_ms = CompSpecOf(a, i).upgrade_deregistration_delay_ms;
  if (i.phase == Phase::kRunning && i.ready && delay_ms > 0) {
    // Out of the ready set first, still serving: whoever routes on it (a load balancer
    // reading `ready`, a DNS cache of the component's name) stops sending before the stop.
    i.upgrade_stop = true;
    i.ready = false;
    i.rec.state = kUnready;
    i.unready_until = clock.Now() + std::chrono::milliseconds(delay_ms);
    i.diagnostics = "out of the ready set for " + std::to_string(delay_ms) +
                    " ms before its stop (tarn.upgrade.deregistration_delay_ms)";
    AddEvent(a, i.ref.component, i.ref.instance, "UNREADY", i.diagnostics);
    MarkDirty(a, i);
    return;
  }
  StopForUpgrade(a, i, target);
}

void Manager::Impl::StopForUpgrade(Asm& a, Inst& i, const std::string& target) {
  i.unready_until.reset();
  switch (i.phase) {
    case Phase::kStarting:
    case Phase::kRunning:
    case Phase::kStopping:
      i.upgrade_stop = true;
      AskStop(a, i, "upgrading to version " + Version(target));  // nothing more if stopping
      break;
    case Phase::kDone:
      i.upgrade_stop = true;
      UpgradeStopped(a, i);
      if (i.rec.state != kSucceeded) {
        Requeue(a, i);
        break;
      }
      // SUCCEEDED: it has nothing left to run, on either spec.
      i.rec.upgrade_state.clear();
      i.upgrade_deadline.reset();
      AddEvent(a, i.ref.component, i.ref.instance, "UPGRADED",
               "runs version " + Version(target) + " (it had finished its work)");
      break;
    default:
      // Not started (or waiting to restart): its place was found for the old spec's resources.
      ReleasePlace(i);
      i.upgrade_stop = true;
      UpgradeStopped(a, i);
      i.phase = Phase::kWaiting;
      i.rec.state = kPending;
      break;
  }
  MarkDirty(a, i);
}

void Manager::Impl::FailUpgrade(Asm& a, Inst& i, const std::string& why) {
  Upgrade& u = *a.upgrade;
  i.rec.upgrade_state = kFailedUpgrade;
  MarkDirty(a, i);
  u.failed = i.ref.instance + " " + why;
  a.rec.upgrade_json = UpgradeJson(u);
  a.rec.diagnostics = "the upgrade to version " + Version(UpgradeTarget(a)) +
                      " stopped: " + u.failed + "; cancel it (tarn upgrade " + a.rec.name +
                      " --cancel) or ask for the instance again";
  dirty_assemblies.insert(AsmKey(a.rec.user, a.rec.name));
  AddEvent(a, i.ref.component, i.ref.instance, "UPGRADE_FAILED", a.rec.diagnostics);
}

void Manager::Impl::RollUpgrade(Asm& a) {
  if (!a.upgrade || a.rec.desired_state != kDesiredStarted || a.rec.state == kFailed ||
      a.rec.state == kSucceeded) {
    return;
  }
  Upgrade& u = *a.upgrade;
  const std::string target = UpgradeTarget(a);
  const spec::Assembly& ts = target == u.to_version ? u.spec : a.spec;
  const Clock::TimePoint now = clock.Now();
  std::set<std::string> done;  // components whose every instance runs the target
  for (Comp& c : a.comps) {
    bool all = true;
    for (auto& [idx, i] : c.instances) {
      if (i.remove) continue;
      if (i.unready_until && (now >= *i.unready_until || i.phase != Phase::kRunning)) {
        StopForUpgrade(a, i, target);  // its time out of the ready set is over, or it exited
      }
      if (i.upgrade_stop && i.phase == Phase::kDone && i.rec.state == kStopped) {
        UpgradeStopped(a, i);  // stopped, but its exit was never reported
        Requeue(a, i);
      }
      if (Begun(i, target)) {
        if (!i.upgrade_deadline) {
          i.upgrade_deadline =
              now + std::chrono::seconds(ts.components[c.spec_index].upgrade_deadline_secs);
        }
        const bool ready = (i.phase == Phase::kRunning && i.ready) ||
                           (i.phase == Phase::kDone && i.rec.state == kSucceeded);
        if (!i.upgrade_stop && i.rec.upgrade_state == kUpgrading && ready) {
          i.rec.upgrade_state.clear();
          i.upgrade_deadline.reset();
          MarkDirty(a, i);
          AddEvent(a, i.ref.component, i.ref.instance, "UPGRADED",
                   "runs version " + Version(target) +
                       (i.phase == Phase::kRunning ? " and is READY" : ""));
        } else if (i.rec.upgrade_state == kUpgrading && u.failed.empty() &&
                   now >= *i.upgrade_deadline) {
          FailUpgrade(a, i,
                      "was not READY within " +
                          std::to_string(ts.components[c.spec_index].upgrade_deadline_secs) +
                          " s of its upgrade (tarn.upgrade.progress_deadline_secs)");
        }
      }
      all &= Upgraded(i, target);
    }
    if (all) done.insert(CompSpec(a, c).name);
  }
  if (u.failed.empty()) {
    for (Comp& c : a.comps) {
      const spec::Component& tc = ts.components[c.spec_index];
      if (u.state == kUpgradeExpress &&
          std::any_of(tc.dependencies.begin(), tc.dependencies.end(),
                      [&](const std::string& dep) { return done.count(dep) == 0; })) {
        continue;  // express: components in dependency order
      }
      int64_t down = 0;
      for (auto& [idx, i] : c.instances) down += Begun(i, target) ? 1 : 0;
      for (auto& [idx, i] : c.instances) {
        if (down >= tc.upgrade_max_unavailable) break;
        if (i.remove || i.rec.upgrade_state != kUpgrading || Begun(i, target)) continue;
        BeginUpgrade(a, c, i);
        ++down;
      }
    }
  }
  if (done.size() == a.comps.size() && u.state != kUpgradeManual) {
    Status s = FinishUpgrade(a, /*cancelled=*/u.state == kUpgradeCancel);
    if (!s.ok()) {
      AddEvent(a, "", "", "UPGRADE",
               "cannot store the end of the upgrade (tried again): " + s.message());
    }
  }
}

Status Manager::Impl::CommitUpgrade(Asm& a, store::AssemblyRecord rec,
                                    const std::vector<std::pair<Inst*, std::string>>& states) {
  RETURN_IF_ERROR(store.Transaction([&]() -> Status {
    RETURN_IF_ERROR(store.UpdateAssembly(rec));
    for (const auto& [i, state] : states) {
      store::InstanceRecord ir = i->rec;
      ir.upgrade_state = state;
      RETURN_IF_ERROR(store.PutInstance(ir));
    }
    return OkStatus();
  }));
  ++rec.generation;
  a.rec = std::move(rec);
  for (const auto& [i, state] : states) i->rec.upgrade_state = state;
  return OkStatus();
}

Status Manager::Impl::FinishUpgrade(Asm& a, bool cancelled) {
  Upgrade& u = *a.upgrade;
  store::AssemblyRecord rec = a.rec;
  rec.upgrade_json.clear();
  if (!cancelled) rec.spec_json = u.spec_json.dump();
  if (rec.diagnostics.rfind("the upgrade", 0) == 0) rec.diagnostics.clear();
  std::vector<std::pair<Inst*, std::string>> states;
  for (Comp& c : a.comps) {
    for (auto& [idx, i] : c.instances) {
      if (!i.rec.upgrade_state.empty()) states.emplace_back(&i, "");
    }
  }
  RETURN_IF_ERROR(CommitUpgrade(a, rec, states));
  const std::string from = u.from_version, to = u.to_version;
  if (!cancelled) {
    a.spec = std::move(u.spec);
    a.spec_json = std::move(u.spec_json);
    for (Comp& c : a.comps) {
      const spec::Component& cs = CompSpec(a, c);
      c.options = OptionsFor(cs);
      c.failures = std::make_unique<ComponentFailures>(c.options, clock);
      if (!cs.autoscale) {
        c.autoscaler.reset();
      } else if (!c.autoscaler || c.autoscaler->spec() != *cs.autoscale) {
        c.autoscaler = std::make_unique<Autoscaler>(*cs.autoscale, clock);
      }
    }
  }
  a.upgrade.reset();
  AddEvent(a, "", "", cancelled ? "UPGRADE_CANCELLED" : "UPGRADE_FINALIZED",
           cancelled
               ? "every instance runs version " + Version(from) + " again"
               : "version " + Version(to) + " is the assembly's spec (was " + Version(from) + ")");
  return OkStatus();
}

std::string Manager::Impl::UpgradeJson(const Upgrade& u) const {
  return json{{"state", u.state},
              {"from_version", u.from_version},
              {"to_version", u.to_version},
              {"spec", u.spec_json},
              {"failed", u.failed}}
      .dump();
}

Status Manager::Impl::LoadUpgrade(Asm& a) {
  if (a.rec.upgrade_json.empty()) return OkStatus();
  const std::string where = "assembly " + a.rec.user + "/" + a.rec.name + ": stored upgrade: ";
  try {
    json j = json::parse(a.rec.upgrade_json);
    Upgrade u;
    u.state = j.at("state").get<std::string>();
    u.from_version = j.at("from_version").get<std::string>();
    u.to_version = j.at("to_version").get<std::string>();
    u.failed = j.value("failed", "");
    u.spec_json = j.at("spec");
    StatusOr<spec::Assembly> parsed = ParseSpec(a.rec.user, u.spec_json);
    if (!parsed.ok()) return DataLossError(where + parsed.status().message());
    u.spec = std::move(*parsed);
    a.upgrade = std::move(u);
  } catch (const json::exception& e) {
    return DataLossError(where + e.what());
  }
  return OkStatus();
}

std::optional<Clock::TimePoint> Manager::Impl::NextUpgradeDeadline(const Asm& a) const {
  if (!a.upgrade || !a.upgrade->failed.empty()) return std::nullopt;
  std::optional<Clock::TimePoint> next;
  for (const Comp& c : a.comps) {
    for (const auto& [idx, i] : c.instances) {
      if (i.upgrade_deadline && i.rec.upgrade_state == kUpgrading &&
          (!next || *i.upgrade_deadline < *next)) {
        next = i.upgrade_deadline;
      }
    }
  }
  return next;
}

// ---- Manager's calls ----

Status Manager::InitiateUpgrade(const std::string& user, const spec::Assembly& assembly,
                                const std::string& spec_json, UpgradeMode mode) {
  Impl& d = *impl_;
  Impl::Asm* found = FindUpgradable(d, user, assembly.name);
  if (found == nullptr) return AssemblyNotFoundError(assembly.name);
  Impl::Asm& a = *found;
  const std::string& name = a.rec.name;
  if (a.upgrade) {
    return FailedPreconditionError("assembly " + name + " is already upgrading to version " +
                                   Version(a.upgrade->to_version) + " (" + a.upgrade->state +
                                   "); finalize it (tarn upgrade " + name +
                                   " --finalize) or cancel it (--cancel) first");
  }
  if (a.rec.desired_state != kDesiredStarted || a.rec.state == kFailed ||
      a.rec.state == kSucceeded) {
    return FailedPreconditionError("assembly " + name + " is " + a.rec.state +
                                   ": only a running assembly is upgraded (start it first: tarn "
                                   "start " +
                                   name + ")");
  }
  if (assembly.version.empty()) {
    return InvalidArgumentError("version: an upgrade names the spec's new version (" + name +
                                " runs version " + Version(a.spec.version) + ")");
  }
  if (assembly.version == a.spec.version) {
    return InvalidArgumentError("version: " + name + " already runs version " + assembly.version +
                                "; give the new spec a new version");
  }
  auto names = [](const spec::Assembly& s) {
    std::string out;
    for (const spec::Component& c : s.components) out += (out.empty() ? "" : ", ") + c.name;
    return out;
  };
  if (names(assembly) != names(a.spec)) {
    return InvalidArgumentError("components: an upgrade keeps the components, in their order (" +
                                names(a.spec) + "); this spec has (" + names(assembly) +
                                "): launch a new assembly to change them");
  }
  if (assembly.queue != a.spec.queue || assembly.priority != a.spec.priority ||
      assembly.gang != a.spec.gang) {
    return InvalidArgumentError(
        "an upgrade keeps the assembly's queue, tarn.priority and tarn.gang; this spec changes "
        "them: launch a new assembly to change them");
  }
  spec::Assembly target = assembly;
  json target_json;
  try {
    target_json = json::parse(spec_json);
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("assembly JSON: ") + e.what());
  }
  for (size_t k = 0; k < target.components.size(); ++k) {
    spec::Component& tc = target.components[k];
    const spec::Component& oc = a.spec.components[k];
    if (tc.tf_role != oc.tf_role) {
      return InvalidArgumentError(
          "components[" + std::to_string(k) +
          "].configuration.properties[\"tarn.tf.role\"]: an upgrade "
          "keeps each component's role (" +
          oc.name + " is " +
          (oc.tf_role == spec::TfRole::kNone ? "none" : spec::TfRoleName(oc.tf_role)) + ")");
    }
    // The running count stays (flex changes it).
    tc.number_of_containers = oc.number_of_containers;
    if (tc.autoscale && (tc.number_of_containers < tc.autoscale->min ||
                         tc.number_of_containers > tc.autoscale->max)) {
      return InvalidArgumentError(
          "components[" + std::to_string(k) + "]: tarn.autoscale.min..max (" +
          std::to_string(tc.autoscale->min) + ".." + std::to_string(tc.autoscale->max) +
          ") leaves out the " + std::to_string(oc.number_of_containers) + " replicas " + oc.name +
          " runs");
    }
  }
  for (json& comp : target_json["components"]) {
    if (const spec::Component* oc = spec::FindComponent(a.spec, comp.value("name", ""))) {
      comp["number_of_containers"] = oc->number_of_containers;
    }
  }
  target.lifetime_seconds = a.spec.lifetime_seconds;  // the running lifetime stays too
  if (a.spec_json.contains("lifetime")) {
    target_json["lifetime"] = a.spec_json["lifetime"];
  } else {
    target_json.erase("lifetime");
  }
  target.desired_state = spec::DesiredState::kStarted;
  target_json.erase("state");

  Impl::Upgrade u{ModeState(mode),   a.spec.version,         assembly.version,
                  std::move(target), std::move(target_json), ""};
  store::AssemblyRecord rec = a.rec;
  rec.upgrade_json = d.UpgradeJson(u);
  const char* first = mode == UpgradeMode::kExpress ? kUpgrading : kNeedsUpgrade;
  std::vector<std::pair<Impl::Inst*, std::string>> states;
  for (Impl::Comp& c : a.comps) {
    for (auto& [idx, i] : c.instances) {
      if (!i.remove) states.emplace_back(&i, first);
    }
  }
  RETURN_IF_ERROR(d.CommitUpgrade(a, rec, states));
  a.upgrade = std::move(u);
  d.AddEvent(a, "", "", "UPGRADE",
             "to version " + Version(a.upgrade->to_version) + " from " +
                 Version(a.upgrade->from_version) + " (" + a.upgrade->state + ") by " + user);
  d.Step();
  return OkStatus();
}

Status Manager::UpgradeInstances(const std::string& user, const std::string& name,
                                 const std::vector<std::string>& instances) {
  Impl& d = *impl_;
  StatusOr<Impl::Asm*> askable = AskableUpgrade(d, user, name);
  if (!askable.ok()) return askable.status();
  Impl::Asm* a = *askable;
  if (instances.empty()) return InvalidArgumentError("instances: name at least one instance");
  std::vector<Impl::Inst*> insts;
  std::string what;
  for (const std::string& n : instances) {
    auto bk = d.by_key.find(Impl::AsmKey(user, name) + "/" + n);
    if (bk == d.by_key.end() || bk->second.second->remove) {
      return NotFoundError("assembly " + name + " has no instance " + n);
    }
    Impl::Inst& i = *bk->second.second;
    if (Upgraded(i, a->upgrade->to_version)) {
      return FailedPreconditionError("instance " + n + " already runs version " +
                                     Version(a->upgrade->to_version));
    }
    insts.push_back(&i);
    what += (what.empty() ? "" : ", ") + n;
  }
  return AskUpgrade(d, *a, insts, what);
}

Status Manager::UpgradeComponents(const std::string& user, const std::string& name,
                                  const std::vector<std::string>& components) {
  Impl& d = *impl_;
  StatusOr<Impl::Asm*> askable = AskableUpgrade(d, user, name);
  if (!askable.ok()) return askable.status();
  Impl::Asm* a = *askable;
  if (components.empty()) return InvalidArgumentError("components: name at least one component");
  std::vector<Impl::Inst*> insts;
  std::string what;
  for (const std::string& comp : components) {
    Impl::Comp* c = d.FindComp(*a, comp);
    if (c == nullptr) return NotFoundError("assembly " + name + " has no component " + comp);
    size_t before = insts.size();
    for (auto& [idx, i] : c->instances) {
      if (!i.remove && !Upgraded(i, a->upgrade->to_version)) insts.push_back(&i);
    }
    if (insts.size() == before) {
      return FailedPreconditionError("component " + comp + " already runs version " +
                                     Version(a->upgrade->to_version));
    }
    what += (what.empty() ? "component " : ", ") + comp;
  }
  return AskUpgrade(d, *a, insts, what);
}

Status Manager::FinalizeUpgrade(const std::string& user, const std::string& name) {
  Impl& d = *impl_;
  Impl::Asm* a = FindUpgradable(d, user, name);
  if (a == nullptr) return AssemblyNotFoundError(name);
  if (!a->upgrade) return NotUpgrading(*a);
  if (a->upgrade->state == kUpgradeCancel) {
    return FailedPreconditionError("assembly " + name +
                                   "'s upgrade is being cancelled: there is nothing to finalize");
  }
  std::string left;
  int n = 0;
  for (Impl::Comp& c : a->comps) {
    for (auto& [idx, i] : c.instances) {
      if (i.remove || Upgraded(i, a->upgrade->to_version)) continue;
      if (n++ < 5) {
        left += (left.empty() ? "" : ", ") + i.ref.instance + " " +
                (i.rec.upgrade_state.empty() ? std::string(kUpgrading) : i.rec.upgrade_state);
      }
    }
  }
  if (n > 0) {
    return FailedPreconditionError(
        "assembly " + name + " cannot be finalized: " + std::to_string(n) +
        " instance(s) do not run version " + Version(a->upgrade->to_version) + " yet (" + left +
        (n > 5 ? ", ..." : "") + "); upgrade them (tarn upgrade " + name +
        " --instances ... or --components ...) or cancel (--cancel)");
  }
  RETURN_IF_ERROR(d.FinishUpgrade(*a, /*cancelled=*/false));
  d.Step();
  return OkStatus();
}

Status Manager::CancelUpgrade(const std::string& user, const std::string& name) {
  Impl& d = *impl_;
  Impl::Asm* a = FindUpgradable(d, user, name);
  if (a == nullptr) return AssemblyNotFoundError(name);
  if (!a->upgrade) return NotUpgrading(*a);
  if (a->upgrade->state == kUpgradeCancel) return OkStatus();
  Impl::Upgrade next = *a->upgrade;
  next.state = kUpgradeCancel;
  next.failed.clear();
  store::AssemblyRecord rec = a->rec;
  rec.upgrade_json = d.UpgradeJson(next);
  if (rec.diagnostics.rfind("the upgrade", 0) == 0) rec.diagnostics.clear();
  // What runs (or is on its way to) the new version goes back; the rest was never touched.
  std::vector<std::pair<Impl::Inst*, std::string>> states;
  for (Impl::Comp& c : a->comps) {
    for (auto& [idx, i] : c.instances) {
      if (i.remove) continue;
      const bool touched = i.rec.version == next.to_version || i.upgrade_stop;
      if (touched) {
        states.emplace_back(&i, kUpgrading);
      } else if (!i.rec.upgrade_state.empty()) {
        states.emplace_back(&i, "");
      }
    }
  }
  RETURN_IF_ERROR(d.CommitUpgrade(*a, rec, states));
  a->upgrade->state = kUpgradeCancel;
  a->upgrade->failed.clear();
  for (Impl::Comp& c : a->comps) {
    for (auto& [idx, i] : c.instances) i.upgrade_deadline.reset();
  }
  d.AddEvent(*a, "", "", "UPGRADE_CANCEL",
             "by " + user + ": the instances upgraded to version " +
                 Version(a->upgrade->to_version) + " go back to version " +
                 Version(a->upgrade->from_version));
  d.Step();
  return OkStatus();
}

}  // namespace tarn::service
