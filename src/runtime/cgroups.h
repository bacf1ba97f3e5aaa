// Cgroups: creating, limiting, measuring and emptying the control group of one container,
// on cgroup v1 (one hierarchy per controller) or v2 (one unified hierarchy).
//
// Groups are named by a relative path ("tarn/alice/fmnist/worker-0") under a base: by
// default the cgroup tarn itself runs in, per controller on v1, so that a tarn started inside
// a delegated or limited group stays inside it. The file system root is a parameter, so the
// v2 code is tested against a fake tree on machines that run v1. Thread-compatible: callers
// serialise use of one group.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::runtime {

struct CgroupLimits {
  int64_t memory_mib = 0;  // 0: no limit; swap is not allowed beyond it
  int64_t vcores = 0;      // 0: no limit; else CPU weight and a quota of this many CPUs
  int64_t pids_max = 0;    // 0: no limit
  // When set, the group may open only the usual character devices plus these NVIDIA GPUs
  // (device minors); v1's devices controller (v2 would need an eBPF program: not done).
  bool restrict_devices = false;
  std::vector<int> gpu_minors;
};

struct CgroupStats {
  int64_t oom_kills = 0;  // processes the kernel killed for the group's memory limit
  int64_t memory_limit_bytes = 0;
  int64_t memory_peak_bytes = 0;  // v1 max_usage_in_bytes, v2 memory.peak where present
};

class Cgroups {
 public:
  virtual ~Cgroups() = default;
  virtual std::string Describe() const = 0;  // e.g. "cgroup v1 (memory, cpu, pids, devices)"
  virtual Status Create(const std::string& name, const CgroupLimits& limits) = 0;
  virtual Status AddProcess(const std::string& name, pid_t pid) = 0;
  virtual StatusOr<std::vector<pid_t>> Processes(const std::string& name) const = 0;
  virtual StatusOr<CgroupStats> Stats(const std::string& name) const = 0;
  // SIGKILLs every process of the group until it is empty (bounded retries).
  virtual Status KillAll(const std::string& name) = 0;
  // Removes an empty group (and nothing else). Missing is not an error.
  virtual Status Remove(const std::string& name) = 0;
  virtual bool Exists(const std::string& name) const = 0;
};

// cgroup v1: `bases` maps each controller (memory, cpu, pids, devices) to the directory under
// which groups are created, e.g. {"memory": "/sys/fs/cgroup/memory/process_api/x"}.
std::unique_ptr<Cgroups> MakeCgroupsV1(std::map<std::string, std::string> bases);
// cgroup v2: groups are created under `base`; controllers are enabled down the path.
std::unique_ptr<Cgroups> MakeCgroupsV2(std::string base);

// Picks v2 when `mount_root` is a unified hierarchy (it has cgroup.controllers), else v1
// with the controllers mounted under it; bases come from `self_cgroup` (/proc/self/cgroup).
StatusOr<std::unique_ptr<Cgroups>> DetectCgroups(
    const std::string& mount_root = "/sys/fs/cgroup",
    const std::string& self_cgroup = "/proc/self/cgroup");

// Groups at the hierarchies' roots ("tarn/x" is /sys/fs/cgroup/memory/tarn/x on v1), one path
// for every controller: what an engine's --cgroup-parent names.
StatusOr<std::unique_ptr<Cgroups>> DetectRootCgroups(
    const std::string& mount_root = "/sys/fs/cgroup");

// runc's conversion of v1 cpu.shares (2..262144) to v2 cpu.weight (1..10000).
int64_t SharesToWeight(int64_t shares);

}  // namespace tarn::runtime
