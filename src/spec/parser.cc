#include "spec/parser.h"

#include <array>
#include <cstdlib>
#include <string_view>

#include "common/file.h"
#include "common/number.h"
#include "common/priority.h"
#include "spec/autoscale.h"
#include "spec/configuration.h"
#include "spec/memory_size.h"
#include "spec/object_reader.h"
#include "spec/plan.h"
#include "spec/validator.h"

namespace tarn::spec {
namespace {

using json = nlohmann::json;

template <typename E, size_t N>
std::optional<E> ParseEnum(ObjectReader& r, std::string_view key,
                           const std::array<std::pair<std::string_view, E>, N>& names,
                           bool required) {
  auto text = r.String(key, required);
  if (!text) return std::nullopt;
  for (const auto& [name, value] : names) {
    if (*text == name) return value;
  }
  std::string choices;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) choices += i + 1 == N ? " or " : ", ";
    choices += names[i].first;
  }
  r.diags().Error(r.PathOf(key), Quote(*text) + " is not one of " + choices);
  return std::nullopt;
}

constexpr std::array<std::pair<std::string_view, ArtifactType>, 3> kArtifactTypes = {{
    {"DOCKER", ArtifactType::kDocker},
    {"TARBALL", ArtifactType::kTarball},
    {"SERVICE", ArtifactType::kService},
}};
constexpr std::array<std::pair<std::string_view, RestartPolicy>, 3> kRestartPolicies = {{
    {"ALWAYS", RestartPolicy::kAlways},
    {"ON_FAILURE", RestartPolicy::kOnFailure},
    {"NEVER", RestartPolicy::kNever},
}};
constexpr std::array<std::pair<std::string_view, ReadinessType>, 3> kReadinessTypes = {{
    {"DEFAULT", ReadinessType::kDefault},
    {"HTTP", ReadinessType::kHttp},
    {"PORT", ReadinessType::kPort},
}};
constexpr std::array<std::pair<std::string_view, int>, 3> kPlacementTypes = {{
    {"AFFINITY", 0},
    {"ANTI_AFFINITY", 1},
    {"AFFINITY_WITH_CARDINALITY", 2},
}};
constexpr std::array<std::pair<std::string_view, int>, 2> kPlacementScopes = {{
    {"NODE", 0},
    {"RACK", 1},
}};

class Parser {
 public:
  Parser(const ParseOptions& options, Diagnostics& diags) : options_(options), diags_(diags) {}

  Assembly ParseService(const json& root) {
    Assembly a;
    ObjectReader r(root, "", diags_);
    if (!r.valid()) {
      if (root.is_null()) diags_.Error("", "expected an assembly object, found null");
      return a;
    }
    if (auto v = r.String("name", true)) a.name = *v;
    if (auto v = r.String("version", true)) {
      a.version = *v;
      if (v->empty()) diags_.Error(r.PathOf("version"), "must not be empty");
    }
    if (auto v = r.String("description")) a.description = *v;
    {
      // YARN reports an unlimited lifetime as -1 and accepts it back.
      auto n = r.Int("lifetime", -1, int64_t{10} * 365 * 24 * 3600);
      if (n && *n == 0)
        diags_.Error(r.PathOf("lifetime"),
                     "0 would end the assembly at once "
                     "(use seconds >= 1, or -1 or leave "
                     "it out for unlimited)");
      if (n && *n > 0) a.lifetime_seconds = *n;
    }
    if (auto v = r.String("queue")) {
      a.queue = *v;
      if (!IsQueueName(*v)) {
        diags_.Error(r.PathOf("queue"), Quote(*v) +
                                            " is not a queue name (letters, digits, "
                                            "'.', '_' and '-')");
      }
    }
    a.artifact = ParseArtifact(r.Get("artifact"), r.PathOf("artifact"));
    a.resource = ParseResource(r.Get("resource"), r.PathOf("resource"));
    a.configuration =
        ParseConfiguration(r.Get("configuration"), r.PathOf("configuration"), options_, diags_);
    CheckProperties(a.configuration.properties, ChildPath(r.PathOf("configuration"), "properties"),
                    true, diags_);
    if (auto it = a.configuration.properties.find("tarn.gang");
        it != a.configuration.properties.end()) {
      a.gang = it->second != "false";
    }
    if (auto it = a.configuration.properties.find("tarn.priority");
        it != a.configuration.properties.end()) {
      // CheckProperties said what is wrong with a bad one.
      if (auto p = ParseInt64(it->second); p && *p >= kMinPriority && *p <= kMaxPriority) {
        a.priority = static_cast<int>(*p);
      }
    }
    if (auto v = r.StringMap("quicklinks")) a.quicklinks = std::move(*v);
    if (auto deps = r.StringList("dependencies"); deps && !deps->empty()) {
      diags_.Error(r.PathOf("dependencies"),
                   "not supported yet (tarn does not order whole assemblies; use component "
                   "dependencies inside one assembly)");
    }
    if (auto state = r.String("state")) {
      if (*state == "STOPPED") {
        a.desired_state = DesiredState::kStopped;
      } else if (*state == "STARTED") {
        a.desired_state = DesiredState::kStarted;
      } else {
        diags_.Error(r.PathOf("state"),
                     Quote(*state) +
                         " cannot be requested (use STOPPED to save the assembly "
                         "without launching it, or STARTED)");
      }
    }
    r.NotSupported("kerberos_principal", "tarn runs without Kerberos");
    r.NotSupported("docker_client_config",
                   "docker credentials come from the engine's own "
                   "configuration");
    r.OutputOnly("id");
    r.OutputOnly("launch_time");
    r.OutputOnly("number_of_running_containers");
    const json* comps = r.Get("components");
    if (!comps) {
      diags_.Error(r.PathOf("components"), "is required (a list of at least one component)");
    } else if (!comps->is_array()) {
      diags_.Error(r.PathOf("components"), "expected a list, found " + TypeName(*comps));
    } else if (comps->empty()) {
      diags_.Error(r.PathOf("components"), "must list at least one component");
    } else {
      for (size_t i = 0; i < comps->size(); ++i) {
        a.components.push_back(ParseComponent((*comps)[i], IndexPath("components", i), a));
      }
    }
    r.Finish();
    return a;
  }

 private:
  static bool IsQueueName(std::string_view s) {
    if (s.empty() || s.size() > 255) return false;
    for (char c : s) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-';
      if (!ok) return false;
    }
    return true;
  }

  std::optional<Artifact> ParseArtifact(const json* value, const std::string& path) {
    if (!value) return std::nullopt;
    ObjectReader r(*value, path, diags_);
    if (!r.valid()) return std::nullopt;
    Artifact a;
    if (auto id = r.String("id", true)) a.id = *id;
    if (auto t = ParseEnum(r, "type", kArtifactTypes, false)) a.type = *t;
    if (auto uri = r.String("uri")) a.uri = *uri;
    r.Finish();
    if (a.type == ArtifactType::kService) {
      diags_.Error(r.PathOf("type"),
                   "SERVICE: not supported yet (tarn does not nest "
                   "assemblies; list the components here)");
    }
    if (a.id.empty()) {
      if (r.Has("id")) diags_.Error(r.PathOf("id"), "must not be empty");
      return a;
    }
    if (a.type == ArtifactType::kDocker) {
      for (char c : a.id) {
        if (c == ' ' || c == '\t' || c == '\n' || static_cast<unsigned char>(c) < 0x20) {
          diags_.Error(r.PathOf("id"), Quote(a.id) + " is not an image reference (no spaces)");
          break;
        }
      }
    } else if (a.type == ArtifactType::kTarball) {
      std::string local = a.id;
      if (local.rfind("file://", 0) == 0) local = local.substr(7);
      if (local.find("://") != std::string::npos) {
        diags_.Error(r.PathOf("id"), Quote(a.id) +
                                         ": not supported yet (a TARBALL is read "
                                         "from the local file system)");
      } else if (local.empty() || local[0] != '/') {
        if (options_.read_file && !options_.base_dir.empty() && !local.empty()) {
          a.id = options_.base_dir + "/" + local;  // relative to the assembly file
        } else {
          diags_.Error(r.PathOf("id"), Quote(a.id) +
                                           " must be an absolute path (a relative "
                                           "one is resolved by tarn launch)");
        }
      } else {
        a.id = local;
      }
    }
    return a;
  }

  Resource ParseResource(const json* value, const std::string& path) {
    Resource res;
    if (!value) return res;
    ObjectReader r(*value, path, diags_);
    if (!r.valid()) return res;
    res.cpus = r.Int("cpus", 1, kMaxCpus);
    if (const json* m = r.Get("memory")) {
      auto text = AsText(*m);
      if (!text || m->is_boolean()) {
        diags_.Error(r.PathOf("memory"),
                     "expected a size such as \"4096\" or \"4Gi\", found " + TypeName(*m));
      } else {
        auto mib = ParseMemoryMib(*text);
        if (!mib.ok()) {
          diags_.Error(r.PathOf("memory"), mib.status().message());
        } else if (*mib < 1) {
          diags_.Error(r.PathOf("memory"), Quote(*text) + " is less than 1 MiB");
        } else if (*mib > kMaxMemoryMib) {
          diags_.Error(r.PathOf("memory"), Quote(*text) +
                                               " is more than the 16Ti a node can "
                                               "have");
        } else {
          res.memory_mib = *mib;
        }
      }
    }
    r.NotSupported("profile", "give cpus and memory");
    if (const json* add = r.Get("additional")) {
      ObjectReader ar(*add, r.PathOf("additional"), diags_);
      if (const json* gpu = ar.Get("yarn.io/gpu")) {
        ObjectReader gr(*gpu, ar.PathOf("yarn.io/gpu"), diags_);
        res.gpus = gr.Int("value", 0, kMaxGpus, true);
        if (auto unit = gr.String("unit"); unit && !unit->empty()) {
          diags_.Error(gr.PathOf("unit"), "GPUs are counted; the unit must be empty");
        }
        gr.Finish();
      }
      if (ar.valid()) {
        for (auto it = add->begin(); it != add->end(); ++it) {
          if (it.key() != "yarn.io/gpu") {
            diags_.Error(ar.PathOf(it.key()),
                         "not supported yet (tarn schedules the resource yarn.io/gpu besides "
                         "cpus and memory)");
          }
        }
      }
    }
    r.Finish();
    return res;
  }

  std::optional<ReadinessCheck> ParseReadiness(const json* value, const std::string& path) {
    if (!value) return std::nullopt;
    ObjectReader r(*value, path, diags_);
    if (!r.valid()) return std::nullopt;
    ReadinessCheck check;
    auto type = ParseEnum(r, "type", kReadinessTypes, true);
    if (type) check.type = *type;
    if (auto props = r.StringMap("properties")) check.properties = std::move(*props);
    r.NotSupported("artifact", "YARN does not implement readiness helper containers either");
    r.Finish();
    if (!type) return check;
    std::string props_path = r.PathOf("properties");
    auto need_int = [&](const std::string& key, int64_t min, int64_t max) {
      auto it = check.properties.find(key);
      if (it == check.properties.end()) return;
      const std::string& s = it->second;
      auto v = ParseInt64(s);
      if (!v || *v < min || *v > max) {
        diags_.Error(ChildPath(props_path, key), Quote(s) + " must be a whole number from " +
                                                     std::to_string(min) + " to " +
                                                     std::to_string(max));
      }
    };
    for (const auto& [key, v] : check.properties) {
      bool known = key == "dns.check.enabled" || key == "dns.address" ||
                   (check.type != ReadinessType::kDefault && key == "timeout") ||
                   (check.type == ReadinessType::kHttp &&
                    (key == "url" || key == "min.success" || key == "max.success")) ||
                   (check.type == ReadinessType::kPort && key == "port");
      if (!known) {
        std::string allowed = check.type == ReadinessType::kHttp
                                  ? "url, timeout, min.success, max.success, dns.check.enabled, "
                                    "dns.address"
                              : check.type == ReadinessType::kPort
                                  ? "port, timeout, dns.check.enabled, dns.address"
                                  : "dns.check.enabled, dns.address";
        diags_.Error(ChildPath(props_path, key), std::string("is not a property of a ") +
                                                     ReadinessTypeName(check.type) +
                                                     " readiness check (it takes " + allowed + ")");
      }
    }
    if (auto it = check.properties.find("dns.check.enabled");
        it != check.properties.end() && it->second != "true" && it->second != "false") {
      diags_.Error(ChildPath(props_path, "dns.check.enabled"), "must be true or false");
    }
    need_int("timeout", 1, 3600 * 1000);
    need_int("min.success", 100, 599);
    need_int("max.success", 100, 599);
    if (check.type == ReadinessType::kHttp) {
      auto it = check.properties.find("url");
      if (it == check.properties.end()) {
        diags_.Error(ChildPath(props_path, "url"),
                     "is required for an HTTP readiness check (e.g. "
                     "\"http://${THIS_HOST}:8501/v1/models/fmnist\")");
      } else if (it->second.rfind("http://", 0) != 0) {
        diags_.Error(ChildPath(props_path, "url"), Quote(it->second) + " must start with http://");
      }
      auto lo = check.properties.find("min.success"), hi = check.properties.find("max.success");
      if (lo != check.properties.end() && hi != check.properties.end() &&
          std::atoi(lo->second.c_str()) > std::atoi(hi->second.c_str())) {
        diags_.Error(ChildPath(props_path, "min.success"), "is above max.success");
      }
    }
    if (check.type == ReadinessType::kPort) {
      if (!check.properties.count("port")) {
        diags_.Error(ChildPath(props_path, "port"), "is required for a PORT readiness check");
      }
      need_int("port", 1, 65535);
    }
    return check;
  }

  // YARN placement constraints are read and checked so that mistakes in them are named, then
  // refused: tarn's scheduler does not place by constraints yet.
  void ParsePlacementPolicy(const json* value, const std::string& path) {
    if (!value) return;
    ObjectReader r(*value, path, diags_);
    if (!r.valid()) return;
    const json* list = r.Get("constraints");
    if (!list || !list->is_array()) {
      diags_.Error(r.PathOf("constraints"), "is required (a list of placement constraints)");
    } else {
      for (size_t i = 0; i < list->size(); ++i) {
        ObjectReader cr((*list)[i], IndexPath(r.PathOf("constraints"), i), diags_);
        cr.String("name");
        ParseEnum(cr, "type", kPlacementTypes, true);
        ParseEnum(cr, "scope", kPlacementScopes, true);
        cr.StringList("target_tags");
        cr.Get("node_attributes");
        cr.StringList("node_partitions");
        auto lo = cr.Int("min_cardinality", 0, kMaxContainersPerComponent);
        auto hi = cr.Int("max_cardinality", 0, kMaxContainersPerComponent);
        if (lo && hi && *lo > *hi) {
          diags_.Error(cr.PathOf("min_cardinality"), "is above max_cardinality");
        }
        cr.Finish();
      }
    }
    r.Finish();
    diags_.Error(path,
                 "not supported yet (tarn's scheduler does not place by affinity or "
                 "anti-affinity; leave placement_policy out)");
  }

  Component ParseComponent(const json& value, const std::string& path, const Assembly& service) {
    Component c;
    ObjectReader r(value, path, diags_);
    if (!r.valid()) {
      if (value.is_null()) diags_.Error(path, "expected a component object, found null");
      return c;
    }
    if (auto v = r.String("name", true)) c.name = *v;
    if (auto n = r.Int("number_of_containers", 0, kMaxContainersPerComponent, true)) {
      c.number_of_containers = *n;
    }
    auto own_artifact = ParseArtifact(r.Get("artifact"), r.PathOf("artifact"));
    c.artifact = own_artifact ? own_artifact : service.artifact;
    if (auto v = r.String("launch_command")) c.launch_command = *v;
    Resource own = ParseResource(r.Get("resource"), r.PathOf("resource"));
    c.resource.cpus = own.cpus ? own.cpus : service.resource.cpus;
    c.resource.memory_mib = own.memory_mib ? own.memory_mib : service.resource.memory_mib;
    c.resource.gpus = own.gpus ? own.gpus : service.resource.gpus;
    Configuration conf =
        ParseConfiguration(r.Get("configuration"), r.PathOf("configuration"), options_, diags_);
    CheckProperties(conf.properties, ChildPath(r.PathOf("configuration"), "properties"), false,
                    diags_);
    c.configuration = MergeConfiguration(service.configuration, conf);
    TarnComponentProperties tarn = ReadTarnProperties(c.configuration.properties);
    c.tf_role = tarn.role;
    c.tf_port = tarn.tf_port;
    c.ports = std::move(tarn.ports);
    c.public_ports = std::move(tarn.public_ports);
    c.stop_grace_secs = tarn.stop_grace_secs;
    c.upgrade_max_unavailable = tarn.upgrade_max_unavailable;
    c.upgrade_deadline_secs = tarn.upgrade_deadline_secs;
    c.upgrade_deregistration_delay_ms = tarn.upgrade_deregistration_delay_ms;
    c.autoscale = ReadAutoscale(c.configuration.properties, c, path, diags_);
    for (const std::string& name : c.public_ports) {
      std::string known;
      bool found = false;
      for (const NamedPort& p : DeclaredPorts(c)) {
        known += (known.empty() ? "" : ", ") + p.name;
        found |= p.name == name;
      }
      if (!found) {
        diags_.Error(
            ChildPath(ChildPath(r.PathOf("configuration"), "properties"), "tarn.ports.public"),
            "\"" + name + "\" is none of this component's ports (" +
                (known.empty() ? "it declares none in tarn.ports" : known) + ")");
      }
    }
    if (auto deps = r.StringList("dependencies")) c.dependencies = std::move(*deps);
    if (auto p = ParseEnum(r, "restart_policy", kRestartPolicies, false)) c.restart_policy = *p;
    c.readiness_check = ParseReadiness(r.Get("readiness_check"), r.PathOf("readiness_check"));
    if (auto b = r.Bool("run_privileged_container")) c.run_privileged_container = *b;
    ParsePlacementPolicy(r.Get("placement_policy"), r.PathOf("placement_policy"));
    if (auto q = r.StringList("quicklinks")) c.quicklinks = std::move(*q);
    r.NotSupported("decommissioned_instances", "flex the component down instead");
    r.OutputOnly("containers");
    r.OutputOnly("state");
    r.Finish();
    return c;
  }

  const ParseOptions& options_;
  Diagnostics& diags_;
};

ParseResult Finish(Assembly assembly, Diagnostics& diags, const ParseOptions& options) {
  ValidateAssembly(assembly, options, diags);
  ParseResult result;
  result.diagnostics = diags.items();
  if (!diags.has_errors()) result.assembly = std::move(assembly);
  return result;
}

}  // namespace

ParseResult ParseAssemblyJson(const json& value, const ParseOptions& options) {
  Diagnostics diags;
  Parser parser(options, diags);
  Assembly assembly = parser.ParseService(value);
  return Finish(std::move(assembly), diags, options);
}

ParseResult ParseAssembly(std::string_view text, DocumentFormat format,
                          const ParseOptions& options) {
  Diagnostics diags;
  json value = ParseDocument(text, format, diags);
  if (value.is_discarded()) {
    ParseResult result;
    result.diagnostics = diags.items();
    return result;
  }
  Parser parser(options, diags);
  Assembly assembly = parser.ParseService(value);
  return Finish(std::move(assembly), diags, options);
}

ParseResult LoadAssemblyFile(const std::string& path, ParseOptions options) {
  auto text = ReadFileToString(path, 16u << 20);
  if (!text.ok()) {
    ParseResult result;
    std::string message = text.status().message();
    if (message.rfind(path + ": ", 0) == 0) message = message.substr(path.size() + 2);
    result.diagnostics.push_back({Severity::kError, "", message});
    return result;
  }
  size_t slash = path.rfind('/');
  options.base_dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  if (!options.read_file) {
    options.read_file = [](const std::string& p) {
      return ReadFileToString(p, kMaxInlineFileBytes);
    };
  }
  return ParseAssembly(*text, FormatFromFileName(path), options);
}

}  // namespace tarn::spec
