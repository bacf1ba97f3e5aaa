#include "serve/json_reader.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tarn::serve {

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : p_(text.data()), begin_(text.data()),
                                                end_(text.data() + text.size()) {}

  StatusOr<Json> ParseDocument() {
    Json v;
    SkipSpace();
    if (!ParseValue(v, 0)) return Error();
    SkipSpace();
    if (p_ != end_) {
      error_ = "unexpected content after the JSON value";
      return Error();
    }
    return v;
  }

 private:
  Status Error() const {
    return InvalidArgumentError("not valid JSON at byte " + std::to_string(p_ - begin_) + ": " +
                                error_);
  }

  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool Fail(const char* message) {
    error_ = message;
    return false;
  }

  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        std::string_view(p_, word.size()) != word) {
      return Fail("unknown literal");
    }
    p_ += word.size();
    return true;
  }

  bool ParseValue(Json& v, int depth) {
    if (p_ == end_) return Fail("unexpected end");
    switch (*p_) {
      case '{': return ParseObject(v, depth + 1);
      case '[': return ParseArray(v, depth + 1);
      case '"':
        v.type_ = Json::Type::kString;
        return ParseString(v.string_);
      case 't':
        v.type_ = Json::Type::kBool;
        v.integer_ = 1;
        return Literal("true");
      case 'f':
        v.type_ = Json::Type::kBool;
        v.integer_ = 0;
        return Literal("false");
      case 'n':
        v.type_ = Json::Type::kNull;
        return Literal("null");
      default:
        return ParseNumber(v);
    }
  }

  bool ParseArray(Json& v, int depth) {
    if (depth > kMaxJsonDepth) return Fail("nested too deeply");
    v.type_ = Json::Type::kArray;
    ++p_;
    SkipSpace();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    while (true) {
      SkipSpace();
      v.elements_.emplace_back();
      if (!ParseValue(v.elements_.back(), depth)) return false;
      SkipSpace();
      if (p_ == end_) return Fail("unexpected end in an array");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      return Fail("expected , or ] in an array");
    }
  }

  bool ParseObject(Json& v, int depth) {
    if (depth > kMaxJsonDepth) return Fail("nested too deeply");
    v.type_ = Json::Type::kObject;
    ++p_;
    SkipSpace();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (p_ == end_ || *p_ != '"') return Fail("expected a string key in an object");
      std::string key;
      if (!ParseString(key)) return false;
      SkipSpace();
      if (p_ == end_ || *p_ != ':') return Fail("expected : after an object key");
      ++p_;
      SkipSpace();
      v.members_.emplace_back(std::move(key), Json());
      if (!ParseValue(v.members_.back().second, depth)) return false;
      SkipSpace();
      if (p_ == end_) return Fail("unexpected end in an object");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      return Fail("expected , or } in an object");
    }
  }

  static void AppendUtf8(std::string& out, uint32_t c) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }

  bool Hex4(uint32_t& out) {
    if (end_ - p_ < 4) return Fail("short \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      out <<= 4;
      if (c >= '0' && c <= '9') {
        out |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        out |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        out |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Fail("bad \\u escape");
      }
    }
    return true;
  }

  // One UTF-8 sequence starting at p_ (already known to be >= 0x80), copied to out.
  bool Utf8(std::string& out) {
    const auto b0 = static_cast<unsigned char>(*p_);
    int len;
    uint32_t min, c;
    if ((b0 & 0xE0) == 0xC0) {
      len = 2, min = 0x80, c = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, min = 0x800, c = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, c = b0 & 0x07;
    } else {
      return Fail("invalid UTF-8 in a string");
    }
    if (end_ - p_ < len) return Fail("invalid UTF-8 in a string");
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(p_[i]);
      if ((b & 0xC0) != 0x80) return Fail("invalid UTF-8 in a string");
      c = (c << 6) | (b & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
      return Fail("invalid UTF-8 in a string");
    }
    out.append(p_, static_cast<size_t>(len));
    p_ += len;
    return true;
  }

  bool ParseString(std::string& out) {
    ++p_;  // the opening quote
    while (true) {
      // Copy the plain run at once.
      const char* run = p_;
      while (p_ < end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20 &&
             static_cast<unsigned char>(*p_) < 0x80) {
        ++p_;
      }
      out.append(run, static_cast<size_t>(p_ - run));
      if (p_ == end_) return Fail("unterminated string");
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return Fail("control character in a string");
      if (c >= 0x80) {
        if (!Utf8(out)) return false;
        continue;
      }
      // A backslash.
      ++p_;
      if (p_ == end_) return Fail("unterminated string");
      const char e = *p_++;
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t code;
          if (!Hex4(code)) return false;
          if (code >= 0xDC00 && code <= 0xDFFF) return Fail("lone low surrogate");
          if (code >= 0xD800 && code <= 0xDBFF) {
            uint32_t low;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return Fail("lone high surrogate");
            p_ += 2;
            if (!Hex4(low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return Fail("lone high surrogate");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(out, code);
          break;
        }
        default:
          return Fail("bad escape in a string");
      }
    }
  }

  bool ParseNumber(Json& v) {
    const char* start = p_;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ == end_) return Fail("expected a value");
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    } else {
      return Fail("expected a value");
    }
    bool integral = true;
    if (p_ < end_ && *p_ == '.') {
      integral = false;
      ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return Fail("expected a digit after .");
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      integral = false;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return Fail("expected a digit in an exponent");
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (integral) {
      int64_t i;
      auto r = std::from_chars(start, p_, i);
      if (r.ec == std::errc() && r.ptr == p_) {
        v.type_ = Json::Type::kInteger;
        v.integer_ = i;
        return true;
      }
      // Too large for int64: a float, as nlohmann::json keeps it.
    }
    double d;
    auto r = std::from_chars(start, p_, d);
    if (r.ptr != p_) return Fail("bad number");
    if (r.ec == std::errc::result_out_of_range) {
      // Underflow is strtod's tiny value or zero, as nlohmann::json (which uses strtod) reads
      // it; overflow is an error there and here.
      d = std::strtod(std::string(start, p_).c_str(), nullptr);
      if (std::isinf(d)) return Fail("number out of range");
    }
    v.type_ = Json::Type::kFloat;
    v.float_ = d;
    return true;
  }

  const char* p_;
  const char* const begin_;
  const char* const end_;
  const char* error_ = "";
};

const Json* Json::find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) {
    if (it->first == key) return &it->second;
  }
  return nullptr;
}

namespace {

void DumpString(std::string& out, const std::string& s) {
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out.push_back(ch);
    }
  }
  out.push_back('"');
}

void Dump(std::string& out, const Json& v) {
  switch (v.type()) {
    case Json::Type::kNull: out += "null"; return;
    case Json::Type::kBool: out += v.boolean() ? "true" : "false"; return;
    case Json::Type::kInteger: out += std::to_string(v.integer()); return;
    case Json::Type::kFloat: {
      if (!std::isfinite(v.number())) {
        out += "null";
        return;
      }
      char buf[32];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v.number());
      out.append(buf, ec == std::errc() ? end : buf);
      return;
    }
    case Json::Type::kString: DumpString(out, v.str()); return;
    case Json::Type::kArray:
      out.push_back('[');
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out.push_back(',');
        Dump(out, v[i]);
      }
      out.push_back(']');
      return;
    case Json::Type::kObject:
      out.push_back('{');
      for (size_t i = 0; i < v.members().size(); ++i) {
        if (i) out.push_back(',');
        DumpString(out, v.members()[i].first);
        out.push_back(':');
        Dump(out, v.members()[i].second);
      }
      out.push_back('}');
      return;
  }
}

}  // namespace

std::string Json::dump() const {
  std::string out;
  Dump(out, *this);
  return out;
}

StatusOr<Json> ParseJson(std::string_view text) { return JsonParser(text).ParseDocument(); }

}  // namespace tarn::serve
