// Reading /proc/<pid>/stat: a process's state and start time, which together tell a live
// process from a zombie or from a later process that reused its pid. Thread-safe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace tarn {

struct ProcStat {
  std::string comm;        // the command name (at most 15 bytes)
  char state = '?';        // R, S, D, Z (zombie), X (dead), ...
  pid_t ppid = 0;
  std::string start_time;  // field 22, in clock ticks since boot, as text
};

// nullopt when the process does not exist (or its stat cannot be read).
std::optional<ProcStat> ReadProcStat(pid_t pid);

// This process's children, zombies included: those of every thread (the kernel hands a
// subreaper's orphans to any of its threads), from /proc/self/task/*/children, or from
// every process's parent where the kernel has no such files.
std::vector<pid_t> ChildProcesses();

}  // namespace tarn
