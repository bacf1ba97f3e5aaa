// The API's JSON for the service layer's views: YARN Services API v1 field names (a service
// is its spec plus states; containers nested under their components), with tarn's extras
// (gpus, restarts, last_exit, diagnostics per container). docs/api.md shows an example.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "scheduler/scheduler.h"
#include "service/manager.h"

namespace tarn::api {

nlohmann::json ServiceJson(const service::AssemblyStatus& a);
nlohmann::json ServiceSummaryJson(const service::AssemblyStatus& a);
nlohmann::json NodesJson(const std::vector<scheduler::NodeUsage>& nodes);
nlohmann::json QueuesJson(const std::vector<scheduler::QueueUsage>& queues);
nlohmann::json EventsJson(const std::vector<service::Event>& events);

}  // namespace tarn::api
