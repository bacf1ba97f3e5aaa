// What the runtime needs to start one container, and what it reports about it. Plain values
// shared by the runtime (in tarn server) and tarn-shim, which reads the spec from a JSON file
// the runtime writes. Thread-compatible.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/cgroups.h"

namespace tarn::runtime {

// A file written into the work dir before the workload starts (config files), as the run
// user, so a workload cannot redirect the write with a planted symlink.
struct WorkFile {
  std::string path;  // relative to the work dir, e.g. "conf/index.html"; no ".."
  std::string content;
  friend bool operator==(const WorkFile&, const WorkFile&) = default;
};

struct ContainerSpec {
  std::string id;                 // "alice/fmnist/worker-0": names the cgroup and the logs
  std::string shim_dir;           // root-owned: spec, pid file, exit status, logs
  std::string work_dir;           // the instance's working directory (owned by run_uid)
  std::string hostname;           // UTS name inside the container
  std::vector<std::string> argv;  // e.g. {"/bin/sh", "-c", "sleep 60"}
  std::vector<std::string> env;   // "NAME=value"
  uid_t run_uid = 65534;
  gid_t run_gid = 65534;
  // Namespaces (PID, mount, UTS, IPC) and a cgroup. false: a plain process group (tarn not
  // running as root), which the runtime reports as a warning.
  bool isolate = true;
  // Without root: namespaces through a user namespace that maps only the caller's own uid
  // and gid (as rootless containers do); no cgroup limits. Set by the runtime.
  bool user_namespace = false;
  std::string cgroup;  // relative cgroup name, e.g. "tarn/alice/fmnist/worker-0"
  CgroupLimits limits;
  int64_t log_max_bytes = 10 << 20;  // per file, then rotated
  int log_keep = 3;                  // rotated files kept besides the current one
  int64_t stop_grace_ms = 10000;     // SIGTERM, then SIGKILL after this long
  // DOCKER artifacts only (DockerRuntime): the image, the host paths bind-mounted at the
  // same place inside (the work dir, the shared dir) or "host:container", and the GPU
  // indices for --gpus.
  std::string image;
  std::vector<std::string> bind_paths;
  std::vector<int> gpus;
  std::vector<WorkFile> files;
  // A TARBALL artifact (local path): unpacked into <work_dir>/lib at the first start.
  std::string tarball;
  // Name resolution inside the container: host files bind-mounted read-only over
  // /etc/resolv.conf and /etc/hosts in the container's own mount namespace (so only with
  // `isolate` or `user_namespace`); "" leaves the machine's file. The hosts file is
  // rewritten in place by tarn as names change, so the mount keeps seeing it.
  std::string resolv_conf;
  std::string hosts_file;
};

// How a container ended, as the shim recorded it in exit.json.
struct ExitInfo {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal killed it
  bool oom_killed = false;
  int64_t memory_limit_mib = 0;
  int64_t finished_at_ms = 0;
  std::string diagnostics;  // "exited with code 3", "killed: exceeded its 256 MiB memory limit"
  // A failed run's last line of stderr (Kubernetes' termination message from the log), set
  // by the backend that reports the exit; "" when it succeeded or wrote nothing there.
  std::string last_stderr;
};

// The value `spec.env` gives `name` ("NAME=value"); nullopt when it does not set it.
std::optional<std::string> EnvValue(const ContainerSpec& spec, std::string_view name);

// The exit recorded in <shim_dir>/exit.json: nullopt while there is none; DataLoss when it
// cannot be parsed.
StatusOr<std::optional<ExitInfo>> ReadExitFile(const std::string& shim_dir);

nlohmann::json ToJson(const ContainerSpec& spec);
StatusOr<ContainerSpec> ContainerSpecFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const ExitInfo& info);
StatusOr<ExitInfo> ExitInfoFromJson(const nlohmann::json& j);

// "exited with code 3", "killed by signal 15 (SIGTERM)", "killed: exceeded its 256 MiB
// memory limit".
std::string DescribeExit(const ExitInfo& info);

// The last non-empty line of the log file `path` (from its last 4 KiB; at most 200
// characters, control characters as '?'), for a failed run's ExitInfo::last_stderr. "" when
// there is none or the file cannot be read; a link at `path` is not followed (a Slurm job
// writes its log in its tenant's directory).
std::string LastLogLine(const std::string& path);

// Writes `content` to `path` through a temporary file and rename: readers see the old file
// or the new one, never half of one. With `durable`, the data is fsync'ed before the rename
// so that it also survives a machine crash. The file gets exactly `mode`. Safe in a
// directory another account may write (a Slurm job's, owned by its tenant): the temporary
// file is created anew (O_EXCL, O_NOFOLLOW), so a link planted at its name is refused, never
// followed.
Status WriteFileAtomically(const std::string& path, const std::string& content,
                           bool durable = true, mode_t mode = 0644);

}  // namespace tarn::runtime
