// The `configuration` object of services and components: properties, env and config files,
// and the typed reading of tarn's own properties (tarn.tf.role, tarn.tf.port, tarn.ports,
// tarn.gang) and of YARN's yarn.service.* properties. Used by the parser; pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spec/assembly.h"
#include "spec/diagnostics.h"
#include "spec/parser.h"

namespace tarn::spec {

// Parses a configuration object at `path`. `value` may be null (absent).
Configuration ParseConfiguration(const nlohmann::json* value, const std::string& path,
                                 const ParseOptions& options, Diagnostics& diags);

// Checks the tarn.* and yarn.service.* keys of one level's own properties.
// `properties_path` is e.g. "components[0].configuration.properties".
void CheckProperties(const std::map<std::string, std::string>& properties,
                     const std::string& properties_path, bool service_level, Diagnostics& diags);

// Component-level values win; config files with the same dest_file are replaced.
Configuration MergeConfiguration(const Configuration& service, const Configuration& component);

struct TarnComponentProperties {
  TfRole role = TfRole::kNone;
  std::optional<int> tf_port;
  std::vector<NamedPort> ports;
  std::vector<std::string> public_ports;
  int64_t stop_grace_secs = kDefaultStopGraceSecs;
  int64_t upgrade_max_unavailable = 1;
  int64_t upgrade_deadline_secs = kDefaultUpgradeDeadlineSecs;
  int64_t upgrade_deregistration_delay_ms = kDefaultDeregistrationDelayMs;
};

// Reads the typed values from merged properties that CheckProperties accepted.
TarnComponentProperties ReadTarnProperties(const std::map<std::string, std::string>& merged);

// "http, grpc" -> {"http", "grpc"}: a comma-separated list, each item trimmed of blanks,
// empty items dropped.
std::vector<std::string> SplitNames(const std::string& text);

// Parses "grpc:2222,http:8501"; an error message says what is wrong.
StatusOr<std::vector<NamedPort>> ParsePortList(const std::string& text);

}  // namespace tarn::spec
