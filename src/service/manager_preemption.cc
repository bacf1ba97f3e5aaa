// Stops in gang order, and preemption as the manager carries it out (docs/scheduling.md,
// "Preemption"). The scheduler decides who yields (scheduler/preemption.cc); the manager
// stops them with their grace period, the chief and workers before the ps, releases their
// places as they exit, and queues them again as a whole.
#include <algorithm>
#include <cctype>
#include <map>

#include "service/manager_impl.h"

namespace tarn::service {
namespace {

std::string GraceText(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + "s";
}

// "checkpoint at step N" in a program's last stderr line (tarn-train prints it when a stop
// made it checkpoint): the step it resumes from. Like Kubernetes' termination message.
std::optional<int64_t> StepFromLastWords(const std::string& line) {
  static const std::string kMark = "checkpoint at step ";
  size_t at = line.rfind(kMark);
  if (at == std::string::npos) return std::nullopt;
  at += kMark.size();
  size_t end = at;
  while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
  if (end == at || end - at > 18) return std::nullopt;
  return std::stoll(line.substr(at, end - at));
}

}  // namespace

Duration Manager::Impl::GraceOf(const Asm& a, const Inst& i) const {
  return std::chrono::seconds(CompSpecOf(a, i).stop_grace_secs);  // of the spec it runs
}

bool Manager::Impl::TrainersAlive(const Asm& a) const {
  for (const Comp& c : a.comps) {
    const spec::TfRole role = CompSpec(a, c).tf_role;
    if (!InGang(a, c) || (role != spec::TfRole::kChief && role != spec::TfRole::kWorker)) {
      continue;
    }
    for (const auto& [idx, i] : c.instances) {
      if (i.phase == Phase::kStarting || i.phase == Phase::kRunning ||
          i.phase == Phase::kStopping) {
        return true;
      }
    }
  }
  return false;
}

void Manager::Impl::AskStopInOrder(Asm& a, Inst& i, const std::string& why) {
  Comp* c = FindComp(a, i.ref.component);
  const bool ps = c != nullptr && InGang(a, *c) && CompSpec(a, *c).tf_role == spec::TfRole::kPs;
  const bool live = i.phase == Phase::kStarting || i.phase == Phase::kRunning;
  if (!ps || !live || !TrainersAlive(a)) {
    i.stop_after.clear();
    AskStop(a, i, why);
    return;
  }
  if (!i.stop_after.empty()) return;  // already deferred
  i.stop_after = why;
  i.stop_after_deadline = clock.Now() + GraceOf(a, i);
  i.diagnostics = "stopping once the chief and workers have exited: " + why;
  AddEvent(
      a, i.ref.component, i.ref.instance, "STOP",
      why + "; after the chief and workers have exited (at most " + GraceText(GraceOf(a, i)) + ")");
}

void Manager::Impl::StopDeferred(Asm& a) {
  const Clock::TimePoint now = clock.Now();
  const bool trainers = TrainersAlive(a);
  for (Comp& c : a.comps) {
    for (auto& [idx, i] : c.instances) {
      if (i.stop_after.empty()) continue;
      if (i.phase != Phase::kStarting && i.phase != Phase::kRunning) {
        i.stop_after.clear();  // it ended meanwhile
        continue;
      }
      if (trainers && now < i.stop_after_deadline) continue;
      std::string why = std::move(i.stop_after);
      i.stop_after.clear();
      AskStop(a, i, trainers ? why + " (the chief and workers had not exited in time)" : why);
    }
  }
}

void Manager::Impl::Requeue(Asm& a, Inst& i) {
  UpgradeStopped(a, i);  // stopped for its upgrade: it starts again on the target version
  if (i.remove || a.rec.desired_state != kDesiredStarted || a.rec.state == kFailed) {
    i.preempted.clear();
    return;
  }
  i.phase = Phase::kWaiting;
  i.rec.state = kPending;
  if (!i.preempted.empty()) {
    std::optional<int64_t> step = StepFromLastWords(i.rec.last_exit);
    if (step) {
      // The chief's checkpoint on the way out: the whole gang resumes there.
      for (Comp& c : a.comps) {
        for (auto& [idx, other] : c.instances) {
          if (!other.preempted.empty()) other.resume_step = *step;
        }
      }
    }
    for (Comp& c : a.comps) {
      for (auto& [idx, other] : c.instances) {
        if (!other.preempted.empty()) Preempted(other);
      }
    }
  }
  MarkDirty(a, i);
}

void Manager::Impl::Preempted(Inst& i) {
  i.preempted = "preempted by " + i.preempted_by + "; " +
                (i.resume_step ? "resumes from step " + std::to_string(*i.resume_step)
                               : std::string("starts again"));
  i.preempted += " when there is room";
  if (i.phase == Phase::kWaiting) i.diagnostics = i.preempted;
}

void Manager::Impl::PreemptedByBackend(Asm& a, Inst& i, const runtime::ExitInfo& exit) {
  const std::string how = exit.diagnostics.empty() ? runtime::DescribeExit(exit) : exit.diagnostics;
  i.rec.last_exit = how;
  if (!exit.last_stderr.empty()) i.rec.last_exit += "; its last stderr line: " + exit.last_stderr;
  if (options.counters != nullptr) {
    if (!a.preempted) ++options.counters->preemptions;
    ++options.counters->preempted_instances;
  }
  a.preempted = true;
  Comp* c = FindComp(a, i.ref.component);
  if (c != nullptr && InGang(a, *c)) a.gang_placed = false;  // placed again as a whole
  AddEvent(a, i.ref.component, i.ref.instance, "PREEMPTED",
           "by the cluster's scheduler: " + i.rec.last_exit);
  i.preempted_by = "the cluster's scheduler (" + how + ")";
  std::optional<Checkpoint> cp = LastCheckpoint(a);  // unless its last words say otherwise
  i.resume_step = cp && cp->step >= 0 ? std::optional<int64_t>(cp->step) : std::nullopt;
  Preempted(i);
  Finish(a, i, kStopped, "preempted");
  Requeue(a, i);
}

void Manager::Impl::Resumed(Asm& a, const Inst& i) {
  a.preempted = false;
  std::string how = "placed again after its preemption";
  if (i.resume_step) how += "; resumes from step " + std::to_string(*i.resume_step);
  std::optional<Checkpoint> cp = LastCheckpoint(a);  // what its last run reported last
  if (cp && cp->reached_step >= 0) {
    const int64_t n = std::max<int64_t>(0, cp->reached_step - i.resume_step.value_or(0));
    if (options.counters != nullptr) options.counters->steps_redone += static_cast<uint64_t>(n);
    how += "; it had reached step " + std::to_string(cp->reached_step) + ": " + std::to_string(n) +
           " steps redone";
  }
  AddEvent(a, "", "", "RESUMED", how);
}

std::optional<Checkpoint> Manager::Impl::LastCheckpoint(const Asm& a) const {
  // The chief writes the checkpoints (a chief component's, or worker 0 when there is none:
  // TF's rule); any of the training tasks may say the cluster's step it saw last.
  if (!options.last_checkpoint) return std::nullopt;
  std::optional<Checkpoint> best;
  for (const Comp& c : a.comps) {
    const spec::TfRole role = CompSpec(a, c).tf_role;
    if (role != spec::TfRole::kChief && role != spec::TfRole::kWorker) continue;
    for (const auto& [idx, i] : c.instances) {
      std::optional<Checkpoint> cp = options.last_checkpoint(i.ref.Key());
      if (!cp) continue;
      if (!best) {
        best = cp;
        continue;
      }
      if (cp->step > best->step) {
        best->step = cp->step;
        best->wall_ms = cp->wall_ms;
      }
      best->reached_step = std::max(best->reached_step, cp->reached_step);
    }
  }
  return best;
}

void Manager::Impl::NoteCheckpoints() {
  if (!options.last_checkpoint) return;
  const Clock::TimePoint now = clock.Now();
  const int64_t wall = clock.WallMillis();
  for (auto& [key, a] : assemblies) {
    for (Comp& c : a.comps) {
      if (CompSpec(a, c).tf_role == spec::TfRole::kNone) continue;
      for (auto& [idx, i] : c.instances) {
        if (i.phase != Phase::kRunning) continue;
        std::optional<Checkpoint> cp = options.last_checkpoint(i.ref.Key());
        // Written during this run (an older one's checkpoint saved nothing of it).
        if (!cp || cp->step < 0 || cp->wall_ms < i.rec.launched_ms) continue;
        backend.NoteCheckpoint(
            i.ref.Key(), now - std::chrono::milliseconds(std::max<int64_t>(0, wall - cp->wall_ms)));
      }
    }
  }
}

bool Manager::Impl::ActOnPreemptions() {
  bool released = false;
  const int64_t wall = clock.WallMillis();
  for (const scheduler::Preemption& p : backend.TakePreemptions()) {
    std::string by = p.preemptor;
    Asm* winner = nullptr;
    if (!p.preemptor_ids.empty()) {
      auto w = by_key.find(p.preemptor_ids.front());
      if (w != by_key.end()) winner = w->second.first;
    }
    if (winner != nullptr) by = AsmKey(winner->rec.user, winner->rec.name);
    by += " (priority " + std::to_string(p.priority) + ")";
    // The victims by assembly, in their order.
    std::map<Asm*, std::vector<Inst*>> victims;
    for (const std::string& id : p.victims) {
      auto v = by_key.find(id);
      if (v != by_key.end()) victims[v->second.first].push_back(v->second.second);
    }
    if (options.counters != nullptr) ++options.counters->preemptions;
    for (auto& [va, insts] : victims) {
      Asm& a = *va;
      a.preempted = true;
      std::optional<Checkpoint> cp = LastCheckpoint(a);
      if (cp && cp->step < 0) cp.reset();  // it reported no checkpoint
      std::string names;
      for (Inst* i : insts) names += (names.empty() ? "" : ", ") + i->ref.instance;
      const std::string whom = AsmKey(a.rec.user, a.rec.name);
      AddEvent(a, "", "", "PREEMPTED",
               "by " + by + ": " + p.reason + "; stopping " + names +
                   (cp ? "; its last checkpoint was at step " + std::to_string(cp->step)
                       : "; no checkpoint reported"));
      if (winner != nullptr && winner != &a) {
        AddEvent(*winner, "", "", "PREEMPTING",
                 "stopping " + whom + "'s " + names + " (priority " + std::to_string(a.priority) +
                     ") to make room");
      }
      for (Inst* i : insts) {
        Comp* c = FindComp(a, i->ref.component);
        if (c != nullptr && InGang(a, *c)) a.gang_placed = false;  // placed again as a whole
        if (options.counters != nullptr) {
          ++options.counters->preempted_instances;
          const int64_t since = std::max(cp ? cp->wall_ms : 0, i->rec.launched_ms);
          if (i->phase == Phase::kRunning && since > 0 && wall > since) {
            options.counters->gpu_milliseconds_at_risk +=
                static_cast<uint64_t>(wall - since) * i->placement.gpus.size();
          }
        }
        i->preempted_by = by;
        i->resume_step = cp ? std::optional<int64_t>(cp->step) : std::nullopt;
        Preempted(*i);
        AskStopInOrder(a, *i, "preempted by " + by);
        if (i->phase == Phase::kDone) {  // it had not started: its place is free already
          Requeue(a, *i);
          released = true;
        }
      }
    }
  }
  return released;
}

}  // namespace tarn::service
