#include "service/manager.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "common/crash_point.h"
#include "common/number.h"
#include "spec/parser.h"
#include "spec/substitution.h"

namespace tarn::service {
namespace {

using json = nlohmann::json;

// Instance states as stored and shown. BACKOFF and STARTING are stored only: they tell a
// restarted server that an exit was already counted, or that a launch was committed.
constexpr char kPending[] = "PENDING";
constexpr char kStarting[] = "STARTING";
constexpr char kUnready[] = "RUNNING_BUT_UNREADY";
constexpr char kReady[] = "READY";
constexpr char kBackoff[] = "BACKOFF";
constexpr char kStopped[] = "STOPPED";
constexpr char kSucceeded[] = "SUCCEEDED";
constexpr char kFailed[] = "FAILED";

// desired_state values in the store.
constexpr char kDesiredStarted[] = "STARTED";
constexpr char kDesiredStopped[] = "STOPPED";
constexpr char kDesiredDestroyed[] = "DESTROYED";

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

struct Manager::Impl {
  enum class Phase {
    kWaiting,    // needs a placement (its dependencies permitting)
    kRequested,  // placement asked for
    kPlaced,     // has a place; launches once its dependencies are READY
    kStarting,   // launch (or recovery) asked for
    kRunning,
    kBackoff,   // exited; restarts at restart_at, keeping its place
    kStopping,  // stop asked for
    kDone,      // STOPPED, SUCCEEDED or FAILED (rec.state)
  };

  struct Inst {
    InstanceRef ref;
    store::InstanceRecord rec;
    Phase phase = Phase::kWaiting;
    Placement placement;
    bool has_placement = false;
    bool ready = false;
    bool recovering = false;  // waiting for Recover()'s answer
    bool remove = false;      // flexed away: forget once stopped
    std::string ip;
    std::string diagnostics;
    std::unique_ptr<InstanceRestarts> restarts;
    Clock::TimePoint restart_at{};
    Clock::TimePoint next_probe{};
    Clock::TimePoint stop_deadline{};
    bool probe_in_flight = false;
    std::optional<registry::InstanceRecords> published;  // what the registry has of it
  };

  struct Comp {
    size_t spec_index = 0;
    RestartOptions options;
    std::unique_ptr<ComponentFailures> failures;
    std::map<int64_t, Inst> instances;  // by index
    bool failed = false;
    std::string diagnostics;
  };

  struct Asm {
    store::AssemblyRecord rec;
    spec::Assembly spec;
    json spec_json;
    std::vector<Comp> comps;
    std::deque<Event> events;
    uint64_t last_event = 0;                // the serial of its newest event; 0: none
    int priority = 0;                       // as its queue sees it (tarn.priority, capped)
    bool gang_placed = false;               // the gang got its place since the last (re)start
    std::optional<std::string> hosts_sent;  // the names last given to backend.NamesChanged
  };

  Options options;
  const Clock& clock;
  store::Store& store;
  Backend& backend;
  std::map<std::string, Asm> assemblies;  // "<user>/<name>"
  std::unordered_map<std::string, std::pair<Asm*, Inst*>> by_key;
  std::set<std::pair<std::string, std::string>> dirty;  // instances to write: (asm key, name)
  std::set<std::string> dirty_assemblies;
  std::vector<std::function<void()>> actions;  // backend calls, made after the store write
  uint64_t event_serial = 0;                   // of the newest event of any assembly
  uint64_t names_generation = ~uint64_t{0};    // the registry's, when names were last sent

  explicit Impl(Options o)
      : options(std::move(o)),
        clock(*options.clock),
        store(*options.store),
        backend(*options.backend) {}

  static std::string AsmKey(const std::string& user, const std::string& name) {
    return user + "/" + name;
  }

  const spec::Component& CompSpec(const Asm& a, const Comp& c) const {
    return a.spec.components[c.spec_index];
  }

  void AddEvent(Asm& a, const std::string& component, const std::string& instance,
                const std::string& type, const std::string& message) {
    a.events.push_back({clock.WallMillis(), component, instance, type, message});
    a.last_event = ++event_serial;
    while (a.events.size() > options.events_per_assembly) a.events.pop_front();
  }

  void MarkDirty(Asm& a, const Inst& i) {
    dirty.insert({AsmKey(a.rec.user, a.rec.name), i.ref.instance});
  }

  StatusOr<spec::Assembly> ParseSpec(const std::string& user, const json& spec_json) const {
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

  void BuildComps(Asm& a) {
    const std::string queue = a.spec.queue.empty() ? "default" : a.spec.queue;
    for (const scheduler::QueueUsage& q : backend.Queues()) {
      if (q.config.name != queue) continue;
      a.priority = q.config.PriorityFor(a.spec.priority);
    }
    a.comps.clear();
    for (size_t k = 0; k < a.spec.components.size(); ++k) {
      Comp c;
      c.spec_index = k;
      RestartOptions defaults = options.restart;
      RestartOptions from =
          RestartOptions::FromProperties(a.spec.components[k].configuration.properties);
      c.options = from;
      // Defaults the server's configuration changed and the component did not.
      const RestartOptions builtin;
      if (from.initial_backoff == builtin.initial_backoff)
        c.options.initial_backoff = defaults.initial_backoff;
      if (from.max_backoff == builtin.max_backoff) c.options.max_backoff = defaults.max_backoff;
      if (from.healthy_reset == builtin.healthy_reset)
        c.options.healthy_reset = defaults.healthy_reset;
      c.failures = std::make_unique<ComponentFailures>(c.options, clock);
      a.comps.push_back(std::move(c));
    }
  }

  Inst& NewInstance(Asm& a, Comp& c, int64_t index) {
    const spec::Component& cs = CompSpec(a, c);
    Inst inst;
    inst.ref = {a.rec.user, a.rec.name, cs.name, spec::InstanceName(cs.name, index), index};
    inst.rec.user = a.rec.user;
    inst.rec.assembly = a.rec.name;
    inst.rec.name = inst.ref.instance;
    inst.rec.component = cs.name;
    inst.rec.index = index;
    inst.rec.state = kPending;
    inst.restarts = std::make_unique<InstanceRestarts>(cs.restart_policy, c.options, clock);
    auto [it, inserted] = c.instances.emplace(index, std::move(inst));
    by_key[it->second.ref.Key()] = {&a, &it->second};
    MarkDirty(a, it->second);
    return it->second;
  }

  Comp* FindComp(Asm& a, const std::string& name) {
    for (Comp& c : a.comps) {
      if (CompSpec(a, c).name == name) return &c;
    }
    return nullptr;
  }

  // ---- Transitions ----

  void ReleasePlace(Inst& i) {
    if (i.has_placement || i.phase == Phase::kRequested) backend.ReleasePlacement(i.ref.Key());
    i.has_placement = false;
    i.placement = {};
  }

  void Finish(Asm& a, Inst& i, const char* state, const std::string& why) {
    ReleasePlace(i);
    i.phase = Phase::kDone;
    i.ready = false;
    i.rec.state = state;
    i.diagnostics = why;
    MarkDirty(a, i);
  }

  void AskStop(Asm& a, Inst& i, const std::string& why) {
    switch (i.phase) {
      case Phase::kStarting:
      case Phase::kRunning: {
        i.phase = Phase::kStopping;
        i.diagnostics = "stopping: " + why;
        i.stop_deadline = clock.Now() + options.stop_timeout;
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

  void FailAssembly(Asm& a, const std::string& why) {
    if (a.rec.state == kFailed) return;
    a.rec.state = kFailed;
    a.rec.diagnostics = why;
    dirty_assemblies.insert(AsmKey(a.rec.user, a.rec.name));
    AddEvent(a, "", "", "FAILED", why);
    for (Comp& c : a.comps) {
      for (auto& [idx, i] : c.instances) AskStop(a, i, "the assembly failed");
    }
  }

  // An instance's run ended (not by our stop): restart it, or leave it finished.
  void OnExit(Asm& a, Comp& c, Inst& i, const runtime::ExitInfo& exit) {
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
  std::string AddressOf(const Inst& i) const {
    if (i.has_placement && !i.placement.ip.empty()) return i.placement.ip;
    return i.phase == Phase::kRunning || i.phase == Phase::kStopping ? i.ip : "";
  }

  void Launch(Asm& a, Inst& i) {
    i.rec.container_id = NextContainerId(i.ref, i.rec.container_id);
    i.rec.node = i.placement.node;
    i.rec.gpus_json = GpusJson(i.placement.gpus);
    i.rec.ip = i.placement.ip;
    i.rec.state = kStarting;
    i.rec.launched_ms = clock.WallMillis();
    i.phase = Phase::kStarting;
    i.ready = false;
    i.probe_in_flight = false;
    i.diagnostics = "starting" + OnNode(i.placement.node);
    MarkDirty(a, i);
    AddEvent(a, i.ref.component, i.ref.instance, "LAUNCH",
             i.rec.container_id + OnNode(i.placement.node));
    std::string user = a.rec.user, name = a.rec.name;
    InstanceRef ref = i.ref;
    Placement placement = i.placement;
    std::string id = i.rec.container_id;
    actions.push_back([this, user, name, ref, placement, id] {
      CrashPoint("launch-committed");
      auto it = assemblies.find(AsmKey(user, name));
      if (it == assemblies.end()) return;
      backend.Launch(it->second.spec, ref, placement, id);
    });
  }

  // ---- Level-triggered reconciliation of one assembly ----

  bool ComponentReady(const Asm& a, const std::string& name) const {
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

  std::string WaitingFor(const Asm& a, const Comp& c) const {
    std::string names;
    for (const std::string& d : CompSpec(a, c).dependencies) {
      if (ComponentReady(a, d)) continue;
      if (!names.empty()) names += ", ";
      names += d;
    }
    return names;
  }

  bool InGang(const Asm& a, const Comp& c) const {
    return a.spec.gang && CompSpec(a, c).tf_role != spec::TfRole::kNone;
  }

  void Reconcile(Asm& a) {
    const bool run = a.rec.desired_state == kDesiredStarted && a.rec.state != kFailed &&
                     a.rec.state != kSucceeded;
    if (!run) {
      for (Comp& c : a.comps) {
        for (auto& [idx, i] : c.instances) {
          AskStop(a, i,
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

    // Placement requests: the gang together the first time, everything else one by one
    // once its dependencies are READY.
    std::vector<InstanceRef> gang;
    for (Comp& c : a.comps) {
      if (!InGang(a, c) || a.gang_placed) continue;
      for (auto& [idx, i] : c.instances) {
        if (i.phase == Phase::kWaiting && !i.remove) gang.push_back(i.ref);
      }
    }
    if (!gang.empty()) {
      Status s = backend.RequestPlacement(a.spec, gang, /*gang=*/true);
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
        Status s = backend.RequestPlacement(a.spec, singles, /*gang=*/false);
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
  void ForgetRemoved(Asm& a) {
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
  void UpdateStates(Asm& a) {
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
    if (a.rec.state != before) {
      dirty_assemblies.insert(AsmKey(a.rec.user, a.rec.name));
      if (a.rec.state != kFailed && a.rec.state != kSucceeded) {
        AddEvent(a, "", "", "STATE", before + " -> " + a.rec.state);
      }
    }
  }

  // ---- The step every entry point ends with ----

  void Step() {
    Clock::TimePoint now = clock.Now();
    int64_t wall = clock.WallMillis();
    std::vector<std::string> expired;
    for (auto& [key, a] : assemblies) {
      if (a.rec.lifetime_deadline_ms > 0 && wall >= a.rec.lifetime_deadline_ms &&
          a.rec.desired_state != kDesiredDestroyed) {
        expired.push_back(key);
      }
      for (Comp& c : a.comps) {
        const spec::Component& cs = CompSpec(a, c);
        for (auto& [idx, i] : c.instances) {
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
            std::string akey = key;
            actions.push_back([this, akey, ref, id, check] {
              auto it = assemblies.find(akey);
              if (it != assemblies.end()) backend.Probe(it->second.spec, ref, id, check);
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
  void PublishNames() {
    if (options.registry == nullptr) return;
    for (auto& [key, a] : assemblies) {
      for (Comp& c : a.comps) {
        const spec::Component& cs = CompSpec(a, c);
        for (auto& [idx, i] : c.instances) {
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
  bool PlacePass() {
    bool requested = false;
    for (auto& [key, pair] : by_key) requested |= pair.second->phase == Phase::kRequested;
    if (!requested) return false;
    bool any = false;
    {
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
        AddEvent(
            *it->second.first, i.ref.component, i.ref.instance, "PLACED",
            (ps.placement.node.empty() ? "by the backend, which picks the node at launch"
                                       : "on " + ps.placement.node) +
                (ps.placement.gpus.empty() ? "" : " with GPUs " + GpusJson(ps.placement.gpus)));
      }
    }
    return any;
  }

  void Flush() {
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

  void FinishDestroys() {
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

  void RunActions() {
    std::vector<std::function<void()>> now;
    now.swap(actions);
    for (auto& f : now) f();
  }

  // ---- Loading ----

  Status Load() {
    ASSIGN_OR_RETURN(std::vector<store::AssemblyRecord> records, store.ListAssemblies());
    for (store::AssemblyRecord& rec : records) {
      Asm a;
      a.rec = rec;
      try {
        a.spec_json = json::parse(rec.spec_json);
      } catch (const json::exception& e) {
        return DataLossError("assembly " + rec.user + "/" + rec.name +
                             ": stored spec: " + e.what());
      }
      ASSIGN_OR_RETURN(a.spec, ParseSpec(rec.user, a.spec_json));
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
        Status placed = backend.RestorePlacement(as.spec, i.ref, i.placement);
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
        actions.push_back([this, key, ref, id] {
          auto it2 = assemblies.find(key);
          if (it2 != assemblies.end()) backend.Recover(it2->second.spec, ref, id);
        });
      }
      AddEvent(as, "", "", "RECOVERED", "loaded from the store after a server start");
    }
    return OkStatus();
  }
};

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
  // A finished assembly starts nothing: a new count stored now would say what never runs.
  // (A STOPPED one takes it: its next start starts that many.)
  if (a->rec.state == kFailed || a->rec.state == kSucceeded) {
    return FailedPreconditionError("assembly " + name + " is " + a->rec.state +
                                   ": flexing it would start nothing; start it again first "
                                   "(tarn start " +
                                   name + "), then flex");
  }
  spec::Component& cs = a->spec.components[c->spec_index];
  int64_t before = cs.number_of_containers;
  if (before == count) return before;
  json spec_json = a->spec_json;
  bool found = false;
  for (json& comp : spec_json["components"]) {
    if (comp.value("name", "") == component) {
      comp["number_of_containers"] = count;
      found = true;
    }
  }
  if (!found) return InternalError("component " + component + " missing from the stored spec");
  store::AssemblyRecord rec = a->rec;
  rec.spec_json = spec_json.dump();
  RETURN_IF_ERROR(d.store.UpdateAssembly(rec));
  ++rec.generation;
  CrashPoint("flex-committed");
  a->rec = rec;
  a->spec_json = std::move(spec_json);
  cs.number_of_containers = count;
  d.AddEvent(*a, component, "", "FLEX",
             "from " + std::to_string(before) + " to " + std::to_string(count));
  d.Step();
  return before;
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
  const spec::Component& cs = d.CompSpec(a, *c);
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
        i.rec.last_exit =
            e.exit.diagnostics.empty() ? runtime::DescribeExit(e.exit) : e.exit.diagnostics;
        d.AddEvent(a, i.ref.component, i.ref.instance, "STOPPED", i.rec.last_exit);
        d.Finish(a, i, kStopped, "stopped");
        if (!i.remove && a.rec.desired_state == kDesiredStarted && a.rec.state != kFailed) {
          // Stopped for a flex that was undone meanwhile: it runs again.
          i.phase = Impl::Phase::kWaiting;
          i.rec.state = kPending;
        }
        break;
      }
      if (i.phase != Impl::Phase::kRunning && i.phase != Impl::Phase::kStarting) break;
      if (i.phase == Impl::Phase::kStarting) i.restarts->Started();
      i.recovering = false;
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
    for (const Impl::Comp& c : a.comps) {
      const spec::Component& cs = d.CompSpec(a, c);
      bool probes = cs.readiness_check && cs.readiness_check->type != spec::ReadinessType::kDefault;
      for (const auto& [idx, i] : c.instances) {
        if (i.phase == Impl::Phase::kBackoff) consider(i.restart_at);
        if (i.phase == Impl::Phase::kStopping) consider(i.stop_deadline);
        if (i.phase == Impl::Phase::kRunning && probes && !i.probe_in_flight)
          consider(i.next_probe);
      }
    }
  }
  return next;
}

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
    for (const auto& [idx, i] : c.instances) {
      InstanceStatus iv = ViewInstance(d, a, cs, i);
      if (!i.remove) {
        ++live;
        if (iv.state == kReady) ++cv.ready;
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
                                    i.diagnostics.rfind("can never be placed", 0) != 0)) {
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
      if (ps.phase == PlacementStatus::Phase::kInfeasible) {
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

Backend& Manager::backend() const { return impl_->backend; }

bool Manager::Busy() const {
  for (const auto& [key, pair] : impl_->by_key) {
    auto phase = pair.second->phase;
    if (phase == Impl::Phase::kStarting || phase == Impl::Phase::kStopping) return true;
  }
  return false;
}

}  // namespace tarn::service
