#include "runtime/docker_runtime.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/file.h"
#include "common/hmac_sha256.h"
#include "common/proc_stat.h"
#include "common/subprocess.h"
#include "runtime/rotating_log.h"
#include "runtime/work_dir.h"

namespace tarn::runtime {
namespace {

namespace fs = std::filesystem;

// The files of a container in its shim directory (besides the logs the pump writes).
constexpr const char* kNameFile = "container.name";
constexpr const char* kConmonPid = "conmon.pid";
constexpr const char* kEngineLog = "container.log";
constexpr const char* kOffsetFile = "log.offset";
constexpr const char* kEnvFile = "env";
constexpr const char* kStopFile = "stop.requested";  // Stop() was called
constexpr int64_t kPumpChunk = 4 << 20;              // bytes moved per State() call at most

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// The engine's reason for a failure: its last line that says "Error" (podman prints
// warnings first), else its first line.
std::string EngineError(const CommandResult& r) {
  const std::string& text = r.err.empty() ? r.out : r.err;
  size_t at = text.rfind("Error");
  if (at == std::string::npos) return r.FirstErrorLine();
  size_t end = text.find('\n', at);
  return text.substr(at, end == std::string::npos ? text.npos : end - at);
}

bool OnCgroupV2() {
  struct statfs s {};
  return ::statfs("/sys/fs/cgroup", &s) == 0 && s.f_type == 0x63677270;  // CGROUP2_SUPER_MAGIC
}

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? dirs.npos : colon - start);
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return false;
}

// "--ulimit nofile=S:H": the server's own limit, which the container may not exceed (and a
// server without CAP_SYS_RESOURCE could not raise: the engine's defaults would fail).
// A process limit is capped at the kernel's pid_max, above which it means nothing (podman
// caps its own there, and runc may not set the container's above podman's).
std::string Ulimit(const char* name, int resource) {
  rlimit r{};
  ::getrlimit(resource, &r);
  if (resource == RLIMIT_NPROC) {
    const rlim_t pid_max = static_cast<rlim_t>(
        std::atoll(ReadFileToString("/proc/sys/kernel/pid_max", 64).value_or("0").c_str()));
    if (pid_max > 0) {
      r.rlim_cur = std::min(r.rlim_cur, pid_max);
      r.rlim_max = std::min(r.rlim_max, pid_max);
    }
  }
  auto text = [](rlim_t v) { return v == RLIM_INFINITY ? std::string("-1") : std::to_string(v); };
  return std::string(name) + "=" + text(r.rlim_cur) + ":" + text(r.rlim_max);
}

// Whether a CDI spec in `dirs` names NVIDIA GPUs.
bool HasNvidiaCdi(const std::vector<std::string>& dirs) {
  std::error_code ec;
  for (const std::string& dir : dirs) {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      auto text = ReadFileToString(it->path().string(), 1 << 20);
      if (text.ok() && text->find("nvidia.com") != std::string::npos &&
          text->find("gpu") != std::string::npos) {
        return true;
      }
    }
  }
  return false;
}

// conmon's pid, while that process runs conmon (not a reused pid).
pid_t LiveConmon(const std::string& shim_dir) {
  auto text = ReadFileToString(shim_dir + "/" + kConmonPid, 64);
  if (!text.ok()) return 0;
  pid_t pid = static_cast<pid_t>(std::atoi(text->c_str()));
  if (pid <= 0) return 0;
  auto stat = ReadProcStat(pid);
  if (!stat || stat->state == 'Z' || stat->state == 'X' || stat->comm != "conmon") return 0;
  return pid;
}

}  // namespace

StatusOr<std::unique_ptr<DockerRuntime>> DockerRuntime::Create(Options options) {
  std::string engine = options.engine.empty() ? "podman" : options.engine;
  if (engine.find("docker") != std::string::npos) {
    return InvalidArgumentError(
        "container engine \"" + engine +
        "\": tarn runs images through podman (its conmon pid file and file logs are how tarn "
        "watches a container and keeps its output); install podman");
  }
  auto r = RunCommand({engine, "info", "--format", "{{.Version.Version}}"},
                      std::chrono::milliseconds(30000));
  if (!r.ok() || !r->success()) {
    return UnavailableError(
        "DOCKER artifacts need a container engine, and " + engine + " does not answer (" + engine +
        " info: " + (r.ok() ? EngineError(*r) : r.status().message()) +
        "); install podman (scripts/setup does), or give the component a TARBALL artifact or "
        "none");
  }
  std::string oci = options.oci_runtime;
  // crun fails with "cgroups in hybrid mode not supported" where v2 is not the only
  // hierarchy; runc works there.
  if (oci.empty() && !OnCgroupV2() && OnPath("runc")) oci = "runc";
  auto rt = std::unique_ptr<DockerRuntime>(new DockerRuntime(engine, oci, std::move(options)));
  if (::geteuid() == 0) {
    auto cg = DetectRootCgroups();
    if (cg.ok()) rt->cgroups_ = std::move(cg).value();
  }
  return rt;
}

DockerRuntime::DockerRuntime(std::string engine, std::string oci_runtime, Options options)
    : engine_(std::move(engine)),
      oci_runtime_(std::move(oci_runtime)),
      options_(std::move(options)) {}

std::string DockerRuntime::ContainerName(const std::string& id, const std::string& shim_dir) {
  // Engine names: [a-zA-Z0-9][a-zA-Z0-9_.-]*.
  std::string out = "tarn-";
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    out += ok ? c : '-';
  }
  return out + "-" + ToHex(DigestBytes(Sha256(shim_dir))).substr(0, 8);
}

bool DockerRuntime::Holds(const std::string& shim_dir) {
  return ::access((shim_dir + "/" + kNameFile).c_str(), F_OK) == 0;
}

std::vector<std::string> DockerRuntime::Command(std::vector<std::string> args) const {
  std::vector<std::string> a = {engine_};
  if (!oci_runtime_.empty()) a.insert(a.end(), {"--runtime", oci_runtime_});
  if (cgroups_) a.insert(a.end(), {"--cgroup-manager", "cgroupfs"});
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

StatusOr<std::vector<std::string>> DockerRuntime::RunArgs(const ContainerSpec& s,
                                                          const std::string& env_file) const {
  const std::string name = ContainerName(s.id, s.shim_dir);
  std::vector<std::string> a = Command({"run", "--detach", "--init", "--name", name});
  a.insert(a.end(), {"--label", "tarn.id=" + s.id});
  if (auto cid = EnvValue(s, "TARN_CONTAINER_ID"))
    a.insert(a.end(), {"--label", "tarn.container=" + *cid});
  if (!options_.server_label.empty()) {
    a.insert(a.end(), {"--label", "tarn.server=" + options_.server_label});
  }
  a.insert(a.end(),
           {"--network", "host", "--hostname", s.hostname, "--restart", "no", "--pull", "never"});
  a.insert(a.end(), {"--user", std::to_string(s.run_uid) + ":" + std::to_string(s.run_gid)});
  a.insert(a.end(), {"--workdir", s.work_dir});
  a.insert(a.end(), {"--stop-timeout", std::to_string((s.stop_grace_ms + 999) / 1000)});
  a.insert(a.end(), {"--ulimit", Ulimit("nofile", RLIMIT_NOFILE)});
  a.insert(a.end(), {"--ulimit", Ulimit("nproc", RLIMIT_NPROC)});
  a.insert(a.end(), {"--log-driver", "k8s-file", "--log-opt",
                     "path=" + s.shim_dir + "/" + kEngineLog, "--log-opt",
                     "max-size=" + std::to_string(std::max<int64_t>(s.log_max_bytes, 1 << 20))});
  a.insert(a.end(), {"--conmon-pidfile", s.shim_dir + "/" + kConmonPid});
  if (cgroups_) {
    // The limits are on tarn's group, the container's parent: an OOM kill is counted there,
    // where it can be read once the container's own group is gone.
    a.insert(a.end(), {"--cgroup-parent", "/" + s.cgroup});
  } else {
    if (s.limits.memory_mib > 0) {
      std::string m = std::to_string(s.limits.memory_mib) + "m";
      a.insert(a.end(), {"--memory", m, "--memory-swap", m});  // equal: no swap
    }
    if (s.limits.vcores > 0) a.insert(a.end(), {"--cpus", std::to_string(s.limits.vcores)});
    if (s.limits.pids_max > 0) {
      a.insert(a.end(), {"--pids-limit", std::to_string(s.limits.pids_max)});
    }
  }
  if (!s.gpus.empty()) {
    if (HasNvidiaCdi(options_.cdi_dirs)) {
      for (int g : s.gpus) a.insert(a.end(), {"--device", "nvidia.com/gpu=" + std::to_string(g)});
    } else {
      // The assigned GPUs' nodes and the driver's shared ones; NVIDIA_VISIBLE_DEVICES is in
      // the environment for images that use NVIDIA's hook.
      for (int g : s.gpus) {
        const std::string node = options_.dev_dir + "/nvidia" + std::to_string(g);
        if (::access(node.c_str(), F_OK) != 0) {
          return FailedPreconditionError("GPU " + std::to_string(g) + ": no device node " + node +
                                         " (and no CDI spec in /etc/cdi names NVIDIA GPUs)");
        }
        a.insert(a.end(), {"--device", node + ":/dev/nvidia" + std::to_string(g)});
      }
      for (const char* shared : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
        const std::string node = options_.dev_dir + "/" + shared;
        if (::access(node.c_str(), F_OK) == 0) {
          a.insert(a.end(), {"--device", node + ":/dev/" + shared});
        }
      }
    }
  }
  // "path" is mounted at the same place inside; "host:container" where they differ.
  for (const std::string& p : s.bind_paths) {
    a.insert(a.end(), {"--volume", p.find(':') == std::string::npos ? p + ":" + p : p});
  }
  // The resolver files tarn keeps for the assembly, over the ones the engine would write.
  if (!s.resolv_conf.empty()) {
    a.insert(a.end(), {"--volume", s.resolv_conf + ":/etc/resolv.conf:ro"});
  }
  if (!s.hosts_file.empty()) a.insert(a.end(), {"--volume", s.hosts_file + ":/etc/hosts:ro"});
  a.insert(a.end(), {"--env-file", env_file});
  // A value an env file cannot hold (a newline) goes on the command line.
  for (const std::string& e : s.env) {
    if (e.find('\n') != std::string::npos) a.insert(a.end(), {"--env", e});
  }
  a.push_back(s.image);
  a.insert(a.end(), s.argv.begin(), s.argv.end());
  return a;
}

Status DockerRuntime::EnsureImage(const std::string& image) const {
  ASSIGN_OR_RETURN(CommandResult exists,
                   RunCommand({engine_, "image", "exists", image}, options_.command_timeout));
  if (exists.success()) return OkStatus();
  auto pulled = RunCommand({engine_, "pull", "--quiet", image}, options_.pull_timeout);
  if (pulled.ok() && pulled->success()) return OkStatus();
  return UnavailableError("image " + image + " is not present and cannot be pulled: " +
                          (pulled.ok() ? EngineError(*pulled) : pulled.status().message()));
}

StatusOr<ContainerState> DockerRuntime::Start(const ContainerSpec& spec) {
  if (spec.image.empty()) return InvalidArgumentError(spec.id + ": no image to run");
  RETURN_IF_ERROR(MakeDirectories(spec.shim_dir, 0700));
  RETURN_IF_ERROR(MakeDirectories(spec.work_dir, 0750));
  if (::geteuid() == 0 && ::chown(spec.work_dir.c_str(), spec.run_uid, spec.run_gid) != 0) {
    return InternalError(spec.work_dir + ": chown: " + std::strerror(errno));
  }
  for (const char* f : {"exit.json", kConmonPid, kEngineLog, kOffsetFile, kStopFile}) {
    ::unlink((spec.shim_dir + "/" + f).c_str());
  }
  {
    std::lock_guard<std::mutex> lock(pump_mu_);
    pumped_.erase(spec.shim_dir);
  }
  if (std::string why = PrepareWorkDir(spec); !why.empty()) {
    return FailedPreconditionError(spec.id + ": cannot prepare its work dir: " + why);
  }
  // The environment holds the assembly's secret: a root-only file, not the command line.
  std::string env;
  for (const std::string& e : spec.env) {
    if (e.find('\n') == std::string::npos) env += e + "\n";
  }
  const std::string env_file = spec.shim_dir + "/" + kEnvFile;
  RETURN_IF_ERROR(WriteFileAtomically(env_file, env, /*durable=*/false, 0600));
  ASSIGN_OR_RETURN(std::vector<std::string> args, RunArgs(spec, env_file));
  if (cgroups_) {
    if (Status s = cgroups_->Create(spec.cgroup, spec.limits); !s.ok()) {
      return s.WithContext(spec.id + ": its cgroup");
    }
  }
  // Not fsync'ed: these describe a running container, which a machine crash ends anyway;
  // a server crash leaves them in the page cache.
  RETURN_IF_ERROR(WriteFileAtomically(spec.shim_dir + "/spec.json", ToJson(spec).dump(2),
                                      /*durable=*/false));
  // Empty logs from the start: `tarn logs` shows this run's, not the previous one's.
  for (const char* f : {"stdout.log", "stderr.log"}) {
    RETURN_IF_ERROR(WriteFileAtomically(spec.shim_dir + "/" + f, "", false, 0644));
  }
  const std::string name = ContainerName(spec.id, spec.shim_dir);
  RETURN_IF_ERROR(WriteFileAtomically(spec.shim_dir + "/" + kNameFile, name + "\n",
                                      /*durable=*/false));
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(args, options_.command_timeout));
  if (!r.success() && r.err.find("already in use") != std::string::npos) {
    // A container of an earlier start under this name that nothing tracks any more (its
    // directory was cleared): it goes unless it runs, then the start is tried once more.
    auto st = RunCommand({engine_, "inspect", "--format", "{{.State.Status}}", name},
                         options_.command_timeout);
    if (st.ok() && st->success() && Trim(st->out) == "running") {
      return FailedPreconditionError(spec.id + ": container " + name + " already runs");
    }
    (void)RunCommand({engine_, "rm", "--force", name}, options_.command_timeout);
    ASSIGN_OR_RETURN(r, RunCommand(args, options_.command_timeout));
  }
  if (!r.success() && r.err.find("image not known") != std::string::npos) {
    // Not here (asking first would cost every start an engine call): pulled, then run again.
    RETURN_IF_ERROR(EnsureImage(spec.image));
    ASSIGN_OR_RETURN(r, RunCommand(args, options_.command_timeout));
  }
  if (!r.success()) {
    return FailedPreconditionError(spec.id + ": " + engine_ + " run " + spec.image + ": " +
                                   EngineError(r));
  }
  return State(spec.shim_dir);
}

void DockerRuntime::PumpLogs(const std::string& shim_dir) const {
  std::lock_guard<std::mutex> lock(pump_mu_);
  const std::string path = shim_dir + "/" + kEngineLog;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct stat st {};
  std::string data;
  ssize_t n = -1;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return;
  }
  auto it = pumped_.find(shim_dir);
  if (it == pumped_.end()) {
    // After a restart: where the last server stopped ("inode offset").
    std::pair<uint64_t, int64_t> at{st.st_ino, 0};
    auto saved = ReadFileToString(shim_dir + "/" + kOffsetFile, 64);
    unsigned long long ino = 0;
    long long offset = 0;
    if (saved.ok() && std::sscanf(saved->c_str(), "%llu %lld", &ino, &offset) == 2) {
      at = {ino, offset};
    }
    it = pumped_.emplace(shim_dir, at).first;
  }
  auto& [ino, offset] = it->second;
  // conmon starts a new file at its size limit: read that one from its start.
  if (ino != st.st_ino || offset > st.st_size) {
    ino = st.st_ino;
    offset = 0;
  }
  if (offset < st.st_size) {
    data.resize(static_cast<size_t>(std::min<int64_t>(st.st_size - offset, kPumpChunk)));
    n = ::pread(fd, data.data(), data.size(), offset);
  }
  ::close(fd);
  if (n <= 0) return;
  data.resize(static_cast<size_t>(n));
  size_t end = data.rfind('\n');  // whole lines only; the rest comes next time
  if (end == std::string::npos) return;
  std::string out, err;
  // "<time> <stdout|stderr> <F|P> <text>": F ends a line, P is part of a longer one.
  for (size_t start = 0; start <= end;) {
    size_t nl = data.find('\n', start);
    std::string_view line(data.data() + start, nl - start);
    start = nl + 1;
    size_t s1 = line.find(' '), s2 = line.find(' ', s1 + 1), s3 = line.find(' ', s2 + 1);
    if (s1 == line.npos || s2 == line.npos) continue;
    std::string_view stream = line.substr(s1 + 1, s2 - s1 - 1);
    std::string_view tag = s3 == line.npos ? line.substr(s2 + 1) : line.substr(s2 + 1, s3 - s2 - 1);
    std::string_view text = s3 == line.npos ? std::string_view() : line.substr(s3 + 1);
    std::string& to = stream == "stderr" ? err : out;
    to.append(text);
    if (tag != "P") to += '\n';
  }
  auto spec = ReadFileToString(shim_dir + "/spec.json");
  int64_t max_bytes = 10 << 20;
  int keep = 3;
  if (spec.ok()) {
    auto parsed = ContainerSpecFromJson(nlohmann::json::parse(*spec, nullptr, false));
    if (parsed.ok()) {
      max_bytes = parsed->log_max_bytes;
      keep = parsed->log_keep;
    }
  }
  for (auto& [file, text] : {std::pair<const char*, std::string*>{"stdout.log", &out},
                             std::pair<const char*, std::string*>{"stderr.log", &err}}) {
    if (text->empty()) continue;
    auto log = RotatingLog::Open(shim_dir + "/" + file, max_bytes, keep);
    if (log.ok()) (void)log->Append(*text);
  }
  offset += static_cast<int64_t>(end + 1);
  (void)WriteFileAtomically(shim_dir + "/" + kOffsetFile,
                            std::to_string(ino) + " " + std::to_string(offset) + "\n",
                            /*durable=*/false, 0600);
}

StatusOr<ContainerState> DockerRuntime::Ended(const std::string& shim_dir, const std::string& name,
                                              int exit_code) const {
  ContainerState st;
  st.phase = ContainerState::Phase::kExited;
  // Engines report death by signal N as exit code 128 + N.
  if (exit_code > 128 && exit_code < 160) {
    st.exit.signal = exit_code - 128;
  } else {
    st.exit.exit_code = exit_code;
  }
  auto spec_text = ReadFileToString(shim_dir + "/spec.json");
  StatusOr<ContainerSpec> spec =
      spec_text.ok() ? ContainerSpecFromJson(nlohmann::json::parse(*spec_text, nullptr, false))
                     : StatusOr<ContainerSpec>(spec_text.status());
  if (spec.ok()) {
    st.exit.memory_limit_mib = spec->limits.memory_mib;
    if (cgroups_) {
      // The kernel counts an OOM kill in the victim's own group (the engine's, gone by
      // now), not in tarn's parent where the limit is. What tarn's group shows: the usage
      // reached the limit, and the container died by SIGKILL that no stop sent.
      auto stats = cgroups_->Stats(spec->cgroup);
      const bool stopped = ::access((shim_dir + "/" + kStopFile).c_str(), F_OK) == 0;
      if (stats.ok() && (stats->oom_kills > 0 ||
                         (st.exit.signal == SIGKILL && !stopped && stats->memory_limit_bytes > 0 &&
                          stats->memory_peak_bytes >= stats->memory_limit_bytes - (1 << 20)))) {
        st.exit.oom_killed = true;
      }
    }
  }
  if (!st.exit.oom_killed) {
    auto oom = RunCommand({engine_, "inspect", "--format", "{{.State.OOMKilled}}", name},
                          options_.command_timeout);
    st.exit.oom_killed = oom.ok() && oom->success() && Trim(oom->out) == "true";
  }
  st.exit.finished_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  st.exit.diagnostics = DescribeExit(st.exit);
  st.diagnostics = st.exit.diagnostics;
  PumpLogs(shim_dir);  // the last words, before the exit is reported
  RETURN_IF_ERROR(WriteFileAtomically(shim_dir + "/exit.json", ToJson(st.exit).dump()));
  return st;
}

StatusOr<ContainerState> DockerRuntime::State(const std::string& shim_dir) const {
  auto name_text = ReadFileToString(shim_dir + "/" + kNameFile, 4096);
  if (!name_text.ok()) return NotFoundError(shim_dir + ": no container");
  const std::string name = Trim(*name_text);
  ContainerState st;
  ASSIGN_OR_RETURN(std::optional<ExitInfo> exit, ReadExitFile(shim_dir));
  if (exit) {
    st.exit = std::move(*exit);
    st.phase = ContainerState::Phase::kExited;
    st.diagnostics = st.exit.diagnostics;
    return st;
  }
  if (pid_t conmon = LiveConmon(shim_dir)) {
    PumpLogs(shim_dir);
    st.shim_pid = conmon;
    return st;
  }
  // conmon is gone (the container ended), or never wrote its pid: the engine says.
  ASSIGN_OR_RETURN(CommandResult r,
                   RunCommand({engine_, "inspect", "--format",
                               "{{.State.Status}} {{.State.ExitCode}} {{.State.ConmonPid}}", name},
                              options_.command_timeout));
  if (!r.success()) {
    st.phase = ContainerState::Phase::kLost;
    if (::access((shim_dir + "/" + kConmonPid).c_str(), F_OK) != 0) {
      st.diagnostics = engine_ + " never started container " + name;  // shim_pid 0: never ran
    } else {
      st.shim_pid = -1;
      st.diagnostics = engine_ + " no longer knows container " + name + ": " + EngineError(r);
    }
    return st;
  }
  char status[32] = {};
  int code = 0, conmon = 0;
  if (std::sscanf(r.out.c_str(), "%31s %d %d", status, &code, &conmon) < 2) {
    return InternalError(engine_ + " inspect " + name + ": unexpected answer \"" + Trim(r.out) +
                         "\"");
  }
  const std::string s = status;
  if (s == "exited" || s == "stopped") return Ended(shim_dir, name, code);
  if (s == "configured" || s == "created") {
    st.phase = ContainerState::Phase::kLost;
    st.diagnostics = "container " + name + " was created but never started";
    return st;
  }
  st.shim_pid = conmon > 0 ? conmon : -1;  // running, or stopping: look again later
  PumpLogs(shim_dir);
  return st;
}

Status DockerRuntime::Stop(const std::string& shim_dir) {
  auto name = ReadFileToString(shim_dir + "/" + kNameFile, 4096);
  if (!name.ok()) return NotFoundError(shim_dir + ": no container");
  // `stop` waits out the grace period (SIGTERM, then SIGKILL): in the background, so that
  // Stop returns at once.
  RETURN_IF_ERROR(WriteFileAtomically(shim_dir + "/" + kStopFile, "", /*durable=*/false, 0600));
  std::vector<std::string> argv = {engine_, "stop", Trim(*name)};
  std::thread([argv] { (void)RunCommand(argv, std::chrono::minutes(10)); }).detach();
  return OkStatus();
}

StatusOr<ContainerState> DockerRuntime::Wait(const std::string& shim_dir,
                                             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    ASSIGN_OR_RETURN(ContainerState st, State(shim_dir));
    if (st.phase != ContainerState::Phase::kRunning) return st;
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceededError(shim_dir + ": still running after " +
                                   std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status DockerRuntime::Remove(const std::string& shim_dir) {
  auto name_text = ReadFileToString(shim_dir + "/" + kNameFile, 4096);
  if (!name_text.ok()) return NotFoundError(shim_dir + ": no container");
  const std::string name = Trim(*name_text);
  ASSIGN_OR_RETURN(CommandResult r, RunCommand({engine_, "rm", "--force", "--time", "0", name},
                                               options_.command_timeout));
  if (!r.success() && r.err.find("no such container") == std::string::npos &&
      r.err.find("No such container") == std::string::npos) {
    return InternalError(engine_ + " rm " + name + ": " + EngineError(r));
  }
  if (cgroups_) {
    auto spec_text = ReadFileToString(shim_dir + "/spec.json");
    if (spec_text.ok()) {
      auto spec = ContainerSpecFromJson(nlohmann::json::parse(*spec_text, nullptr, false));
      if (spec.ok()) (void)cgroups_->Remove(spec->cgroup);
    }
  }
  {
    std::lock_guard<std::mutex> lock(pump_mu_);
    pumped_.erase(shim_dir);
  }
  return RemoveTree(shim_dir);
}

}  // namespace tarn::runtime
