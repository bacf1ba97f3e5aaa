// Small whole-file helpers. Thread-safe (no shared state).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tarn {

// Reads a regular file whole. Errors name the path and the reason (errno text); a file
// larger than `max_bytes` is refused rather than read.
StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes = 64u << 20);
// The same for a file another account controls (a Slurm job's output, in its tenant's
// directory): a symbolic link at `path` is refused, never followed, so the job cannot make
// the server read a file of the server's own for it.
StatusOr<std::string> ReadFileNoFollow(const std::string& path, size_t max_bytes);

// Creates the SQLite database `path` (when missing) readable and writable by this process's
// account alone (0600), and makes it, its WAL and its shared-memory file so when they exist:
// SQLite gives the files it makes the database's mode. Errors name the path.
Status MakeDatabaseFilePrivate(const std::string& path);

// Writes all of `data` to `fd`, again after a short write or EINTR; false when a write fails.
bool WriteFully(int fd, std::string_view data);

// mkdir -p: creates `path` and any missing parents (0755), the last one with `mode`
// (applied even when it already existed). Errors name the directory that failed.
Status MakeDirectories(const std::string& path, mode_t mode = 0755);

// rm -rf: removes `path` and everything under it; nothing to remove is not an error. Errors
// name the path and the reason.
Status RemoveTree(const std::string& path);

// Removes `dir`/`name` so that nobody listing `dir` sees it half-removed: it is renamed to a
// hidden name in `dir` (".removing-<name>-<pid>") first, then deleted. Nothing to remove is
// not an error.
Status RemoveOutOfSight(const std::string& dir, const std::string& name);

}  // namespace tarn
