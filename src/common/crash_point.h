// Named crash points for crash-safety tests: CrashPoint("launch-committed") kills the
// process with SIGKILL, as `kill -9` would, when $TARN_CRASH_AT names that point
// ("launch-committed", or "launch-committed:3" for its third hit). Costs one branch when
// the variable is unset; never set it outside tests.
#pragma once

namespace tarn {

void CrashPoint(const char* name);

}  // namespace tarn
