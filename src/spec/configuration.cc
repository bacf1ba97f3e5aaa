#include "spec/configuration.h"

#include <array>
#include <set>
#include <string_view>

#include "common/number.h"
#include "common/priority.h"
#include "spec/autoscale.h"
#include "spec/data_uri.h"
#include "spec/object_reader.h"

namespace tarn::spec {

std::vector<std::string> SplitNames(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(at, comma - at);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    at = comma + 1;
  }
  return out;
}

namespace {

using json = nlohmann::json;

struct FileTypeName {
  std::string_view name;
  ConfigFileType type;
};
constexpr std::array<FileTypeName, 9> kFileTypes = {{
    {"XML", ConfigFileType::kXml},
    {"PROPERTIES", ConfigFileType::kProperties},
    {"JSON", ConfigFileType::kJson},
    {"YAML", ConfigFileType::kYaml},
    {"TEMPLATE", ConfigFileType::kTemplate},
    {"ENV", ConfigFileType::kEnv},
    {"HADOOP_XML", ConfigFileType::kHadoopXml},
    {"STATIC", ConfigFileType::kStatic},
    {"ARCHIVE", ConfigFileType::kArchive},
}};

std::optional<std::string> ReadSrcFile(const std::string& src, const std::string& path,
                                       const ParseOptions& options, Diagnostics& diags) {
  if (IsDataUri(src)) {
    auto decoded = DecodeDataUri(src);
    if (!decoded.ok()) {
      diags.Error(path, decoded.status().message());
      return std::nullopt;
    }
    return *decoded;
  }
  std::string local = src;
  if (local.rfind("file://", 0) == 0) {
    local = local.substr(7);
  } else if (local.find("://") != std::string::npos) {
    diags.Error(path, Quote(src) +
                          ": not supported yet (tarn reads a src_file from the local file "
                          "system or a data: URI, not from a remote file system)");
    return std::nullopt;
  }
  if (local.empty()) {
    diags.Error(path, "must not be empty");
    return std::nullopt;
  }
  if (!options.read_file) {
    diags.Error(path, Quote(src) +
                          " is a local file; send its contents inline as a data: URI "
                          "(tarn launch does this for you)");
    return std::nullopt;
  }
  if (local[0] != '/' && !options.base_dir.empty()) local = options.base_dir + "/" + local;
  auto content = options.read_file(local);
  if (!content.ok()) {
    diags.Error(path, content.status().message());
    return std::nullopt;
  }
  return *content;
}

bool HasDotDotSegment(std::string_view p) {
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    std::string_view seg =
        p.substr(start, slash == std::string_view::npos ? p.npos : slash - start);
    if (seg == "..") return true;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return false;
}

ConfigFile ParseConfigFile(const json& value, const std::string& path, const ParseOptions& options,
                           Diagnostics& diags) {
  ConfigFile file;
  ObjectReader r(value, path, diags);
  if (!r.valid()) {
    if (value.is_null()) diags.Error(path, "expected an object, found null");
    return file;
  }
  bool type_ok = false;
  if (auto type = r.String("type", /*required=*/true)) {
    for (const auto& t : kFileTypes) {
      if (*type == t.name) {
        file.type = t.type;
        type_ok = true;
      }
    }
    if (!type_ok) {
      diags.Error(r.PathOf("type"), Quote(*type) +
                                        " is not a config file type (use XML, PROPERTIES, "
                                        "JSON, YAML, TEMPLATE, ENV, HADOOP_XML or STATIC)");
    }
  }
  if (auto dest = r.String("dest_file", /*required=*/true)) {
    file.dest_file = *dest;
    if (dest->empty()) {
      diags.Error(r.PathOf("dest_file"), "must not be empty");
    } else if (HasDotDotSegment(*dest)) {
      diags.Error(r.PathOf("dest_file"),
                  Quote(*dest) +
                      " must not contain \"..\" (a relative dest_file is created "
                      "under the instance's conf/ directory)");
    } else if (dest->back() == '/') {
      diags.Error(r.PathOf("dest_file"), Quote(*dest) + " names a directory, not a file");
    }
  }
  if (auto src = r.String("src_file")) {
    file.src_content = ReadSrcFile(*src, r.PathOf("src_file"), options, diags);
    if (file.src_content && file.src_content->size() > kMaxInlineFileBytes) {
      diags.Error(r.PathOf("src_file"), "is " + std::to_string(file.src_content->size()) +
                                            " bytes; the limit is " +
                                            std::to_string(kMaxInlineFileBytes));
      file.src_content.reset();
    }
  }
  if (auto props = r.StringMap("properties")) file.properties = std::move(*props);
  r.Finish();
  if (!type_ok) return file;

  const bool has_src = r.Has("src_file");
  switch (file.type) {
    case ConfigFileType::kTemplate:
      if (!has_src && !file.properties.count("content")) {
        diags.Error(path, "a TEMPLATE file needs src_file or properties.content");
      }
      for (const auto& [k, v] : file.properties) {
        if (k != "content") {
          diags.Error(ChildPath(r.PathOf("properties"), k),
                      "a TEMPLATE file takes only properties.content (the text to write)");
        }
      }
      if (has_src && file.properties.count("content")) {
        diags.Error(r.PathOf("properties"),
                    "give either src_file or properties.content for a TEMPLATE, not both");
      }
      break;
    case ConfigFileType::kStatic:
      if (!has_src) diags.Error(path, "a STATIC file needs src_file");
      if (!file.properties.empty()) {
        diags.Error(r.PathOf("properties"), "a STATIC file is copied as is and takes none");
      }
      break;
    case ConfigFileType::kArchive:
      diags.Error(r.PathOf("type"),
                  "ARCHIVE: not supported yet (use a TARBALL artifact, which is unpacked "
                  "under lib/)");
      break;
    default:
      if (has_src) {
        diags.Error(r.PathOf("src_file"),
                    std::string("with type ") + ConfigFileTypeName(file.type) +
                        ": not supported yet (use TEMPLATE or STATIC for a src_file, or "
                        "give the values in properties)");
      }
      break;
  }
  return file;
}

bool IsEnvName(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

bool IsReservedEnv(std::string_view s) {
  return s == "TF_CONFIG" || s == "CUDA_VISIBLE_DEVICES" || s == "NVIDIA_VISIBLE_DEVICES" ||
         s.substr(0, 5) == "TARN_";
}

bool IsPortName(std::string_view s) {
  // RFC 6335 service names: 1-15 characters, [a-z0-9-], at least one letter, no leading,
  // trailing or double hyphen. Lowercase only, so the name maps to TARN_PORT_<NAME> and SRV.
  if (s.empty() || s.size() > 15 || s.front() == '-' || s.back() == '-') return false;
  bool letter = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'a' && c <= 'z') {
      letter = true;
    } else if (!(c >= '0' && c <= '9') && c != '-') {
      return false;
    }
    if (c == '-' && i > 0 && s[i - 1] == '-') return false;
  }
  return letter;
}

enum class PropKind { kInt, kBool, kNoEffect };
struct YarnProperty {
  std::string_view name;
  PropKind kind;
  int64_t min;
};
// YARN's service- and component-level AM properties (Configurations.md). Those tarn acts on
// are checked; the rest configure YARN's Java AM and have nothing to act on here.
constexpr std::array<YarnProperty, 17> kYarnProperties = {{
    {"yarn.service.container-failure.retry.max", PropKind::kInt, -1},
    {"yarn.service.container-failure.retry-interval-ms", PropKind::kInt, 0},
    {"yarn.service.container-failure.validity-interval-ms", PropKind::kInt, -1},
    {"yarn.service.container-failure-per-component.threshold", PropKind::kInt, 0},
    {"yarn.service.failure-count-reset.window", PropKind::kInt, 0},
    {"yarn.service.readiness-check-interval.seconds", PropKind::kInt, 1},
    {"yarn.service.default-readiness-check.enabled", PropKind::kBool, 0},
    {"yarn.service.node-blacklist.threshold", PropKind::kInt, 0},
    {"yarn.service.am-restart.max-attempts", PropKind::kNoEffect, 0},
    {"yarn.service.am-resource.memory", PropKind::kNoEffect, 0},
    {"yarn.service.am.java.opts", PropKind::kNoEffect, 0},
    {"yarn.service.container-recovery.timeout.ms", PropKind::kNoEffect, 0},
    {"yarn.service.log.include-pattern", PropKind::kNoEffect, 0},
    {"yarn.service.log.exclude-pattern", PropKind::kNoEffect, 0},
    {"yarn.service.rolling-log.include-pattern", PropKind::kNoEffect, 0},
    {"yarn.service.rolling-log.exclude-pattern", PropKind::kNoEffect, 0},
    {"yarn.service.queue", PropKind::kNoEffect, 0},
}};

constexpr std::array<std::string_view, 10> kTarnKeys = {"tarn.tf.role",
                                                        "tarn.tf.port",
                                                        "tarn.ports",
                                                        "tarn.ports.public",
                                                        "tarn.gang",
                                                        "tarn.priority",
                                                        "tarn.stop.grace_secs",
                                                        "tarn.upgrade.max_unavailable",
                                                        "tarn.upgrade.progress_deadline_secs",
                                                        "tarn.upgrade.deregistration_delay_ms"};

// " (did you mean "x"?)" for the nearest of `names` within 3 edits, else "".
std::string NearestHint(std::string_view key, const std::vector<std::string_view>& names) {
  std::string_view best;
  size_t best_distance = 4;
  for (std::string_view name : names) {
    size_t d = EditDistance(key, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best.empty() ? "" : " (did you mean " + Quote(best) + "?)";
}

void CheckYarnProperty(const std::string& key, const std::string& value, const std::string& path,
                       Diagnostics& diags) {
  for (const YarnProperty& p : kYarnProperties) {
    if (key != p.name) continue;
    switch (p.kind) {
      case PropKind::kInt: {
        auto v = ParseInt64(value);
        if (!v || *v < p.min) {
          diags.Error(path, Quote(value) + " must be a whole number >= " + std::to_string(p.min));
        }
        return;
      }
      case PropKind::kBool:
        if (value != "true" && value != "false") {
          diags.Error(path, Quote(value) + " must be true or false");
        }
        return;
      case PropKind::kNoEffect:
        diags.Warning(path,
                      "configures YARN's own application master and has no effect in "
                      "tarn");
        return;
    }
  }
  std::vector<std::string_view> names;
  for (const YarnProperty& p : kYarnProperties) names.push_back(p.name);
  std::string hint = NearestHint(key, names);
  diags.Warning(path, "is not a yarn.service property tarn knows; it is ignored" + hint);
}

}  // namespace

StatusOr<std::vector<NamedPort>> ParsePortList(const std::string& text) {
  std::vector<NamedPort> ports;
  std::set<std::string> names;
  std::set<int> numbers;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? text.npos : comma - start);
    size_t colon = item.find(':');
    if (colon == std::string::npos) {
      return InvalidArgumentError(Quote(item) + " is not name:port (e.g. \"grpc:2222,http:8501\")");
    }
    std::string name = item.substr(0, colon);
    auto port = ParseInt64(item.substr(colon + 1));
    if (!IsPortName(name)) {
      return InvalidArgumentError(Quote(name) +
                                  " is not a port name (1-15 of a-z, 0-9 and '-', with a letter)");
    }
    if (!port || *port < 1 || *port > 65535) {
      return InvalidArgumentError(Quote(item.substr(colon + 1)) + " (port " + name +
                                  ") is not a port number from 1 to 65535");
    }
    if (!names.insert(name).second) {
      return InvalidArgumentError("port name " + Quote(name) + " is given twice");
    }
    if (!numbers.insert(static_cast<int>(*port)).second) {
      return InvalidArgumentError("port " + std::to_string(*port) + " is given twice");
    }
    ports.push_back({name, static_cast<int>(*port)});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ports;
}

Configuration ParseConfiguration(const json* value, const std::string& path,
                                 const ParseOptions& options, Diagnostics& diags) {
  Configuration conf;
  if (!value) return conf;
  ObjectReader r(*value, path, diags);
  if (auto props = r.StringMap("properties")) conf.properties = std::move(*props);
  if (auto env = r.StringMap("env")) {
    for (const auto& [name, v] : *env) {
      std::string p = ChildPath(r.PathOf("env"), name);
      if (!IsEnvName(name)) {
        diags.Error(p,
                    "is not an environment variable name (letters, digits and '_', not "
                    "starting with a digit)");
      } else if (IsReservedEnv(name)) {
        diags.Error(p, "is set by tarn for every instance and cannot be overridden");
      }
      if (v.find('\0') != std::string::npos) diags.Error(p, "must not contain a NUL character");
    }
    conf.env = std::move(*env);
  }
  if (const json* files = r.Get("files")) {
    if (!files->is_array()) {
      diags.Error(r.PathOf("files"), "expected a list of config files, found " + TypeName(*files));
    } else {
      std::set<std::string> dests;
      for (size_t i = 0; i < files->size(); ++i) {
        std::string p = IndexPath(r.PathOf("files"), i);
        ConfigFile f = ParseConfigFile((*files)[i], p, options, diags);
        if (!f.dest_file.empty() && !dests.insert(f.dest_file).second) {
          diags.Error(ChildPath(p, "dest_file"),
                      Quote(f.dest_file) + " is already the dest_file of another file");
        }
        conf.files.push_back(std::move(f));
      }
    }
  }
  r.Finish();
  return conf;
}

void CheckProperties(const std::map<std::string, std::string>& properties,
                     const std::string& properties_path, bool service_level, Diagnostics& diags) {
  for (const auto& [key, value] : properties) {
    std::string path = ChildPath(properties_path, key);
    if (key == "tarn.tf.role") {
      if (service_level) {
        diags.Error(path, "belongs on a component (each component is one TensorFlow job)");
      } else if (value != "chief" && value != "worker" && value != "ps" && value != "evaluator") {
        diags.Error(path, Quote(value) + " is not a role (use chief, worker, ps or evaluator)");
      }
    } else if (key == "tarn.tf.port") {
      auto port = ParseInt64(value);
      if (!port || *port < 1 || *port > 65535) {
        diags.Error(path, Quote(value) + " is not a port number from 1 to 65535");
      }
    } else if (key == "tarn.ports") {
      auto ports = ParsePortList(value);
      if (!ports.ok()) diags.Error(path, ports.status().message());
    } else if (key == "tarn.ports.public") {
      if (service_level) {
        diags.Error(path, "belongs on a component (it names that component's ports)");
      } else if (SplitNames(value).empty()) {
        diags.Error(path,
                    "names no port: give the names of tarn.ports to open to every local "
                    "account (\"http\", \"http,grpc\")");
      }
    } else if (key == "tarn.gang") {
      if (!service_level) {
        diags.Error(path,
                    "belongs in the service's configuration.properties (one gang per "
                    "assembly)");
      } else if (value != "true" && value != "false") {
        diags.Error(path, Quote(value) + " must be true or false");
      }
    } else if (key == "tarn.priority") {
      auto priority = ParseInt64(value);
      if (!service_level) {
        diags.Error(path,
                    "belongs in the service's configuration.properties (an assembly has one "
                    "priority)");
      } else if (!priority || *priority < kMinPriority || *priority > kMaxPriority) {
        diags.Error(path, Quote(value) + " is not a priority (an integer from " +
                              std::to_string(kMinPriority) + " to " + std::to_string(kMaxPriority) +
                              "; higher goes first)");
      }
    } else if (key == "tarn.stop.grace_secs") {
      auto secs = ParseInt64(value);
      if (!secs || *secs < 0 || *secs > kMaxStopGraceSecs) {
        diags.Error(path, Quote(value) + " is not a grace period (whole seconds from 0 to " +
                              std::to_string(kMaxStopGraceSecs) + " between SIGTERM and SIGKILL)");
      }
    } else if (key == "tarn.upgrade.max_unavailable") {
      auto n = ParseInt64(value);
      if (!n || *n < 1 || *n > kMaxContainersPerComponent) {
        diags.Error(path, Quote(value) +
                              " is not a number of instances (at least 1: an upgrade stops that "
                              "many of the component's instances at once)");
      }
    } else if (key == "tarn.upgrade.progress_deadline_secs") {
      auto secs = ParseInt64(value);
      if (!secs || *secs < 1 || *secs > kMaxUpgradeDeadlineSecs) {
        diags.Error(path, Quote(value) + " is not a deadline (whole seconds from 1 to " +
                              std::to_string(kMaxUpgradeDeadlineSecs) +
                              " for an upgraded instance to be READY)");
      }
    } else if (key == "tarn.upgrade.deregistration_delay_ms") {
      auto ms = ParseInt64(value);
      if (!ms || *ms < 0 || *ms > kMaxDeregistrationDelayMs) {
        diags.Error(path, Quote(value) + " is not a delay (whole milliseconds from 0 to " +
                              std::to_string(kMaxDeregistrationDelayMs) +
                              " between leaving the ready set and the upgrade's stop)");
      }
    } else if (IsAutoscaleKey(key)) {
      CheckAutoscaleProperty(key, value, path, service_level, diags);
    } else if (key.rfind("tarn.", 0) == 0) {
      std::string hint =
          NearestHint(key, std::vector<std::string_view>(kTarnKeys.begin(), kTarnKeys.end()));
      diags.Error(path, "unknown tarn property" + hint +
                            "; tarn knows tarn.tf.role, tarn.tf.port, tarn.ports, "
                            "tarn.ports.public, tarn.gang, tarn.priority, "
                            "tarn.stop.grace_secs, tarn.upgrade.max_unavailable, "
                            "tarn.upgrade.progress_deadline_secs, "
                            "tarn.upgrade.deregistration_delay_ms, tarn.autoscale.*");
    } else if (key.rfind("yarn.service.", 0) == 0) {
      CheckYarnProperty(key, value, path, diags);
    }
  }
}

Configuration MergeConfiguration(const Configuration& service, const Configuration& component) {
  Configuration out = component;
  for (const auto& [k, v] : service.properties) {
    // tarn.gang and tarn.priority are read from the service alone; they are not component
    // properties.
    if (k != "tarn.gang" && k != "tarn.priority") out.properties.emplace(k, v);
  }
  for (const auto& [k, v] : service.env) out.env.emplace(k, v);
  std::vector<ConfigFile> files;
  for (const ConfigFile& f : service.files) {
    bool overridden = false;
    for (const ConfigFile& g : component.files) overridden |= g.dest_file == f.dest_file;
    if (!overridden) files.push_back(f);
  }
  files.insert(files.end(), component.files.begin(), component.files.end());
  out.files = std::move(files);
  return out;
}

TarnComponentProperties ReadTarnProperties(const std::map<std::string, std::string>& merged) {
  TarnComponentProperties out;
  if (auto it = merged.find("tarn.tf.role"); it != merged.end()) {
    if (it->second == "chief") out.role = TfRole::kChief;
    if (it->second == "worker") out.role = TfRole::kWorker;
    if (it->second == "ps") out.role = TfRole::kPs;
    if (it->second == "evaluator") out.role = TfRole::kEvaluator;
  }
  if (auto it = merged.find("tarn.ports"); it != merged.end()) {
    auto ports = ParsePortList(it->second);
    if (ports.ok()) out.ports = *ports;
  }
  if (auto it = merged.find("tarn.ports.public"); it != merged.end()) {
    out.public_ports = SplitNames(it->second);
  }
  if (auto it = merged.find("tarn.tf.port"); it != merged.end()) {
    auto port = ParseInt64(it->second);
    if (port && *port >= 1 && *port <= 65535) out.tf_port = static_cast<int>(*port);
  } else if (!out.ports.empty()) {
    out.tf_port = out.ports.front().port;
  }
  if (auto it = merged.find("tarn.stop.grace_secs"); it != merged.end()) {
    auto secs = ParseInt64(it->second);
    if (secs && *secs >= 0 && *secs <= kMaxStopGraceSecs) out.stop_grace_secs = *secs;
  }
  if (auto it = merged.find("tarn.upgrade.max_unavailable"); it != merged.end()) {
    auto n = ParseInt64(it->second);
    if (n && *n >= 1) out.upgrade_max_unavailable = *n;
  }
  if (auto it = merged.find("tarn.upgrade.progress_deadline_secs"); it != merged.end()) {
    auto secs = ParseInt64(it->second);
    if (secs && *secs >= 1 && *secs <= kMaxUpgradeDeadlineSecs) out.upgrade_deadline_secs = *secs;
  }
  if (auto it = merged.find("tarn.upgrade.deregistration_delay_ms"); it != merged.end()) {
    auto ms = ParseInt64(it->second);
    if (ms && *ms >= 0 && *ms <= kMaxDeregistrationDelayMs) {
      out.upgrade_deregistration_delay_ms = *ms;
    }
  }
  return out;
}

}  // namespace tarn::spec
