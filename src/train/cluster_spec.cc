#include "train/cluster_spec.h"

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace tarn::train {
namespace {

Status Check(const ClusterSpec& c, const std::string& source) {
  if (c.jobs.empty()) return OkStatus();
  if (c.Job("ps").empty()) {
    // TensorFlow reads a cluster of workers alone as collective all-reduce training.
    return InvalidArgumentError(
        source +
        ": the cluster has no ps: tarn-train trains with parameter servers, not by collective "
        "all-reduce (TensorFlow's reading of a cluster without ps); name the ps job, or give "
        "no TF_CONFIG to train alone");
  }
  if (c.Job("worker").empty() && c.Job("chief").empty()) {
    return InvalidArgumentError(source + ": the cluster has no worker or chief");
  }
  const auto& job = c.Job(c.task_type);
  if (job.empty()) {
    return InvalidArgumentError(source + ": task type \"" + c.task_type +
                                "\" is not a job of the cluster");
  }
  if (c.task_index < 0 || c.task_index >= static_cast<int64_t>(job.size())) {
    return InvalidArgumentError(source + ": task index " + std::to_string(c.task_index) +
                                " is outside " + c.task_type + "'s " + std::to_string(job.size()) +
                                " tasks");
  }
  for (const auto& [name, addresses] : c.jobs) {
    for (const std::string& a : addresses) {
      const size_t colon = a.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) {
        return InvalidArgumentError(source + ": " + name + " address \"" + a +
                                    "\" is not HOST:PORT");
      }
    }
  }
  return OkStatus();
}

}  // namespace

const std::vector<std::string>& ClusterSpec::Job(const std::string& name) const {
  static const std::vector<std::string> none;
  auto it = jobs.find(name);
  return it == jobs.end() ? none : it->second;
}

int64_t ClusterSpec::TrainerCount() const {
  return static_cast<int64_t>(Job("chief").size() + Job("worker").size());
}

int64_t ClusterSpec::TrainerRank() const {
  if (task_type == "chief") return task_index;
  if (task_type == "worker") return static_cast<int64_t>(Job("chief").size()) + task_index;
  return -1;
}

bool ClusterSpec::IsChief() const {
  if (task_type == "chief") return true;
  return task_type == "worker" && task_index == 0 && Job("chief").empty();
}

std::string ClusterSpec::Address() const { return Job(task_type)[static_cast<size_t>(task_index)]; }

StatusOr<ClusterSpec> ParseTfConfig(const std::string& text) {
  ClusterSpec c;
  if (text.empty()) return c;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgumentError("TF_CONFIG: not a JSON object");
  const auto cluster = j.value("cluster", nlohmann::json::object());
  if (!cluster.is_object()) return InvalidArgumentError("TF_CONFIG: cluster is not an object");
  for (auto it = cluster.begin(); it != cluster.end(); ++it) {
    if (!it->is_array()) {
      return InvalidArgumentError("TF_CONFIG: cluster." + it.key() + " is not a list");
    }
    for (const auto& a : *it) {
      if (!a.is_string()) {
        return InvalidArgumentError("TF_CONFIG: cluster." + it.key() + " holds a non-string");
      }
      c.jobs[it.key()].push_back(a.get<std::string>());
    }
  }
  const auto task = j.value("task", nlohmann::json::object());
  if (!task.is_object() || !task.value("type", nlohmann::json()).is_string() ||
      !task.value("index", nlohmann::json()).is_number_integer()) {
    if (c.jobs.empty()) return c;
    return InvalidArgumentError("TF_CONFIG: task needs a string type and an integer index");
  }
  c.task_type = task["type"].get<std::string>();
  c.task_index = task["index"].get<int64_t>();
  RETURN_IF_ERROR(Check(c, "TF_CONFIG"));
  return c;
}

StatusOr<ClusterSpec> ClusterFromFlags(const std::string& job_name, int64_t task_index,
                                       const std::string& ps_hosts,
                                       const std::string& worker_hosts) {
  ClusterSpec c;
  if (job_name.empty() && ps_hosts.empty() && worker_hosts.empty()) return c;
  c.jobs["ps"] = SplitCommas(ps_hosts);
  c.jobs["worker"] = SplitCommas(worker_hosts);
  c.task_type = job_name;
  c.task_index = task_index;
  RETURN_IF_ERROR(Check(c, "--job_name/--task_index/--ps_hosts/--worker_hosts"));
  return c;
}

}  // namespace tarn::train
