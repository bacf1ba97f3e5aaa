// ExitLedger: how a backend keeps its promise of one kExited per container (service/backend.h):
// for each instance, the last few container ids whose end was reported. Also MadeUpExit, the
// ExitInfo of an end the backend could not observe (a lost shim, a job Slurm forgot).
// Not thread-safe: the backend holds its own lock around it.
#pragma once

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "runtime/container_spec.h"

namespace tarn::backend {

class ExitLedger {
 public:
  // Whether the end of `container_id` of instance `key` was reported.
  bool Reported(const std::string& key, const std::string& container_id) const {
    auto it = reported_.find(key);
    return it != reported_.end() &&
           std::find(it->second.begin(), it->second.end(), container_id) != it->second.end();
  }
  // Records it; false when it already was (then the caller reports nothing).
  bool Record(const std::string& key, const std::string& container_id) {
    std::vector<std::string>& ids = reported_[key];
    if (std::find(ids.begin(), ids.end(), container_id) != ids.end()) return false;
    ids.push_back(container_id);
    if (ids.size() > kHistory) ids.erase(ids.begin());
    return true;
  }
  // The instance is gone for good (flexed down, destroyed).
  void Forget(const std::string& key) { reported_.erase(key); }
  // Every instance whose key starts with `prefix` ("user/assembly/").
  void ForgetPrefix(const std::string& prefix) {
    std::erase_if(reported_, [&](const auto& entry) { return entry.first.rfind(prefix, 0) == 0; });
  }

 private:
  static constexpr size_t kHistory = 4;  // starts of one instance remembered
  std::unordered_map<std::string, std::vector<std::string>> reported_;
};

inline runtime::ExitInfo MadeUpExit(const Clock& clock, const std::string& diagnostics) {
  runtime::ExitInfo e;
  e.exit_code = -1;
  e.finished_at_ms = clock.WallMillis();
  e.diagnostics = diagnostics;
  return e;
}

}  // namespace tarn::backend
