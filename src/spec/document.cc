#include "spec/document.h"

#include <yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
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

// Builds a JSON value from libyaml's event stream. Events (rather than libyaml's document
// API) keep what the core schema needs: whether a scalar was plain and untagged. Aliases
// copy their anchor's value and are charged its full size against kMaxNodes, which stops
// "billion laughs" documents.
class YamlBuilder {
 public:
  explicit YamlBuilder(Diagnostics& diags) : diags_(diags) {}

  // Handles one event; false stops the parse (an error was reported).
  bool OnEvent(const yaml_event_t& e) {
    switch (e.type) {
      case YAML_DOCUMENT_START_EVENT:
        if (++documents_ > 1) {
          diags_.Error("", "holds more than one YAML document; an assembly file holds exactly one");
          return false;
        }
        return true;
      case YAML_SCALAR_EVENT:
        return OnScalar(e);
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        const bool map = e.type == YAML_MAPPING_START_EVENT;
        std::string path = ChildPathHere();
        if (stack_.size() >= static_cast<size_t>(kMaxDepth)) {
          return Fail(path, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
        }
        const auto* anchor = map ? e.data.mapping_start.anchor : e.data.sequence_start.anchor;
        stack_.push_back({map ? json::object() : json::array(), map, std::nullopt, std::move(path),
                          anchor ? reinterpret_cast<const char*>(anchor) : "", 1});
        return Charge(1, stack_.back().path);
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: {
        Frame frame = std::move(stack_.back());
        stack_.pop_back();
        if (!frame.anchor.empty()) anchors_[frame.anchor] = {frame.value, frame.nodes};
        return Add(std::move(frame.value), std::nullopt, frame.nodes);
      }
      case YAML_ALIAS_EVENT: {
        std::string name = reinterpret_cast<const char*>(e.data.alias.anchor);
        auto it = anchors_.find(name);
        if (it == anchors_.end()) return Fail(ChildPathHere(), "unknown alias *" + name);
        if (!Charge(it->second.second, ChildPathHere())) return false;
        std::optional<std::string> text;
        if (it->second.first.is_string()) text = it->second.first.get<std::string>();
        return Add(it->second.first, text, it->second.second);
      }
      default:
        return true;
    }
  }

  bool has_value() const { return has_root_; }
  json TakeRoot() { return std::move(root_); }

 private:
  struct Frame {
    json value;
    bool map;
    std::optional<std::string> key;  // in a mapping: the key waiting for its value
    std::string path;
    std::string anchor;
    size_t nodes;  // size of this subtree, for aliases
  };

  bool OnScalar(const yaml_event_t& e) {
    std::string s(reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length);
    std::string tag = e.data.scalar.tag ? reinterpret_cast<const char*>(e.data.scalar.tag) : "";
    json value;
    if (tag.empty() || tag == "!") {
      // No tag: plain scalars are resolved by the core schema, quoted ones are strings.
      value = e.data.scalar.plain_implicit ? PlainScalar(s) : json(s);
    } else if (tag == YAML_STR_TAG) {
      value = s;
    } else if (tag == YAML_INT_TAG || tag == YAML_FLOAT_TAG || tag == YAML_BOOL_TAG ||
               tag == YAML_NULL_TAG) {
      value = PlainScalar(s);
    } else {
      return Fail(ChildPathHere(), "unsupported YAML tag " + Quote(tag) + " (use plain values)");
    }
    if (!Charge(1, ChildPathHere())) return false;
    if (e.data.scalar.anchor) {
      anchors_[reinterpret_cast<const char*>(e.data.scalar.anchor)] = {value, 1};
    }
    return Add(std::move(value), s, 1);
  }

  // Places a finished node: the root, a list item, a mapping key, or a mapping value.
  bool Add(json value, const std::optional<std::string>& scalar_text, size_t nodes) {
    if (stack_.empty()) {
      root_ = std::move(value);
      has_root_ = true;
      return true;
    }
    Frame& top = stack_.back();
    top.nodes += nodes;
    if (!top.map) {
      top.value.push_back(std::move(value));
      return true;
    }
    if (!top.key) {
      if (!scalar_text) {
        return Fail(top.path, "a mapping key must be a plain string, not a list or mapping");
      }
      if (top.value.contains(*scalar_text)) {
        return Fail(ChildPath(top.path, *scalar_text),
                    "duplicate key (a mapping must not repeat a key; only one value would be "
                    "kept)");
      }
      top.key = *scalar_text;
      return true;
    }
    top.value[*top.key] = std::move(value);
    top.key.reset();
    return true;
  }

  // The path of the node that starts now.
  std::string ChildPathHere() const {
    if (stack_.empty()) return "";
    const Frame& top = stack_.back();
    if (!top.map) return IndexPath(top.path, top.value.size());
    return top.key ? ChildPath(top.path, *top.key) : top.path;
  }

  bool Charge(size_t nodes, const std::string& path) {
    nodes_ += nodes;
    if (nodes_ > kMaxNodes) {
      return Fail(path, "more than " + std::to_string(kMaxNodes) +
                            " values (after expanding YAML aliases)");
    }
    return true;
  }

  bool Fail(const std::string& path, std::string message) {
    diags_.Error(path, std::move(message));
    return false;
  }

  Diagnostics& diags_;
  std::vector<Frame> stack_;
  std::map<std::string, std::pair<json, size_t>> anchors_;
  json root_;
  bool has_root_ = false;
  int documents_ = 0;
  size_t nodes_ = 0;
};

json ParseYaml(std::string_view text, Diagnostics& diags) {
  yaml_parser_t parser;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  YamlBuilder builder(diags);
  bool ok = true;
  while (true) {
    yaml_event_t event;
    if (!yaml_parser_parse(&parser, &event)) {
      std::string msg = "not valid YAML: line " + std::to_string(parser.problem_mark.line + 1) +
                        ", column " + std::to_string(parser.problem_mark.column + 1) + ": " +
                        (parser.problem ? parser.problem : "syntax error");
      if (parser.context) msg += std::string(" (") + parser.context + ")";
      diags.Error("", msg);
      ok = false;
      break;
    }
    const bool end = event.type == YAML_STREAM_END_EVENT;
    ok = builder.OnEvent(event);
    yaml_event_delete(&event);
    if (!ok || end) break;
  }
  yaml_parser_delete(&parser);
  if (!ok) return json(json::value_t::discarded);
  if (!builder.has_value()) {
    diags.Error("", "the file is empty (expected an assembly: name, version, components)");
    return json(json::value_t::discarded);
  }
  return builder.TakeRoot();
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
