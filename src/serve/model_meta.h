// ModelMeta: what a version's meta.json says about its model (DESIGN.md's export
// contract): the input shape of one example ([C, H, W]), its dtype, the class labels, and
// the accuracy and step it was exported at. A version without meta.json is served with
// what is known: no input shape check, no labels.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::serve {

struct ModelMeta {
  std::vector<int64_t> input_shape;  // one example, e.g. [1, 28, 28]; empty when unknown
  std::string dtype = "float32";
  std::vector<std::string> labels;  // index -> name; may be empty
  std::optional<double> accuracy;   // the test accuracy it was exported at, when recorded
  nlohmann::json raw = nlohmann::json::object();  // the whole file, for /metadata
};

// `text` is meta.json's content; `source` names it in errors.
StatusOr<ModelMeta> ParseModelMeta(const std::string& text, const std::string& source);

// Reads <version_dir>/meta.json; a missing file is an empty ModelMeta, a bad one an error.
StatusOr<ModelMeta> ReadModelMeta(const std::string& version_dir);

}  // namespace tarn::serve
