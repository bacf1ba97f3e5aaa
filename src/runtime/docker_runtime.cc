#include "runtime/docker_runtime.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/file.h"
#include "common/subprocess.h"

namespace tarn::runtime {
namespace {

// Docker names: [a-zA-Z0-9][a-zA-Z0-9_.-]+; "alice/fmnist/worker-0" ->
// "tarn-alice-fmnist-worker-0".
std::string ContainerName(const std::string& id) {
  std::string out = "tarn-";
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    out += ok ? c : '-';
  }
  return out;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<DockerRuntime>> DockerRuntime::Create(Options options) {
  std::vector<std::string> candidates = options.engine.empty()
                                            ? std::vector<std::string>{"docker", "podman"}
                                            : std::vector<std::string>{options.engine};
  std::string why;
  for (const std::string& engine : candidates) {
    auto r = RunCommand({engine, "info", "--format", "{{.ServerVersion}}"},
                        std::chrono::milliseconds(15000));
    if (r.ok() && r->success()) {
      return std::unique_ptr<DockerRuntime>(new DockerRuntime(engine, options));
    }
    why += (why.empty() ? "" : "; ") + engine +
           " info: " + (r.ok() ? r->FirstErrorLine() : r.status().message());
  }
  return UnavailableError("DOCKER artifacts need a container engine, and none answers (" + why +
                          "). Install and start Docker or Podman, or give the component a "
                          "TARBALL artifact or none");
}

DockerRuntime::DockerRuntime(std::string engine, Options options)
    : engine_(std::move(engine)), options_(std::move(options)) {}

std::vector<std::string> DockerRuntime::RunArgs(const std::string& engine, const ContainerSpec& s) {
  std::vector<std::string> a = {
      engine,       "run",      "--detach", "--init",          "--name",    ContainerName(s.id),
      "--hostname", s.hostname, "--label",  "tarn.id=" + s.id, "--network", "host"};
  a.insert(a.end(), {"--user", std::to_string(s.run_uid) + ":" + std::to_string(s.run_gid)});
  a.insert(a.end(), {"--workdir", s.work_dir});
  a.insert(a.end(), {"--stop-timeout", std::to_string((s.stop_grace_ms + 999) / 1000)});
  if (s.limits.memory_mib > 0) {
    std::string m = std::to_string(s.limits.memory_mib) + "m";
    a.insert(a.end(), {"--memory", m, "--memory-swap", m});  // equal: no swap
  }
  if (s.limits.vcores > 0) a.insert(a.end(), {"--cpus", std::to_string(s.limits.vcores)});
  if (s.limits.pids_max > 0) {
    a.insert(a.end(), {"--pids-limit", std::to_string(s.limits.pids_max)});
  }
  if (!s.gpus.empty()) {
    // The quotes are part of the value: docker reads --gpus as CSV, and "device=0,1" needs
    // them to keep both indices in one field.
    std::string list;
    for (size_t i = 0; i < s.gpus.size(); ++i) list += (i ? "," : "") + std::to_string(s.gpus[i]);
    a.insert(a.end(), {"--gpus", "\"device=" + list + "\""});
  }
  // "path" is mounted at the same place inside; "host:container" where they differ.
  for (const std::string& p : s.bind_paths) {
    a.insert(a.end(), {"--volume", p.find(':') == std::string::npos ? p + ":" + p : p});
  }
  // The resolver files tarn keeps for the assembly, over the ones Docker would copy in.
  if (!s.resolv_conf.empty()) {
    a.insert(a.end(), {"--volume", s.resolv_conf + ":/etc/resolv.conf:ro"});
  }
  if (!s.hosts_file.empty()) a.insert(a.end(), {"--volume", s.hosts_file + ":/etc/hosts:ro"});
  for (const std::string& e : s.env) a.insert(a.end(), {"--env", e});
  a.push_back(s.image);
  a.insert(a.end(), s.argv.begin(), s.argv.end());
  return a;
}

StatusOr<std::string> DockerRuntime::ContainerId(const std::string& shim_dir) const {
  auto id = ReadFileToString(shim_dir + "/docker.id", 4096);
  if (!id.ok()) return NotFoundError(shim_dir + ": no container");
  return Trim(*id);
}

StatusOr<ContainerState> DockerRuntime::Start(const ContainerSpec& spec) {
  if (spec.image.empty()) return InvalidArgumentError(spec.id + ": no image to run");
  RETURN_IF_ERROR(MakeDirectories(spec.shim_dir, 0700));
  RETURN_IF_ERROR(MakeDirectories(spec.work_dir, 0750));
  if (::geteuid() == 0) ::chown(spec.work_dir.c_str(), spec.run_uid, spec.run_gid);
  RETURN_IF_ERROR(WriteFileAtomically(spec.shim_dir + "/spec.json", ToJson(spec).dump(2)));
  ASSIGN_OR_RETURN(CommandResult r, RunCommand(RunArgs(engine_, spec), options_.command_timeout));
  if (!r.success()) {
    return FailedPreconditionError(spec.id + ": " + engine_ + " run " + spec.image +
                                   " failed: " + r.FirstErrorLine());
  }
  std::string id = Trim(r.out);
  size_t nl = id.rfind('\n');  // a pull prints progress first; the id is the last line
  if (nl != std::string::npos) id = id.substr(nl + 1);
  RETURN_IF_ERROR(WriteFileAtomically(spec.shim_dir + "/docker.id", id + "\n"));
  return State(spec.shim_dir);
}

StatusOr<ContainerState> DockerRuntime::State(const std::string& shim_dir) const {
  ASSIGN_OR_RETURN(std::string id, ContainerId(shim_dir));
  ASSIGN_OR_RETURN(CommandResult r,
                   RunCommand({engine_, "inspect", "--format",
                               "{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}", id},
                              options_.command_timeout));
  ContainerState st;
  if (!r.success()) {
    st.phase = ContainerState::Phase::kLost;
    st.diagnostics = engine_ + " no longer knows container " + id + ": " + r.FirstErrorLine();
    return st;
  }
  char status[32] = {}, oom[8] = {};
  int code = 0;
  if (std::sscanf(r.out.c_str(), "%31s %d %7s", status, &code, oom) != 3) {
    return InternalError(engine_ + " inspect: unexpected answer \"" + Trim(r.out) + "\"");
  }
  std::string s = status;
  if (s == "running" || s == "created" || s == "restarting" || s == "paused") return st;
  st.phase = ContainerState::Phase::kExited;
  // Engines report death by signal N as exit code 128 + N.
  if (code > 128 && code < 160) {
    st.exit.signal = code - 128;
  } else {
    st.exit.exit_code = code;
  }
  st.exit.oom_killed = std::string(oom) == "true";
  auto spec_text = ReadFileToString(shim_dir + "/spec.json");
  if (spec_text.ok()) {
    try {
      st.exit.memory_limit_mib =
          nlohmann::json::parse(*spec_text).at("limits").at("memory_mib").get<int64_t>();
    } catch (const nlohmann::json::exception&) {
    }
  }
  st.exit.diagnostics = DescribeExit(st.exit);
  st.diagnostics = st.exit.diagnostics;
  return st;
}

Status DockerRuntime::Stop(const std::string& shim_dir) {
  ASSIGN_OR_RETURN(std::string id, ContainerId(shim_dir));
  // `docker stop` waits for the grace period; run it detached so Stop returns at once.
  pid_t pid = ::fork();
  if (pid < 0) return InternalError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (::fork() == 0) {
      ::setsid();
      auto r = RunCommand({engine_, "stop", id}, std::chrono::minutes(10));
      ::_exit(r.ok() && r->success() ? 0 : 1);
    }
    ::_exit(0);
  }
  ::waitpid(pid, nullptr, 0);
  return OkStatus();
}

StatusOr<ContainerState> DockerRuntime::Wait(const std::string& shim_dir,
                                             std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(std::string id, ContainerId(shim_dir));
  auto r = RunCommand({engine_, "wait", id}, timeout);
  if (!r.ok() && r.status().code() == StatusCode::kDeadlineExceeded) return r.status();
  return State(shim_dir);
}

Status DockerRuntime::Remove(const std::string& shim_dir) {
  ASSIGN_OR_RETURN(std::string id, ContainerId(shim_dir));
  ASSIGN_OR_RETURN(CommandResult r,
                   RunCommand({engine_, "rm", "--force", id}, options_.command_timeout));
  if (!r.success() && r.FirstErrorLine().find("No such") == std::string::npos) {
    return InternalError(engine_ + " rm " + id + ": " + r.FirstErrorLine());
  }
  for (const char* f : {"docker.id", "spec.json"}) ::unlink((shim_dir + "/" + f).c_str());
  ::rmdir(shim_dir.c_str());
  return OkStatus();
}

}  // namespace tarn::runtime
