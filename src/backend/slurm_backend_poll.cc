// SlurmBackend (slurm_backend.h), the poller: what squeue and sinfo say of the tracked jobs
// and gang steps, turned into the service's waiting, started and exited events.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "backend/slurm_backend.h"
#include "backend/work_queues.h"
#include "common/file.h"

namespace tarn::backend {

using service::BackendEvent;
using service::InstanceRef;

namespace {

// squeue passes that must miss a job before it counts as lost (a job just submitted may not
// be listed by the very next pass on a busy controller).
constexpr int kMissesBeforeLost = 3;
constexpr auto kNodesMaxAge = std::chrono::seconds(5);

}  // namespace

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

}  // namespace tarn::backend
