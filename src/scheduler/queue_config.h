// Queues of the daemon's configuration, with YARN Capacity Scheduler's names:
//   {"queues": [{"name": "gpu-team", "capacity": 40, "maximum-capacity": 60,
//                "acl_submit_applications": "alice,bob"}]}
// capacity is the guaranteed share and maximum-capacity the cap, in percent of the cluster
// (of its dominant resource, as DRF measures shares). A `default` queue always exists
// (capacity 0, maximum 100, open to all, unless configured). Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::scheduler {

struct QueueConfig {
  std::string name;
  double guaranteed_share = 0;             // 0..1
  double maximum_share = 1;                // guaranteed_share..1
  std::vector<std::string> allowed_users;  // empty: everyone

  bool Allows(const std::string& user) const;
  friend bool operator==(const QueueConfig&, const QueueConfig&) = default;
};

// Parses the "queues" list; errors name the entry and field ("queues[1].capacity: ...").
StatusOr<std::vector<QueueConfig>> ParseQueues(const nlohmann::json& queues);

}  // namespace tarn::scheduler
