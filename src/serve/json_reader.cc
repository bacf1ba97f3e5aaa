#include "serve/json_reader.h"

#include <nlohmann/json.hpp>

namespace tarn::serve {
namespace {

// Bodies up to this size reuse their thread's parser; a larger one gets a parser of its own
// for that parse, so that one big body does not leave every HTTP thread holding buffers
// its size (simdjson's parser keeps the largest capacity it has seen).
constexpr size_t kReusedParserBytes = 1 << 20;

simdjson::dom::parser& ThreadParser() {
  thread_local simdjson::dom::parser parser = [] {
    simdjson::dom::parser p;
    // Without the memory now, the first parse allocates it (and says so if it cannot).
    const simdjson::error_code reserved = p.allocate(kReusedParserBytes, kMaxJsonDepth);
    (void)reserved;
    return p;
  }();
  return parser;
}

// Reads nothing into memory: only where nlohmann's parser stops, and why.
class ErrorLocator : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& e) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
    std::string what = e.what();
    const size_t colon = what.find(": ");
    message = "not valid JSON at byte " + std::to_string(byte) + ": " +
              (colon == std::string::npos ? what : what.substr(colon + 2));
    return false;
  }
  std::string message;
};

// Why `text` is not JSON: too deep, else with the byte where nlohmann's parser stops, else
// (where nlohmann accepts what simdjson refuses: a number beyond uint64) simdjson's words.
Status SyntaxError(std::string_view text, simdjson::error_code code) {
  if (code == simdjson::DEPTH_ERROR) {
    return InvalidArgumentError("not valid JSON: nested too deeply (more than " +
                                std::to_string(kMaxJsonDepth) + " levels)");
  }
  ErrorLocator locator;
  nlohmann::json::sax_parse(text, &locator, nlohmann::json::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/false);
  if (!locator.message.empty()) return InvalidArgumentError(locator.message);
  return InvalidArgumentError(std::string("not valid JSON: ") + simdjson::error_message(code));
}

}  // namespace

Json::Type Json::type() const {
  switch (e_.type()) {
    case simdjson::dom::element_type::ARRAY:
      return Type::kArray;
    case simdjson::dom::element_type::OBJECT:
      return Type::kObject;
    case simdjson::dom::element_type::INT64:
      return Type::kInteger;
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE:
      return Type::kFloat;
    case simdjson::dom::element_type::STRING:
      return Type::kString;
    case simdjson::dom::element_type::BOOL:
      return Type::kBool;
    case simdjson::dom::element_type::NULL_VALUE:
      return Type::kNull;
  }
  return Type::kNull;
}

double Json::number() const {
  double d = 0;
  if (e_.is_number() && e_.get_double().get(d) != simdjson::SUCCESS) d = 0;  // ints convert
  return d;
}

size_t Json::size() const {
  if (e_.is_array()) return e_.get_array().value_unsafe().size();
  if (e_.is_object()) return e_.get_object().value_unsafe().size();
  return 0;
}

Json::Elements Json::elements() const {
  if (!e_.is_array()) return Elements(std::nullopt);
  return Elements(e_.get_array().value_unsafe());
}

Json::Members Json::members() const {
  if (!e_.is_object()) return Members(std::nullopt);
  return Members(e_.get_object().value_unsafe());
}

std::optional<Json> Json::find(std::string_view key) const {
  if (!e_.is_object()) return std::nullopt;
  std::optional<Json> found;
  // A copy: value_unsafe() of the temporary result is a reference into it, which a range-for
  // would keep past its end (C++20 extends no temporaries there).
  const simdjson::dom::object object = e_.get_object().value_unsafe();
  for (auto [k, v] : object) {
    if (k == key) found = Json(v);
  }
  return found;
}

std::string Json::dump() const { return simdjson::minify(e_); }

StatusOr<JsonDocument> ParseJson(std::string_view text) {
  JsonDocument d;
  simdjson::dom::parser* parser = &ThreadParser();
  simdjson::dom::parser own;
  if (text.size() > kReusedParserBytes) {
    if (own.allocate(text.size(), kMaxJsonDepth) != simdjson::SUCCESS) {
      return ResourceExhaustedError("no memory to read a JSON body of " +
                                    std::to_string(text.size()) + " bytes");
    }
    parser = &own;
  }
  simdjson::dom::element root;
  // The text is copied into a padded buffer (simdjson reads up to 64 bytes past its end).
  const simdjson::error_code code =
      parser->parse_into_document(d.doc_, text.data(), text.size()).get(root);
  if (code != simdjson::SUCCESS) return SyntaxError(text, code);
  return d;
}

}  // namespace tarn::serve
