#include "serve/serve_config.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

namespace tarn::serve {
namespace {

using nlohmann::json;

// "base_path" -> "basePath", protobuf's JSON name for the field.
std::string CamelCase(const std::string& name) {
  std::string out;
  bool upper = false;
  for (char c : name) {
    if (c == '_') {
      upper = true;
    } else {
      out.push_back(upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c);
      upper = false;
    }
  }
  return out;
}

// The member `name` (or its camelCase form), or nullptr.
const json* Field(const json& object, const std::string& name) {
  auto it = object.find(name);
  if (it == object.end()) it = object.find(CamelCase(name));
  return it == object.end() ? nullptr : &*it;
}

// Members the message does not define are errors, as a typo in a config is.
Status CheckFields(const json& object, const std::vector<std::string>& known,
                   const std::string& where) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool ok = false;
    for (const std::string& k : known) ok = ok || it.key() == k || it.key() == CamelCase(k);
    if (!ok) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      return InvalidArgumentError(where + ": unknown field \"" + it.key() + "\" (known: " + list +
                                  ")");
    }
  }
  return OkStatus();
}

// An int64 written as a number, a string of digits (protobuf's JSON form of int64), or
// {"value": N} (a wrapper type).
StatusOr<int64_t> Integer(const json& v, const std::string& where) {
  if (v.is_object() && v.size() == 1 && v.contains("value")) return Integer(v["value"], where);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && s.size() <= 18 &&
        std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return static_cast<int64_t>(std::stoll(s));
    }
  }
  return InvalidArgumentError(where + ": " + v.dump() + " is not an integer");
}

StatusOr<json> ParseObject(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(source + ": not valid JSON");
  if (!j.is_object()) return InvalidArgumentError(source + ": not a JSON object");
  return j;
}

StatusOr<VersionPolicy> ParsePolicy(const json& v, const std::string& where) {
  if (!v.is_object() || v.size() != 1) {
    return InvalidArgumentError(where +
                                ": must be one of {\"latest\": {\"num_versions\": N}}, "
                                "{\"all\": {}}, {\"specific\": {\"versions\": [...]}}");
  }
  VersionPolicy p;
  const std::string kind = v.begin().key();
  const json& body = v.begin().value();
  if (!body.is_object()) return InvalidArgumentError(where + "." + kind + ": not an object");
  if (kind == "latest") {
    RETURN_IF_ERROR(CheckFields(body, {"num_versions"}, where + ".latest"));
    p.kind = VersionPolicy::Kind::kLatest;
    if (const json* n = Field(body, "num_versions")) {
      ASSIGN_OR_RETURN(p.num_versions, Integer(*n, where + ".latest.num_versions"));
      if (p.num_versions < 1 || p.num_versions > 1000) {
        return InvalidArgumentError(where + ".latest.num_versions: " +
                                    std::to_string(p.num_versions) + " is not in [1, 1000]");
      }
    }
  } else if (kind == "all") {
    RETURN_IF_ERROR(CheckFields(body, {}, where + ".all"));
    p.kind = VersionPolicy::Kind::kAll;
  } else if (kind == "specific") {
    RETURN_IF_ERROR(CheckFields(body, {"versions"}, where + ".specific"));
    p.kind = VersionPolicy::Kind::kSpecific;
    const json* list = Field(body, "versions");
    if (list == nullptr || !list->is_array() || list->empty()) {
      return InvalidArgumentError(where + ".specific.versions: must be a non-empty list");
    }
    std::set<int64_t> versions;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string at = where + ".specific.versions[" + std::to_string(i) + "]";
      ASSIGN_OR_RETURN(int64_t version, Integer((*list)[i], at));
      if (version < 0) return InvalidArgumentError(at + ": a version is not negative");
      versions.insert(version);
    }
    p.versions.assign(versions.begin(), versions.end());
  } else {
    return InvalidArgumentError(where + ": unknown policy \"" + kind +
                                "\" (use latest, all or specific)");
  }
  return p;
}

StatusOr<CanaryPolicy> ParseCanary(const json& v, const std::string& where) {
  if (!v.is_object()) return InvalidArgumentError(where + ": not an object");
  RETURN_IF_ERROR(CheckFields(
      v,
      {"traffic_percent", "max_accuracy_drop", "promote_after_requests", "promote_after_seconds"},
      where));
  CanaryPolicy c;
  const struct {
    const char* name;
    int64_t* field;
    int64_t low, high;
  } limits[] = {{"traffic_percent", &c.traffic_percent, 1, 99},
                {"promote_after_requests", &c.promote_after_requests, 1, 1'000'000'000},
                {"promote_after_seconds", &c.promote_after_seconds, 0, 30 * 86400}};
  for (const auto& l : limits) {
    const json* f = Field(v, l.name);
    if (f == nullptr) continue;
    const std::string at = where + "." + l.name;
    ASSIGN_OR_RETURN(*l.field, Integer(*f, at));
    if (*l.field < l.low || *l.field > l.high) {
      return InvalidArgumentError(at + ": " + std::to_string(*l.field) + " is not in [" +
                                  std::to_string(l.low) + ", " + std::to_string(l.high) + "]");
    }
  }
  if (const json* f = Field(v, "max_accuracy_drop")) {
    if (!f->is_number() || f->get<double>() < 0 || f->get<double>() > 1) {
      return InvalidArgumentError(where + ".max_accuracy_drop: " + f->dump() +
                                  " is not an accuracy difference in [0, 1] (0.01: one point)");
    }
    c.max_accuracy_drop = f->get<double>();
  }
  return c;
}

StatusOr<ModelConfig> ParseModel(const json& v, const std::string& where) {
  if (!v.is_object()) return InvalidArgumentError(where + ": not an object");
  RETURN_IF_ERROR(CheckFields(
      v,
      {"name", "base_path", "model_platform", "model_version_policy", "version_labels", "canary"},
      where));
  ModelConfig m;
  const json* name = Field(v, "name");
  if (name == nullptr || !name->is_string()) {
    return InvalidArgumentError(where + ".name: missing (a string)");
  }
  m.name = name->get<std::string>();
  RETURN_IF_ERROR(CheckModelName(m.name, where + ".name"));
  const json* base = Field(v, "base_path");
  if (base == nullptr || !base->is_string() || base->get<std::string>().empty()) {
    return InvalidArgumentError(where + ".base_path: missing (a directory)");
  }
  m.base_path = base->get<std::string>();
  if (const json* platform = Field(v, "model_platform")) {
    const std::string p = platform->is_string() ? platform->get<std::string>() : "";
    if (p != "pytorch" && p != "torchscript") {
      return InvalidArgumentError(where + ".model_platform: " + platform->dump() +
                                  " is not served here (use \"pytorch\" or \"torchscript\")");
    }
  }
  if (const json* policy = Field(v, "model_version_policy")) {
    ASSIGN_OR_RETURN(m.policy, ParsePolicy(*policy, where + ".model_version_policy"));
  }
  if (const json* labels = Field(v, "version_labels")) {
    if (!labels->is_object()) {
      return InvalidArgumentError(where + ".version_labels: not an object of label: version");
    }
    for (auto it = labels->begin(); it != labels->end(); ++it) {
      const std::string at = where + ".version_labels." + it.key();
      RETURN_IF_ERROR(CheckModelName(it.key(), at));
      ASSIGN_OR_RETURN(int64_t version, Integer(it.value(), at));
      m.labels[it.key()] = version;
    }
  }
  if (const json* canary = Field(v, "canary")) {
    ASSIGN_OR_RETURN(m.canary, ParseCanary(*canary, where + ".canary"));
    if (m.policy.kind != VersionPolicy::Kind::kLatest) {
      return InvalidArgumentError(where +
                                  ".canary: the rollout chooses the versions; leave "
                                  "model_version_policy out (or latest)");
    }
    for (const char* label : {"stable", "canary"}) {
      if (m.labels.count(label)) {
        return InvalidArgumentError(where + ".version_labels." + label +
                                    ": set by the canary rollout, not by hand");
      }
    }
  }
  return m;
}

}  // namespace

Status CheckModelName(const std::string& name, const std::string& where) {
  const bool ok =
      !name.empty() && name.size() <= 128 && name[0] != '.' &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
      });
  if (ok) return OkStatus();
  return InvalidArgumentError(where + ": \"" + name +
                              "\" is not a name (1-128 of A-Z a-z 0-9 _ . -, not starting with .)");
}

StatusOr<std::vector<ModelConfig>> ParseModelConfigList(const std::string& text,
                                                        const std::string& source) {
  ASSIGN_OR_RETURN(json j, ParseObject(text, source));
  RETURN_IF_ERROR(CheckFields(j, {"model_config_list"}, source));
  const json* list = Field(j, "model_config_list");
  if (list == nullptr || !list->is_object()) {
    return InvalidArgumentError(source + ": model_config_list: missing (an object with config)");
  }
  RETURN_IF_ERROR(CheckFields(*list, {"config"}, source + ": model_config_list"));
  const json* configs = Field(*list, "config");
  if (configs == nullptr || !configs->is_array() || configs->empty()) {
    return InvalidArgumentError(source + ": model_config_list.config: must be a non-empty list");
  }
  std::vector<ModelConfig> out;
  std::set<std::string> names;
  for (size_t i = 0; i < configs->size(); ++i) {
    const std::string where = source + ": model_config_list.config[" + std::to_string(i) + "]";
    ASSIGN_OR_RETURN(ModelConfig m, ParseModel((*configs)[i], where));
    if (!names.insert(m.name).second) {
      return InvalidArgumentError(where + ".name: \"" + m.name + "\" is configured twice");
    }
    out.push_back(std::move(m));
  }
  return out;
}

StatusOr<BatchingParameters> ParseBatchingParameters(const std::string& text,
                                                     const std::string& source) {
  ASSIGN_OR_RETURN(json j, ParseObject(text, source));
  RETURN_IF_ERROR(CheckFields(j,
                              {"max_batch_size", "batch_timeout_micros", "num_batch_threads",
                               "max_enqueued_batches", "pad_variable_length_inputs",
                               "allowed_batch_sizes"},
                              source));
  BatchingParameters b;
  struct Limit {
    const char* name;
    int64_t* field;
    int64_t low, high;
  };
  const Limit limits[] = {{"max_batch_size", &b.max_batch_size, 1, 4096},
                          {"batch_timeout_micros", &b.batch_timeout_micros, 0, 10'000'000},
                          {"num_batch_threads", &b.num_batch_threads, 1, 256},
                          {"max_enqueued_batches", &b.max_enqueued_batches, 1, 1'000'000}};
  for (const Limit& l : limits) {
    const json* v = Field(j, l.name);
    if (v == nullptr) continue;
    const std::string at = source + ": " + l.name;
    ASSIGN_OR_RETURN(*l.field, Integer(*v, at));
    if (*l.field < l.low || *l.field > l.high) {
      return InvalidArgumentError(at + ": " + std::to_string(*l.field) + " is not in [" +
                                  std::to_string(l.low) + ", " + std::to_string(l.high) + "]");
    }
  }
  // Inputs here have fixed shapes: padding and a list of batch sizes change nothing, and
  // are accepted so that a TF Serving file loads; anything else in them is still checked.
  if (const json* pad = Field(j, "pad_variable_length_inputs")) {
    const json& v = pad->is_object() && pad->contains("value") ? (*pad)["value"] : *pad;
    if (!v.is_boolean()) {
      return InvalidArgumentError(source + ": pad_variable_length_inputs: not a boolean");
    }
  }
  if (const json* sizes = Field(j, "allowed_batch_sizes")) {
    if (!sizes->is_array()) {
      return InvalidArgumentError(source + ": allowed_batch_sizes: not a list");
    }
    for (size_t i = 0; i < sizes->size(); ++i) {
      RETURN_IF_ERROR(
          Integer((*sizes)[i], source + ": allowed_batch_sizes[" + std::to_string(i) + "]")
              .status());
    }
  }
  return b;
}

std::vector<int64_t> VersionsToServe(const VersionPolicy& policy,
                                     const std::vector<int64_t>& available) {
  std::vector<int64_t> sorted = available;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  switch (policy.kind) {
    case VersionPolicy::Kind::kAll:
      return sorted;
    case VersionPolicy::Kind::kLatest: {
      const size_t keep = std::min(sorted.size(), static_cast<size_t>(policy.num_versions));
      return std::vector<int64_t>(sorted.end() - static_cast<ptrdiff_t>(keep), sorted.end());
    }
    case VersionPolicy::Kind::kSpecific: {
      std::vector<int64_t> out;
      for (int64_t v : sorted) {
        if (std::binary_search(policy.versions.begin(), policy.versions.end(), v)) out.push_back(v);
      }
      return out;
    }
  }
  return {};
}

StatusOr<std::vector<int64_t>> ListVersions(const std::string& base_path) {
  std::error_code ec;
  std::filesystem::directory_iterator it(base_path, ec);
  if (ec) {
    return Status(ec == std::errc::no_such_file_or_directory ? StatusCode::kNotFound
                                                              : StatusCode::kUnavailable,
                  base_path + ": cannot list: " + ec.message());
  }
  std::vector<int64_t> out;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return UnavailableError(base_path + ": cannot list: " + ec.message());
    const std::string name = it->path().filename().string();
    if (name.empty() || name.size() > 18 ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    std::error_code file_ec;
    if (!std::filesystem::is_regular_file(it->path() / "model.pt", file_ec)) continue;
    out.push_back(std::stoll(name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tarn::serve
