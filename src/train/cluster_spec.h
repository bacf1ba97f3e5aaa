// ClusterSpec: who is who in a training cluster, from TF_CONFIG exactly as TensorFlow reads
// it ({"cluster": {"ps": [...], "worker": [...], "chief": [...]}, "task": {"type": "worker",
// "index": 1}}) or from TF1-style flags (--job_name, --task_index, --ps_hosts,
// --worker_hosts). Pure; errors name the field.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::train {

struct ClusterSpec {
  std::map<std::string, std::vector<std::string>> jobs;  // "ps" -> {"ps-0.fmnist.alice.tarn:2222"}
  std::string task_type;                                 // "ps", "worker", "chief" (or "evaluator")
  int64_t task_index = 0;

  const std::vector<std::string>& Job(const std::string& name) const;
  // Workers that compute gradients: the chief (if any) first, then the workers.
  int64_t TrainerCount() const;
  // This task's rank among those trainers (chief 0), or -1 for a ps.
  int64_t TrainerRank() const;
  // The chief evaluates, checkpoints and exports: the chief task, else worker 0.
  bool IsChief() const;
  // This task's own "host:port".
  std::string Address() const;
};

// An empty or absent cluster (training alone) is a ClusterSpec with no jobs.
StatusOr<ClusterSpec> ParseTfConfig(const std::string& tf_config);
StatusOr<ClusterSpec> ClusterFromFlags(const std::string& job_name, int64_t task_index,
                                       const std::string& ps_hosts,
                                       const std::string& worker_hosts);

}  // namespace tarn::train
