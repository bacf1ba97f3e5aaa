// Small whole-file helpers. Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace tarn {

// Reads a regular file whole. Errors name the path and the reason (errno text); a file
// larger than `max_bytes` is refused rather than read.
StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes = 64u << 20);

}  // namespace tarn
