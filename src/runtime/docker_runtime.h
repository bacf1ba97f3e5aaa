// DockerRuntime: containers of DOCKER artifacts, run from their image by Podman through its
// command line, with what ShimRuntime gives a process: the host's network namespace (the
// instance binds its own TARN_IP), tarn's resolver files over /etc/resolv.conf and
// /etc/hosts, the TARN_* environment (from a root-only --env-file, never the command line),
// the work and shared directories mounted at their own paths, the tenant's account
// (--user), limits (memory without swap, CPUs, pids) on a cgroup tarn owns and names as the
// container's --cgroup-parent, ulimits no higher than the server's own, the assigned GPUs
// only, `--init` as PID 1, and the engine's own restart policy off (tarn's applies).
//
// Everything is kept in the shim directory, as for a process container, so a restarted
// server finds the container again: `container.name` (written before `run`: the container
// is found by that name even when the server died before `run` answered), `conmon.pid`
// (podman's monitor of the container: while it lives the container runs, so watching costs
// a /proc read, not an engine call), `container.log` (conmon's k8s-file log) and `exit.json`
// once it ended (exit code from `inspect`; an OOM kill from the cgroup's oom_kill count, as
// v1 engines do not report it). Logs: each State() call moves what conmon logged since the
// last one into stdout.log / stderr.log (rotated like tarn-shim's), resuming after a
// restart from the position kept in `log.offset`, so `tarn logs [-f]` reads the same files
// as for processes.
//
// An image that is not present is pulled; one that cannot be pulled makes Start fail with
// Unavailable (the caller waits and tries again). Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cgroups.h"
#include "runtime/container_runtime.h"

namespace tarn::runtime {

class DockerRuntime final : public ContainerRuntime {
 public:
  struct Options {
    // The engine's command: "podman" or a path to it. Empty: podman.
    std::string engine;
    // The OCI runtime (podman --runtime): empty picks runc where crun cannot work (cgroup v1
    // or hybrid) and runc is installed, else the engine's default.
    std::string oci_runtime;
    // tarn.server=<label> on every container this server starts (its state directory's
    // hash), so that servers sharing an engine never take each other's containers.
    std::string server_label;
    // Where the GPU device nodes are (tests make fake ones elsewhere), and the CDI spec
    // directories: GPUs go by CDI name (nvidia.com/gpu=N) when a spec names them.
    std::string dev_dir = "/dev";
    std::vector<std::string> cdi_dirs = {"/etc/cdi", "/var/run/cdi"};
    std::chrono::milliseconds command_timeout{60000};
    std::chrono::milliseconds pull_timeout{600000};
  };

  // Fails with a clear message when the engine does not answer (`<engine> info`).
  static StatusOr<std::unique_ptr<DockerRuntime>> Create(Options options);

  const std::string& engine() const { return engine_; }
  const std::string& oci_runtime() const { return oci_runtime_; }

  StatusOr<ContainerState> Start(const ContainerSpec& spec) override;
  StatusOr<ContainerState> State(const std::string& shim_dir) const override;
  Status Stop(const std::string& shim_dir) override;
  StatusOr<ContainerState> Wait(const std::string& shim_dir,
                                std::chrono::milliseconds timeout) override;
  Status Remove(const std::string& shim_dir) override;
  bool RunsImages() const override { return true; }

  // The `run` command line for a spec (exposed for tests): everything but the environment,
  // which goes in `env_file`.
  StatusOr<std::vector<std::string>> RunArgs(const ContainerSpec& spec,
                                             const std::string& env_file) const;
  // The engine's name of the container in `shim_dir`: tarn-<user>-<assembly>-<instance>-<hash
  // of the directory>, unique per server.
  static std::string ContainerName(const std::string& id, const std::string& shim_dir);
  // Whether `shim_dir` holds (or held) a container of this runtime.
  static bool Holds(const std::string& shim_dir);

 private:
  DockerRuntime(std::string engine, std::string oci_runtime, Options options);
  // The engine's command with its global flags, then `args`.
  std::vector<std::string> Command(std::vector<std::string> args) const;
  // Pulls `image` unless present; Unavailable with the engine's words when it cannot.
  Status EnsureImage(const std::string& image) const;
  // Moves what conmon logged since the last call into stdout.log / stderr.log.
  void PumpLogs(const std::string& shim_dir) const;
  // The exit of a container that ended, from `inspect` and its cgroup; recorded in exit.json.
  StatusOr<ContainerState> Ended(const std::string& shim_dir, const std::string& name,
                                 int exit_code) const;

  std::string engine_;
  std::string oci_runtime_;
  Options options_;
  std::unique_ptr<Cgroups> cgroups_;  // null: not root, or no hierarchy: the engine's limits
  mutable std::mutex pump_mu_;        // one pump at a time (the monitor and the workers)
  mutable std::map<std::string, std::pair<uint64_t, int64_t>> pumped_;  // dir -> inode, offset
};

}  // namespace tarn::runtime
