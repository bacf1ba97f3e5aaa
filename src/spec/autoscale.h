// The tarn.autoscale.* properties of a component: checking each one where it is written, and
// reading the whole set (with the checks between keys) once the properties are merged. Used
// by the parser; pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "spec/assembly.h"
#include "spec/diagnostics.h"

namespace tarn::spec {

// "tarn.autoscale." and what follows it.
bool IsAutoscaleKey(const std::string& key);

// One tarn.autoscale.* key at `path`: a known key, a value in its range, on a component.
void CheckAutoscaleProperty(const std::string& key, const std::string& value,
                            const std::string& path, bool service_level, Diagnostics& diags);

// The component's autoscaling from its merged properties (each key already checked); none
// when it sets no tarn.autoscale.* key (or they do not hold together). Errors under
// `component_path` ("components[1]") for what only the keys together, or the component, tell: max
// given, min <= max, the panic window within the stable one, number_of_containers (the first count)
// from min to max, no TensorFlow role.
std::optional<Autoscale> ReadAutoscale(const std::map<std::string, std::string>& merged,
                                       const Component& component,
                                       const std::string& component_path, Diagnostics& diags);

}  // namespace tarn::spec
