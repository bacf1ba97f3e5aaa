// Queues of the daemon's configuration, with YARN Capacity Scheduler's names:
//   {"queues": [{"name": "gpu-team", "capacity": 40, "maximum-capacity": 60,
//                "acl_submit_applications": "alice,bob ml",
//                "acl_administer_queue": " ml-leads"}]}
// capacity is the guaranteed share and maximum-capacity the cap, in percent of the cluster
// (of its dominant resource, as DRF measures shares). default-application-priority is the
// priority of an assembly that sets no tarn.priority (default 0), max-application-priority
// the highest one may set (default 0, as YARN's yarn.cluster.max-application-priority: on a
// shared machine nobody jumps the queue unless its operator says so). disable_preemption
// (default false) keeps the queue's running work from ever being preempted. The ACLs are Hadoop's
// "users groups" (common/acl.h): who may submit to the queue (absent: everyone), and who
// administers its assemblies as an operator would (absent: nobody; YARN's root queue would
// say everyone).
// The API checks them against the authenticated tenant's account and groups. A `default`
// queue always exists (capacity 0, maximum 100, open to all, unless configured). Pure;
// thread-safe.
#pragma once

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/acl.h"
#include "common/priority.h"
#include "common/status.h"

namespace tarn::scheduler {

struct QueueConfig {
  std::string name;
  double guaranteed_share = 0;        // 0..1
  double maximum_share = 1;           // guaranteed_share..1
  std::optional<Acl> submit_acl;      // acl_submit_applications; none: everyone
  std::optional<Acl> administer_acl;  // acl_administer_queue; none: nobody
  int default_priority = 0;           // default-application-priority
  int max_priority = 0;               // max-application-priority
  // disable_preemption (YARN's per-queue switch): its work is never taken back, neither
  // for more urgent work of its own queue nor to give another queue its guarantee.
  bool disable_preemption = false;

  // The priority a launch asking for `asked` runs at: asked, else default_priority, never
  // above max_priority.
  int PriorityFor(std::optional<int> asked) const {
    return std::min(asked.value_or(default_priority), max_priority);
  }
  // Whether `account` (in `groups`) may submit to the queue.
  bool Allows(const std::string& account, const std::vector<std::string>& groups = {}) const;
  // Whether `account` (in `groups`) operates the queue's assemblies.
  bool Administers(const std::string& account, const std::vector<std::string>& groups) const;
  friend bool operator==(const QueueConfig&, const QueueConfig&) = default;
};

// Parses the "queues" list; errors name the entry and field ("queues[1].capacity: ...").
StatusOr<std::vector<QueueConfig>> ParseQueues(const nlohmann::json& queues);

}  // namespace tarn::scheduler
