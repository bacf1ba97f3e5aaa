// The kernel's favordynmods mode for cgroups, which the server config's
// "cgroup_favordynmods" turns on (docs/runtime.md, "Faster starts").
//
// Moving a process into a cgroup (a write to cgroup.procs, v1 or v2) write-locks a global
// per-CPU rwsem that every fork and exit read-locks. When no move has happened for a while
// the lock is in its reader-friendly state, and the next writer first waits out an RCU grace
// period: 8-16 ms measured here, most of a container start. favordynmods keeps the lock
// writer-friendly (since Linux 6.18, moves take a per-process rwsem instead of the global
// one), at the cost of a slower path for forks and exits. It is machine-wide and, since
// 6.18, cannot be turned off again until reboot; the kernel's CONFIG_CGROUP_FAVOR_DYNMODS and
// boot option cgroup_favordynmods=true give the same. So it is the administrator's choice,
// never a default.
//
// Turned on by reconfiguring the mounted cgroup2 hierarchy (the unified one on a hybrid
// machine, /sys/fs/cgroup on a v2 one) with its own options plus favordynmods, through
// fspick(2) and fsconfig(2), which leave the mount's own flags (nosuid, ...) as they are.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::runtime {

struct CgroupMount {
  std::string mount_point;                 // unescaped ("\040" is a space)
  std::string fs_type;                     // "cgroup" (v1) or "cgroup2"
  std::vector<std::string> super_options;  // e.g. {"rw", "nsdelegate", "memory_recursiveprot"}
};

// The cgroup and cgroup2 mounts of a /proc/PID/mountinfo text; lines it cannot read are
// skipped.
std::vector<CgroupMount> CgroupMounts(const std::string& mountinfo);

// Whether one of `mounts` shows favordynmods (the kernel reports it on each hierarchy mounted
// with it, and on all of them when built or booted with it on).
bool FavorsDynmods(const std::vector<CgroupMount>& mounts);

// The cgroup2 mount to reconfigure and the flags to give it: its own super options but rw/ro,
// and favordynmods. NotFound, saying what to do instead, when nothing mounts cgroup2.
struct DynmodsPlan {
  std::string mount_point;
  std::vector<std::string> flags;
};
StatusOr<DynmodsPlan> PlanFavorDynmods(const std::vector<CgroupMount>& mounts);

// Turns favordynmods on unless it is on already; returns what it found or did, for the log.
// Needs root (CAP_SYS_ADMIN in the initial namespaces).
StatusOr<std::string> FavorDynmods(const std::string& mountinfo_path = "/proc/self/mountinfo");

}  // namespace tarn::runtime
