// RunCommand: runs a program to completion and returns its exit status and output, with a
// time limit; for driving command-line tools (docker, podman, tar, sbatch). Thread-safe
// (each call forks its own child), but the caller's SIGCHLD handling must not reap it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn {

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;

  bool success() const { return exit_code == 0; }
  // The first line of stderr (else stdout), for error messages.
  std::string FirstErrorLine() const;
};

// argv[0] is looked up on PATH. Output beyond `max_output` bytes per stream is dropped. A
// command still running at `timeout` is killed and reported as DEADLINE_EXCEEDED.
StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout, size_t max_output = 1 << 20);

}  // namespace tarn
