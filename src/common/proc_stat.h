// Reading /proc/<pid>/stat: a process's state and start time, which together tell a live
// process from a zombie or from a later process that reused its pid. Thread-safe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace tarn {

struct ProcStat {
  char state = '?';        // R, S, D, Z (zombie), X (dead), ...
  std::string start_time;  // field 22, in clock ticks since boot, as text
};

// nullopt when the process does not exist (or its stat cannot be read).
std::optional<ProcStat> ReadProcStat(pid_t pid);

}  // namespace tarn
