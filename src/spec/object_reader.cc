#include "spec/object_reader.h"

#include <algorithm>
#include <vector>

#include "common/number.h"

namespace tarn::spec {

using json = nlohmann::json;

std::string TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "a list";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a decimal number";
    default:
      return "an unknown value";
  }
}

std::optional<bool> AsBool(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "true") return true;
    if (s == "false") return false;
  }
  return std::nullopt;
}

std::optional<std::string> AsText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return std::nullopt;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

ObjectReader::ObjectReader(const json& value, std::string path, Diagnostics& diags)
    : path_(std::move(path)), diags_(diags) {
  if (value.is_object()) {
    object_ = &value;
  } else if (!value.is_null()) {
    diags_.Error(path_, "expected an object, found " + TypeName(value));
  }
}

bool ObjectReader::Has(std::string_view key) const {
  if (!object_) return false;
  auto it = object_->find(key);
  return it != object_->end() && !it->is_null();
}

const json* ObjectReader::Get(std::string_view key) {
  known_.emplace(key);
  if (!object_) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> ObjectReader::String(std::string_view key, bool required) {
  const json* v = Get(key);
  if (!v) {
    if (required && object_) diags_.Error(PathOf(key), "is required");
    return std::nullopt;
  }
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_integer() || v->is_number_unsigned()) return AsText(*v);
  diags_.Error(PathOf(key), "expected a string, found " + TypeName(*v));
  return std::nullopt;
}

std::optional<int64_t> ObjectReader::Int(std::string_view key, int64_t min, int64_t max,
                                         bool required) {
  const json* v = Get(key);
  if (!v) {
    if (required && object_) diags_.Error(PathOf(key), "is required");
    return std::nullopt;
  }
  std::optional<int64_t> n;
  if (v->is_number_integer()) {
    n = v->get<int64_t>();
  } else if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) n = static_cast<int64_t>(u);
  } else if (v->is_string()) {
    n = ParseInt64(v->get_ref<const std::string&>());
  }
  if (!n) {
    std::string shown = v->is_string() ? Quote(v->get<std::string>()) : TypeName(*v);
    diags_.Error(PathOf(key), "expected a whole number from " + std::to_string(min) + " to " +
                                  std::to_string(max) + ", found " + shown);
    return std::nullopt;
  }
  if (*n < min || *n > max) {
    diags_.Error(PathOf(key), std::to_string(*n) + " is out of range (" + std::to_string(min) +
                                  " to " + std::to_string(max) + ")");
    return std::nullopt;
  }
  return n;
}

std::optional<bool> ObjectReader::Bool(std::string_view key) {
  const json* v = Get(key);
  if (!v) return std::nullopt;
  auto b = AsBool(*v);
  if (!b) diags_.Error(PathOf(key), "expected true or false, found " + TypeName(*v));
  return b;
}

std::optional<std::vector<std::string>> ObjectReader::StringList(std::string_view key) {
  const json* v = Get(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) {
    diags_.Error(PathOf(key), "expected a list of strings, found " + TypeName(*v));
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    if (item.is_string()) {
      out.push_back(item.get<std::string>());
    } else {
      diags_.Error(IndexPath(PathOf(key), i), "expected a string, found " + TypeName(item));
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::map<std::string, std::string>> ObjectReader::StringMap(std::string_view key) {
  const json* v = Get(key);
  if (!v) return std::nullopt;
  if (!v->is_object()) {
    diags_.Error(PathOf(key), "expected an object of names to values, found " + TypeName(*v));
    return std::nullopt;
  }
  std::map<std::string, std::string> out;
  bool ok = true;
  for (auto it = v->begin(); it != v->end(); ++it) {
    auto text = AsText(it.value());
    if (!text) {
      diags_.Error(ChildPath(PathOf(key), it.key()),
                   "expected a string, number or boolean, found " + TypeName(it.value()));
      ok = false;
      continue;
    }
    out.emplace(it.key(), std::move(*text));
  }
  if (!ok) return std::nullopt;
  return out;
}

void ObjectReader::NotSupported(std::string_view key, std::string_view why) {
  if (Get(key)) {
    std::string m = "not supported yet";
    if (!why.empty()) {
      m += " (";
      m += why;
      m += ")";
    }
    diags_.Error(PathOf(key), std::move(m));
  }
}

void ObjectReader::OutputOnly(std::string_view key) {
  if (Get(key)) {
    diags_.Error(PathOf(key),
                 "is set by tarn in responses and must not be given in an assembly file");
  }
}

void ObjectReader::Finish() {
  if (!object_) return;
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    if (known_.count(it.key())) continue;
    std::string best;
    size_t best_d = 3;  // suggest only close matches
    for (const std::string& k : known_) {
      size_t d = EditDistance(it.key(), k);
      if (d < best_d) {
        best_d = d;
        best = k;
      }
    }
    std::string m = "unknown field";
    if (!best.empty()) m += " (did you mean " + Quote(best) + "?)";
    diags_.Error(PathOf(it.key()), std::move(m));
  }
}

}  // namespace tarn::spec
