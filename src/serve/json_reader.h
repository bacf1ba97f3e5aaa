// JsonReader: a strict RFC 8259 parser for the bodies of prediction requests, about ten
// times faster than nlohmann::json's on their typical content (hundreds of numbers per
// example): numbers go through std::from_chars after their grammar is checked, and nothing
// is read through an input adapter one character at a time. The result is a read-only tree
// with the few accessors the request codec needs, named as nlohmann's are.
//
// Strings must be valid UTF-8 (escapes, surrogate pairs included), so that anything taken
// from a request can be written back into a response as JSON. Nesting deeper than
// kMaxJsonDepth is an error rather than a deep recursion. Of duplicate keys, the last wins
// (as in nlohmann::json). Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tarn::serve {

inline constexpr int kMaxJsonDepth = 64;

class Json {
 public:
  enum class Type { kNull, kBool, kInteger, kFloat, kString, kArray, kObject };

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_boolean() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kInteger || type_ == Type::kFloat; }
  bool is_number_integer() const { return type_ == Type::kInteger; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool boolean() const { return integer_ != 0; }
  int64_t integer() const { return integer_; }
  // Any number as a double (integers convert).
  double number() const { return type_ == Type::kInteger ? static_cast<double>(integer_) : float_; }
  const std::string& str() const { return string_; }

  // Arrays and objects: their elements (an object's in document order).
  size_t size() const { return type_ == Type::kObject ? members_.size() : elements_.size(); }
  bool empty() const { return size() == 0; }
  const Json& operator[](size_t i) const { return elements_[i]; }
  const std::vector<Json>& elements() const { return elements_; }
  const std::vector<std::pair<std::string, Json>>& members() const { return members_; }

  // An object's member, or nullptr (also for non-objects). The last of duplicates wins.
  const Json* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  // Compact JSON text of this value, for error messages and tests.
  std::string dump() const;

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  int64_t integer_ = 0;
  double float_ = 0;
  std::string string_;
  std::vector<Json> elements_;
  std::vector<std::pair<std::string, Json>> members_;
};

// The whole of `text` as one JSON value; InvalidArgument naming the byte offset otherwise.
StatusOr<Json> ParseJson(std::string_view text);

}  // namespace tarn::serve
