// Renders the REST API's JSON answers (docs/api.md) as the aligned tables the client verbs
// print. Tolerant of missing fields (shown as "-"), since servers of other versions may
// omit some. Pure functions of their arguments (the current time is passed in); thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace tarn::cli {

// A duration as kubectl writes ages: "45s", "3m20s", "42m", "5h10m", "20h", "3d".
std::string FormatAge(int64_t ms);

// An assembly's remaining lifetime in seconds: "unlimited" for -1 or absent, else "1h0m left"
// in FormatAge's style.
std::string FormatLifetime(const nlohmann::json& seconds);

// MiB as "512Mi", or "4Gi" when a whole number of GiB.
std::string FormatMemoryMb(int64_t mb);

// GET /app/v1/services: NAME STATE PRIORITY READY COMPONENTS AGE LIFETIME DIAGNOSTICS.
std::string FormatServiceList(const nlohmann::json& services, int64_t now_ms);

// GET /app/v1/services/NAME: the service row, the component rows and one row per container
// (INSTANCE STATE VERSION [MODELS] HOST IP NODE GPUS RESTARTS AGE LAST EXIT DIAGNOSTICS),
// blank-line separated. MODELS, when a container has `served_labels` (AddServedLabels):
// "fmnist stable 3 canary 4".
std::string FormatServiceStatus(const nlohmann::json& service, int64_t now_ms);

// Adds to each of `service`'s containers the versions its model server's rollout labels
// name, `"served_labels": {"fmnist": {"stable": 3, "canary": 4}}`, from GET
// /tarn/v1/services/NAME/metrics?series=tarn_serve_version_label (tarn-serve's gauge): only
// the series the instance's last scrape had, so a label since removed (a canary promoted or
// rolled back) is not shown. Containers without any are left as they are.
void AddServedLabels(nlohmann::json& service, const nlohmann::json& metrics);

// One line that sums up a service for `tarn launch --wait`: its state, the ready count of
// each component, what the first waiting instance waits for, and the diagnostics.
// "sleeper: STARTED, ready sleeper 1/2; sleeper-1 PENDING: waiting for resources".
std::string FormatProgress(const nlohmann::json& service);

// GET /tarn/v1/nodes: NAME FREE VCORES FREE MEMORY FREE GPUS FREE GPU IDS ("free/total").
std::string FormatNodes(const nlohmann::json& nodes);

// GET /tarn/v1/queues: NAME CAPACITY MAX CAPACITY USED SHARE PENDING.
std::string FormatQueues(const nlohmann::json& queues);

// GET /tarn/v1/services/NAME/events: TIME COMPONENT INSTANCE TYPE MESSAGE, with times
// given in epoch milliseconds shown in the local time zone.
std::string FormatEvents(const nlohmann::json& events);

}  // namespace tarn::cli
