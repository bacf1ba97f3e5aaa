// The priorities an assembly (tarn.priority) or a queue (default-application-priority,
// max-application-priority) may name: higher goes first. Kubernetes' user-defined
// PriorityClass values stay below 10^9 too.
#pragma once

namespace tarn {

inline constexpr int kMinPriority = -1000000000;
inline constexpr int kMaxPriority = 1000000000;

}  // namespace tarn
