// Reads the text of an assembly file, JSON or YAML, into one JSON value.
//
// YAML is converted with the YAML 1.2 core schema (plain `3` is a number, `"3"` a string,
// `true` a boolean), so the same rules validate both syntaxes. Duplicate keys, several YAML
// documents in one file, nesting past kMaxDepth and YAML alias expansion past kMaxNodes are
// errors. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "spec/diagnostics.h"

namespace tarn::spec {

enum class DocumentFormat { kAuto, kJson, kYaml };

inline constexpr int kMaxDepth = 64;
inline constexpr size_t kMaxNodes = 200000;

// kJson for *.json, kYaml for *.yaml / *.yml, else kAuto.
DocumentFormat FormatFromFileName(std::string_view file_name);

// Parses `text`. On a syntax error adds one diagnostic with line and column and returns a
// discarded value (is_discarded() true). kAuto picks JSON when the first non-blank character
// is '{' or '[', else YAML.
nlohmann::json ParseDocument(std::string_view text, DocumentFormat format, Diagnostics& diags);

}  // namespace tarn::spec
