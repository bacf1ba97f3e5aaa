// Memory sizes as YARN writes them: a plain number is MiB; k, M, G, T, P are decimal
// (powers of 1000) and Ki, Mi, Gi, Ti, Pi binary (powers of 1024) multiples of a byte.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tarn::spec {

// "4096" -> 4096, "4Gi" -> 4096, "1G" -> 954 (1e9 bytes, rounded up to whole MiB so that an
// instance never gets less than it asked for). Errors explain the accepted forms.
StatusOr<int64_t> ParseMemoryMib(std::string_view text);

// 4096 -> "4Gi", 1536 -> "1536Mi": the shortest exact binary form.
std::string FormatMemoryMib(int64_t mib);

}  // namespace tarn::spec
