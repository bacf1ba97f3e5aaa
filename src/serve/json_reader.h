// The JSON of prediction request bodies, read by simdjson (Debian's libsimdjson-dev): its
// DOM parser checks the whole text (RFC 8259; strings valid UTF-8, escapes and surrogate
// pairs included) with the SIMD kernel chosen at run time for the CPU, about 3x faster than
// the reader tarn had before on these bodies (bench/run json). Json is the read-only view
// the request codec walks, with accessors named as nlohmann's are.
//
// Differences from nlohmann::json, on purpose: nesting deeper than kMaxJsonDepth is an
// error rather than a deep tree; integers beyond uint64 are an error (nlohmann reads them as
// doubles); of duplicate keys, find gives the last (as nlohmann keeps). A syntax error
// names its byte offset (found by nlohmann's parser, on the error path only). Thread-safe.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace tarn::serve {

inline constexpr int kMaxJsonDepth = 64;

// A value inside a JsonDocument; valid while the document lives.
class Json {
 public:
  enum class Type { kNull, kBool, kInteger, kFloat, kString, kArray, kObject };

  explicit Json(simdjson::dom::element e) : e_(e) {}

  Type type() const;
  bool is_null() const { return e_.is_null(); }
  bool is_boolean() const { return e_.is_bool(); }
  bool is_number() const { return e_.is_number(); }
  bool is_number_integer() const { return e_.is_int64(); }  // uint64 beyond int64: a float
  bool is_string() const { return e_.is_string(); }
  bool is_array() const { return e_.is_array(); }
  bool is_object() const { return e_.is_object(); }

  // Each requires the type it reads (0, false or empty otherwise).
  bool boolean() const { return e_.get_bool().value_unsafe(); }
  int64_t integer() const { return is_number_integer() ? e_.get_int64().value_unsafe() : 0; }
  double number() const;  // any number as a double
  std::string_view str() const { return is_string() ? e_.get_string().value_unsafe() : ""; }

  // Arrays and objects: how many elements or members; others 0.
  size_t size() const;
  bool empty() const { return size() == 0; }

  // An array's elements, in order (none for others).
  class Elements {
   public:
    class iterator {
     public:
      explicit iterator(std::optional<simdjson::dom::array::iterator> it) : it_(it) {}
      Json operator*() const { return Json(**it_); }
      iterator& operator++() {
        ++*it_;
        return *this;
      }
      bool operator!=(const iterator& o) const { return it_ && o.it_ && *it_ != *o.it_; }

     private:
      std::optional<simdjson::dom::array::iterator> it_;  // none: not an array
    };
    explicit Elements(std::optional<simdjson::dom::array> a) : a_(a) {}
    iterator begin() const { return iterator(a_ ? std::optional(a_->begin()) : std::nullopt); }
    iterator end() const { return iterator(a_ ? std::optional(a_->end()) : std::nullopt); }

   private:
    std::optional<simdjson::dom::array> a_;
  };
  Elements elements() const;

  // An object's members, in document order (none for others).
  class Members {
   public:
    class iterator {
     public:
      explicit iterator(std::optional<simdjson::dom::object::iterator> it) : it_(it) {}
      std::pair<std::string_view, Json> operator*() const {
        return {it_->key(), Json(it_->value())};
      }
      iterator& operator++() {
        ++*it_;
        return *this;
      }
      bool operator!=(const iterator& o) const { return it_ && o.it_ && *it_ != *o.it_; }

     private:
      std::optional<simdjson::dom::object::iterator> it_;  // none: not an object
    };
    explicit Members(std::optional<simdjson::dom::object> o) : o_(o) {}
    iterator begin() const { return iterator(o_ ? std::optional(o_->begin()) : std::nullopt); }
    iterator end() const { return iterator(o_ ? std::optional(o_->end()) : std::nullopt); }

   private:
    std::optional<simdjson::dom::object> o_;
  };
  Members members() const;

  // An object's member (the last of duplicates); nullopt for none and for non-objects.
  std::optional<Json> find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key).has_value(); }

  // Compact JSON text of this value, for error messages and tests.
  std::string dump() const;

 private:
  simdjson::dom::element e_;
};

// The whole of a text as one JSON value, owning what its Json views point into.
class JsonDocument {
 public:
  Json root() const { return Json(doc_.root()); }

 private:
  friend StatusOr<JsonDocument> ParseJson(std::string_view text);
  simdjson::dom::document doc_;
};

// InvalidArgument "not valid JSON at byte N: ..." (or without the byte, where only simdjson
// refuses: too deep, a number beyond uint64) when `text` is not one JSON value.
StatusOr<JsonDocument> ParseJson(std::string_view text);

}  // namespace tarn::serve
