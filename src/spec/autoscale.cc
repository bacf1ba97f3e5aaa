#include "spec/autoscale.h"

#include <array>
#include <string_view>

#include "common/number.h"
#include "spec/diagnostics.h"

namespace tarn::spec {

namespace {

constexpr std::string_view kPrefix = "tarn.autoscale.";

// One key: whole seconds or counts (integers) or a real number, within [min, max].
struct AutoscaleKey {
  std::string_view name;  // after the prefix
  bool integer;
  double min;
  double max;
  std::string_view what;  // for the error: "<value> is not <what>"
};

constexpr std::array<AutoscaleKey, 8> kKeys = {{
    {"min", true, 1, 10000, "a replica count from 1 to 10000"},
    {"max", true, 1, 10000, "a replica count from 1 to 10000"},
    {"target_in_flight", false, 0.01, 10000,
     "a number of requests in flight per replica from 0.01 to 10000"},
    {"tolerance", false, 0, 0.99, "a tolerance from 0 to 0.99 (0.1: 10%)"},
    {"stable_window_secs", true, 1, 3600, "a window of whole seconds from 1 to 3600"},
    {"panic_window_secs", true, 1, 3600, "a window of whole seconds from 1 to 3600"},
    {"panic_threshold", false, 1.01, 100,
     "a ratio of wanted to current replicas from 1.01 to 100 (2: 200%)"},
    {"scale_down_delay_secs", true, 0, 3600, "whole seconds from 0 to 3600"},
}};

const AutoscaleKey* FindKey(std::string_view name) {
  for (const AutoscaleKey& k : kKeys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// The value of a key CheckAutoscaleProperty accepted.
std::optional<double> ValueOf(const AutoscaleKey& k, const std::string& value) {
  std::optional<double> v;
  if (k.integer) {
    if (std::optional<int64_t> i = ParseInt64(value)) v = static_cast<double>(*i);
  } else {
    v = ParseFiniteDouble(value);
  }
  if (!v || *v < k.min || *v > k.max) return std::nullopt;
  return v;
}

std::string KnownKeys() {
  std::string out;
  for (const AutoscaleKey& k : kKeys) {
    out += (out.empty() ? "" : ", ") + std::string(kPrefix) + std::string(k.name);
  }
  return out;
}

}  // namespace

bool IsAutoscaleKey(const std::string& key) { return key.rfind(kPrefix, 0) == 0; }

void CheckAutoscaleProperty(const std::string& key, const std::string& value,
                            const std::string& path, bool service_level, Diagnostics& diags) {
  const AutoscaleKey* k = FindKey(std::string_view(key).substr(kPrefix.size()));
  if (k == nullptr) {
    diags.Error(path, "unknown autoscaling property; tarn knows " + KnownKeys());
    return;
  }
  if (service_level) {
    diags.Error(path, "belongs on a component (each serving component scales on its own load)");
    return;
  }
  if (!ValueOf(*k, value)) diags.Error(path, Quote(value) + " is not " + std::string(k->what));
}

std::optional<Autoscale> ReadAutoscale(const std::map<std::string, std::string>& merged,
                                       const Component& component,
                                       const std::string& component_path, Diagnostics& diags) {
  const std::string properties_path =
      ChildPath(ChildPath(component_path, "configuration"), "properties");
  Autoscale a;
  bool any = false, has_max = false, has_min = false;
  for (auto it = merged.lower_bound(std::string(kPrefix));
       it != merged.end() && IsAutoscaleKey(it->first); ++it) {
    const AutoscaleKey* k = FindKey(std::string_view(it->first).substr(kPrefix.size()));
    if (k == nullptr) continue;
    any = true;
    std::optional<double> v = ValueOf(*k, it->second);
    if (!v) continue;  // CheckAutoscaleProperty said why
    if (k->name == "min") a.min = static_cast<int64_t>(*v), has_min = true;
    if (k->name == "max") a.max = static_cast<int64_t>(*v), has_max = true;
    if (k->name == "target_in_flight") a.target_in_flight = *v;
    if (k->name == "tolerance") a.tolerance = *v;
    if (k->name == "stable_window_secs") a.stable_window_secs = static_cast<int64_t>(*v);
    if (k->name == "panic_window_secs") a.panic_window_secs = static_cast<int64_t>(*v);
    if (k->name == "panic_threshold") a.panic_threshold = *v;
    if (k->name == "scale_down_delay_secs") a.scale_down_delay_secs = static_cast<int64_t>(*v);
  }
  if (!any) return std::nullopt;
  const std::string at = ChildPath(properties_path, "tarn.autoscale.max");
  if (!has_max) {
    diags.Error(at,
                "is required with the other tarn.autoscale properties (the most replicas "
                "the component may grow to)");
    return std::nullopt;
  }
  if (a.min > a.max) {
    diags.Error(at, std::to_string(a.max) + " is below tarn.autoscale.min " +
                        std::to_string(a.min) + (has_min ? "" : " (its default)"));
    return std::nullopt;
  }
  if (a.panic_window_secs > a.stable_window_secs) {
    diags.Error(ChildPath(properties_path, "tarn.autoscale.panic_window_secs"),
                std::to_string(a.panic_window_secs) + " s is longer than the stable window (" +
                    std::to_string(a.stable_window_secs) + " s); Knative's is a tenth of it");
    return std::nullopt;
  }
  if (component.tf_role != TfRole::kNone) {
    diags.Error(at,
                "a TensorFlow cluster (tarn.tf.role) has a fixed size; autoscaling is for "
                "serving components");
    return std::nullopt;
  }
  if (component.number_of_containers < a.min || component.number_of_containers > a.max) {
    diags.Error(ChildPath(component_path, "number_of_containers"),
                std::to_string(component.number_of_containers) +
                    " (the count it starts with) is outside tarn.autoscale.min..max (" +
                    std::to_string(a.min) + ".." + std::to_string(a.max) + ")");
    return std::nullopt;
  }
  return a;
}

}  // namespace tarn::spec
