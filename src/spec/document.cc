#include "spec/document.h"

#include <yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <vector>

namespace tarn::spec {
namespace {

using json = nlohmann::json;

// Tracks where the JSON parser is so that duplicate keys and depth are reported with a path.
class JsonTracker {
 public:
  explicit JsonTracker(Diagnostics& diags) : diags_(diags) {}

  bool OnEvent(json::parse_event_t event, const json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (stack_.size() >= static_cast<size_t>(kMaxDepth)) {
          if (!too_deep_)
            diags_.Error(Path(), "nested deeper than " + std::to_string(kMaxDepth) + " levels");
          too_deep_ = true;
        }
        stack_.push_back({event == json::parse_event_t::object_start, {}, {}, 0});
        break;
      case json::parse_event_t::key: {
        Frame& top = stack_.back();
        std::string key = parsed.get<std::string>();
        if (!top.keys.insert(key).second) {
          diags_.Error(ChildPath(Path(), key),
                       "duplicate key (JSON objects must not repeat a key; only one value "
                       "would be kept)");
        }
        top.key = std::move(key);
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack_.pop_back();
        ElementDone();
        break;
      case json::parse_event_t::value:
        ElementDone();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    size_t index;
  };

  void ElementDone() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
  }

  // The path of the innermost open container.
  std::string Path() const {
    std::string path;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      path = stack_[i].object ? ChildPath(path, stack_[i].key) : IndexPath(path, stack_[i].index);
    }
    return path;
  }

  Diagnostics& diags_;
  std::vector<Frame> stack_;
  bool too_deep_ = false;
};

json ParseJson(std::string_view text, Diagnostics& diags) {
  Diagnostics structure;
  JsonTracker tracker(structure);
  json::parser_callback_t cb = [&tracker](int, json::parse_event_t event, json& parsed) {
    return tracker.OnEvent(event, parsed);
  };
  json value;
  try {
    value = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true,
                        /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    // parse_error, or out_of_range for a number too large for a double ("1E400"). what() is
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..."; keep the part
    // after the id.
    std::string what = e.what();
    size_t cut = what.find("] ");
    std::string msg = cut == std::string::npos ? what : what.substr(cut + 2);
    diags.Error("", "not valid JSON: " + msg);
    return json(json::value_t::discarded);
  }
  for (const Diagnostic& d : structure.items()) diags.Error(d.path, d.message);
  if (structure.has_errors()) return json(json::value_t::discarded);
  return value;
}

// Resolves a plain YAML scalar with the YAML 1.2 core schema.
json PlainScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const char* begin = s.c_str();
  char* end = nullptr;
  bool digits_only = true;
  for (size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') digits_only = false;
  }
  if (digits_only && s.size() > (s[0] == '-' || s[0] == '+' ? 1u : 0u)) {
    errno = 0;
    long long v = std::strtoll(begin, &end, 10);
    if (errno == 0 && *end == '\0') return v;
    return s;  // out of range: keep the text; the field's own rule will say why
  }
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
    errno = 0;
    long long v = std::strtoll(begin + 2, &end, s[1] == 'x' ? 16 : 8);
    if (errno == 0 && *end == '\0' && end != begin + 2) return v;
    return s;
  }
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == ".nan" || s == ".NaN" || s == ".NAN" ||
      s == "-.inf" || s == "+.inf") {
    return s;  // JSON has no infinities or NaN; keep the text
  }
  bool numeric_chars = true;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+')) {
      numeric_chars = false;
    }
  }
  if (numeric_chars) {
    errno = 0;
    double d = std::strtod(begin, &end);
    if (errno == 0 && *end == '\0' && std::isfinite(d)) return d;
  }
  return s;
}

// Converts a libyaml document graph; aliases point at shared nodes, so the node budget
// also stops "billion laughs" documents.
class YamlConverter {
 public:
  YamlConverter(yaml_document_t* doc, Diagnostics& diags) : doc_(doc), diags_(diags) {}

  json Convert(yaml_node_t* node, const std::string& path, int depth) {
    if (failed_ || node == nullptr) return nullptr;
    if (++nodes_ > kMaxNodes) {
      diags_.Error(path, "more than " + std::to_string(kMaxNodes) +
                             " values (after expanding YAML aliases)");
      failed_ = true;
      return nullptr;
    }
    if (depth > kMaxDepth) {
      diags_.Error(path, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
      failed_ = true;
      return nullptr;
    }
    switch (node->type) {
      case YAML_SCALAR_NODE:
        return Scalar(node, path);
      case YAML_SEQUENCE_NODE: {
        json arr = json::array();
        size_t i = 0;
        for (yaml_node_item_t* it = node->data.sequence.items.start;
             it < node->data.sequence.items.top; ++it) {
          arr.push_back(
              Convert(yaml_document_get_node(doc_, *it), IndexPath(path, i++), depth + 1));
        }
        return arr;
      }
      case YAML_MAPPING_NODE: {
        json obj = json::object();
        for (yaml_node_pair_t* p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
             ++p) {
          yaml_node_t* key = yaml_document_get_node(doc_, p->key);
          if (key == nullptr || key->type != YAML_SCALAR_NODE) {
            diags_.Error(path, "a mapping key must be a plain string, not a list or mapping");
            failed_ = true;
            return nullptr;
          }
          std::string k(reinterpret_cast<const char*>(key->data.scalar.value),
                        key->data.scalar.length);
          std::string child = ChildPath(path, k);
          if (obj.contains(k)) {
            diags_.Error(child,
                         "duplicate key (a mapping must not repeat a key; only one value "
                         "would be kept)");
            continue;
          }
          obj[k] = Convert(yaml_document_get_node(doc_, p->value), child, depth + 1);
        }
        return obj;
      }
      default:
        return nullptr;
    }
  }

 private:
  json Scalar(yaml_node_t* node, const std::string& path) {
    std::string s(reinterpret_cast<const char*>(node->data.scalar.value), node->data.scalar.length);
    std::string tag = node->tag ? reinterpret_cast<const char*>(node->tag) : "";
    const bool plain = node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    // libyaml gives untagged scalars the default str tag; only their style tells plain
    // (resolved by the core schema) from quoted (always a string).
    if (tag == YAML_STR_TAG || tag.empty()) return plain ? PlainScalar(s) : json(s);
    if (tag == YAML_INT_TAG || tag == YAML_FLOAT_TAG || tag == YAML_BOOL_TAG ||
        tag == YAML_NULL_TAG) {
      return PlainScalar(s);
    }
    diags_.Error(path, "unsupported YAML tag " + Quote(tag) + " (use plain values)");
    return s;
  }

  yaml_document_t* doc_;
  Diagnostics& diags_;
  size_t nodes_ = 0;
  bool failed_ = false;
};

// Owns a libyaml parser and its current document.
class YamlReader {
 public:
  explicit YamlReader(std::string_view text) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
  }
  ~YamlReader() {
    if (loaded_) yaml_document_delete(&doc_);
    yaml_parser_delete(&parser_);
  }
  YamlReader(const YamlReader&) = delete;
  YamlReader& operator=(const YamlReader&) = delete;

  // Loads the next document; false on a syntax error (see Error()). Root() is null at the end.
  bool Next() {
    if (loaded_) yaml_document_delete(&doc_);
    loaded_ = yaml_parser_load(&parser_, &doc_) != 0;
    return loaded_;
  }
  yaml_node_t* Root() { return yaml_document_get_root_node(&doc_); }
  yaml_document_t* document() { return &doc_; }

  std::string Error() const {
    std::string out = "not valid YAML: ";
    out += "line " + std::to_string(parser_.problem_mark.line + 1) + ", column " +
           std::to_string(parser_.problem_mark.column + 1) + ": ";
    out += parser_.problem ? parser_.problem : "syntax error";
    if (parser_.context) {
      out += " (";
      out += parser_.context;
      out += ")";
    }
    return out;
  }

 private:
  yaml_parser_t parser_{};
  yaml_document_t doc_{};
  bool loaded_ = false;
};

json ParseYaml(std::string_view text, Diagnostics& diags) {
  YamlReader reader(text);
  if (!reader.Next()) {
    diags.Error("", reader.Error());
    return json(json::value_t::discarded);
  }
  if (reader.Root() == nullptr) {
    diags.Error("", "the file is empty (expected an assembly: name, version, components)");
    return json(json::value_t::discarded);
  }
  int errors_before = diags.error_count();
  YamlConverter converter(reader.document(), diags);
  json value = converter.Convert(reader.Root(), "", 0);
  if (diags.error_count() != errors_before) return json(json::value_t::discarded);
  // A second document (after "---") is an error: an assembly file holds exactly one.
  if (!reader.Next()) {
    diags.Error("", reader.Error());
    return json(json::value_t::discarded);
  }
  if (reader.Root() != nullptr) {
    diags.Error("", "holds more than one YAML document; an assembly file holds exactly one");
    return json(json::value_t::discarded);
  }
  return value;
}

}  // namespace

DocumentFormat FormatFromFileName(std::string_view name) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  };
  if (ends_with(".json")) return DocumentFormat::kJson;
  if (ends_with(".yaml") || ends_with(".yml")) return DocumentFormat::kYaml;
  return DocumentFormat::kAuto;
}

json ParseDocument(std::string_view text, DocumentFormat format, Diagnostics& diags) {
  if (format == DocumentFormat::kAuto) {
    size_t i = text.find_first_not_of(" \t\r\n");
    format = (i != std::string_view::npos && (text[i] == '{' || text[i] == '['))
                 ? DocumentFormat::kJson
                 : DocumentFormat::kYaml;
  }
  if (format == DocumentFormat::kJson) {
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
      diags.Error("", "the file is empty (expected an assembly: name, version, components)");
      return json(json::value_t::discarded);
    }
    return ParseJson(text, diags);
  }
  return ParseYaml(text, diags);
}

}  // namespace tarn::spec
