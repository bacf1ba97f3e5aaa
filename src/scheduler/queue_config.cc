#include "scheduler/queue_config.h"

#include <algorithm>
#include <set>

namespace tarn::scheduler {
namespace {

bool IsQueueName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
}

StatusOr<double> Percent(const nlohmann::json& q, const char* key, double dflt,
                         const std::string& where) {
  auto it = q.find(key);
  if (it == q.end()) return dflt / 100.0;
  if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 100) {
    return InvalidArgumentError(where + "." + key + ": expected a percentage from 0 to 100");
  }
  return it->get<double>() / 100.0;
}

StatusOr<int> Priority(const nlohmann::json& q, const char* key, const std::string& where) {
  auto it = q.find(key);
  if (it == q.end()) return 0;
  if (!it->is_number_integer() || it->get<int64_t>() < kMinPriority ||
      it->get<int64_t>() > kMaxPriority) {
    return InvalidArgumentError(where + "." + key + ": expected an integer from " +
                                std::to_string(kMinPriority) + " to " +
                                std::to_string(kMaxPriority) + ", got " + it->dump());
  }
  return static_cast<int>(it->get<int64_t>());
}

}  // namespace

bool QueueConfig::Allows(const std::string& account, const std::vector<std::string>& groups) const {
  return !submit_acl || submit_acl->Admits(account, groups);
}

bool QueueConfig::Administers(const std::string& account,
                              const std::vector<std::string>& groups) const {
  return administer_acl && administer_acl->Admits(account, groups);
}

StatusOr<std::vector<QueueConfig>> ParseQueues(const nlohmann::json& queues) {
  std::vector<QueueConfig> out;
  if (!queues.is_null() && !queues.is_array()) {
    return InvalidArgumentError("queues: expected a list of queues");
  }
  std::set<std::string> names;
  double total = 0;
  for (size_t i = 0; i < (queues.is_array() ? queues.size() : 0); ++i) {
    const nlohmann::json& q = queues[i];
    std::string where = "queues[" + std::to_string(i) + "]";
    if (!q.is_object()) return InvalidArgumentError(where + ": expected an object");
    for (auto it = q.begin(); it != q.end(); ++it) {
      static const std::set<std::string> kKnown = {
          "name",          "capacity", "maximum-capacity", "acl_submit_applications",
          "acl_administer_queue", "default-application-priority", "max-application-priority",
          "disable_preemption"};
      if (!kKnown.count(it.key())) {
        return InvalidArgumentError(where + "." + it.key() +
                                    ": unknown field (queues take name, capacity, "
                                    "maximum-capacity, acl_submit_applications, "
                                    "acl_administer_queue, default-application-priority, "
                                    "max-application-priority, disable_preemption)");
      }
    }
    QueueConfig c;
    auto name = q.find("name");
    if (name == q.end() || !name->is_string() || !IsQueueName(name->get<std::string>())) {
      return InvalidArgumentError(where + ".name: expected a queue name (a-z, 0-9, '-', '_', '.')");
    }
    c.name = name->get<std::string>();
    if (!names.insert(c.name).second) {
      return InvalidArgumentError(where + ".name: queue \"" + c.name + "\" is defined twice");
    }
    ASSIGN_OR_RETURN(c.guaranteed_share, Percent(q, "capacity", 0, where));
    ASSIGN_OR_RETURN(c.maximum_share, Percent(q, "maximum-capacity", 100, where));
    if (c.maximum_share < c.guaranteed_share) {
      return InvalidArgumentError(where + ".maximum-capacity: is below its capacity");
    }
    for (const char* key : {"acl_submit_applications", "acl_administer_queue"}) {
      auto acl = q.find(key);
      if (acl == q.end()) continue;
      const std::string at = where + "." + key;
      if (!acl->is_string()) {
        return InvalidArgumentError(at + ": expected \"*\" or \"user1,user2 group1,group2\"");
      }
      ASSIGN_OR_RETURN(Acl parsed, ParseAcl(acl->get<std::string>(), at));
      std::optional<Acl>& field =
          std::string_view(key) == "acl_submit_applications" ? c.submit_acl : c.administer_acl;
      field = std::move(parsed);
      // "*" to submit is the same as no ACL: everyone.
      if (&field == &c.submit_acl && field->everyone) field.reset();
    }
    ASSIGN_OR_RETURN(c.default_priority, Priority(q, "default-application-priority", where));
    ASSIGN_OR_RETURN(c.max_priority, Priority(q, "max-application-priority", where));
    if (c.default_priority > c.max_priority) {
      return InvalidArgumentError(where + ".default-application-priority: " +
                                  std::to_string(c.default_priority) +
                                  " is above the queue's max-application-priority (" +
                                  std::to_string(c.max_priority) + ")");
    }
    if (auto dp = q.find("disable_preemption"); dp != q.end()) {
      if (!dp->is_boolean()) {
        return InvalidArgumentError(where + ".disable_preemption: expected true or false, got " +
                                    dp->dump());
      }
      c.disable_preemption = dp->get<bool>();
    }
    total += c.guaranteed_share;
    out.push_back(std::move(c));
  }
  if (total > 1.0 + 1e-9) {
    return InvalidArgumentError("queues: the capacities add up to " +
                                std::to_string(static_cast<int>(total * 100 + 0.5)) +
                                "%, more than the whole cluster");
  }
  // An implicit default queue is guaranteed what no configured queue is (all of it when none
  // is), as YARN's capacities of sibling queues add up to 100%.
  if (!names.count("default")) {
    const double rest = 1.0 - total;
    out.push_back(QueueConfig{"default", rest > 1e-9 ? rest : 0.0, 1, {}, {}});
  }
  return out;
}

}  // namespace tarn::scheduler
