// LocalBackend (local_backend.h), the container work its queue runs: each instance's shim
// directory, its start (shim or container engine), stop, recovery, probe and cleanup; the name
// files; the logs of the run before.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <variant>

#include "backend/local_backend.h"
#include "backend/work_queues.h"
#include "common/file.h"
#include "service/readiness_probe.h"

namespace tarn::backend {

using runtime::ContainerState;
using service::BackendEvent;
using service::InstanceRef;

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
    spec::ReadinessCheck substituted =
        SubstituteCheck(check, assembly, *component, ref.index, container_id, ContextFor(ref.user));
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

}  // namespace tarn::backend
