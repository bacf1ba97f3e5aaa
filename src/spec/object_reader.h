// ObjectReader: reads the fields of one JSON object of an assembly file, reporting every
// wrong type, every missing required field and, at Finish(), every field nobody asked for.
//
// Usage: construct on a value, call the typed getters (each marks its key as known), call
// Finish() last. Getters coerce as YARN's JSON binding (Jackson) does: a number written as a
// string ("3600") is accepted where a number is expected, and a number where a string is.
// Not thread-safe; short-lived, one per object.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "spec/diagnostics.h"

namespace tarn::spec {

class ObjectReader {
 public:
  // Reports an error when `value` is present but not an object; the reader is then empty.
  ObjectReader(const nlohmann::json& value, std::string path, Diagnostics& diags);

  bool valid() const { return object_ != nullptr; }
  const std::string& path() const { return path_; }
  std::string PathOf(std::string_view key) const { return ChildPath(path_, key); }
  bool Has(std::string_view key) const;

  // The raw value, nullptr when absent or JSON null. Marks the key as known.
  const nlohmann::json* Get(std::string_view key);

  std::optional<std::string> String(std::string_view key, bool required = false);
  std::optional<int64_t> Int(std::string_view key, int64_t min, int64_t max, bool required = false);
  std::optional<bool> Bool(std::string_view key);
  std::optional<std::vector<std::string>> StringList(std::string_view key);
  // An object whose values are strings (numbers and booleans are turned into their text, as
  // YARN does for properties and env).
  std::optional<std::map<std::string, std::string>> StringMap(std::string_view key);

  // A YARN field tarn recognises but does not implement: an error when present.
  void NotSupported(std::string_view key, std::string_view why);
  // A field YARN only returns in responses: an error when present on input.
  void OutputOnly(std::string_view key);

  // Reports every key that no getter asked for, suggesting the nearest known name.
  void Finish();

  Diagnostics& diags() { return diags_; }

 private:
  const nlohmann::json* object_ = nullptr;
  std::string path_;
  Diagnostics& diags_;
  std::set<std::string, std::less<>> known_;
};

// Parses "true"/"false" and JSON booleans; nullopt otherwise.
std::optional<bool> AsBool(const nlohmann::json& v);
// The text of a string, integer, or boolean value; nullopt for other types.
std::optional<std::string> AsText(const nlohmann::json& v);
// Levenshtein distance, for "did you mean" hints.
size_t EditDistance(std::string_view a, std::string_view b);
// Short type name for messages: "a string", "an object", ...
std::string TypeName(const nlohmann::json& v);

}  // namespace tarn::spec
