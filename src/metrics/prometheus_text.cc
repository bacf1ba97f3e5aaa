#include "metrics/prometheus_text.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace tarn::metrics {
namespace {

bool NameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool NameChar(char c) { return NameStart(c) || (c >= '0' && c <= '9'); }

// A cursor over one line.
class Line {
 public:
  explicit Line(std::string_view s) : s_(s) {}
  bool done() const { return i_ >= s_.size(); }
  char peek() const { return done() ? '\0' : s_[i_]; }
  void SkipSpaces() {
    while (!done() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool Eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  // A metric name (colons allowed) or, with `label`, a label name (no colons).
  std::string_view Name(bool label) {
    const size_t start = i_;
    if (done() || !NameStart(s_[i_]) || (label && s_[i_] == ':')) return {};
    while (!done() && NameChar(s_[i_]) && !(label && s_[i_] == ':')) ++i_;
    return s_.substr(start, i_ - start);
  }
  std::string_view Token() {
    const size_t start = i_;
    while (!done() && s_[i_] != ' ' && s_[i_] != '\t') ++i_;
    return s_.substr(start, i_ - start);
  }
  std::string_view Rest() const { return done() ? std::string_view() : s_.substr(i_); }
  // A quoted label value with its escapes (\\, \", \n); false when it does not end.
  bool Quoted(std::string* out) {
    if (!Eat('"')) return false;
    while (!done()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (done()) return false;
        char e = s_[i_++];
        if (e == 'n') {
          out->push_back('\n');
        } else if (e == '\\' || e == '"') {
          out->push_back(e);
        } else {
          out->push_back('\\');
          out->push_back(e);
        }
      } else {
        out->push_back(c);
      }
    }
    return false;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

bool ParseValue(std::string_view t, double* v) {
  if (!t.empty() && t[0] == '+') t.remove_prefix(1);  // "+Inf"
  if (t.empty() || t[0] == '+') return false;
  const char* end = t.data() + t.size();
  auto r = std::from_chars(t.data(), end, *v);
  return r.ec == std::errc() && r.ptr == end;
}

Status Bad(size_t line, const std::string& why) {
  return InvalidArgumentError("line " + std::to_string(line) + ": " + why);
}

}  // namespace

StatusOr<Exposition> ParsePrometheusText(std::string_view text, size_t max_samples) {
  Exposition e;
  size_t number = 0;
  while (!text.empty()) {
    ++number;
    const size_t nl = text.find('\n');
    std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    Line l(raw);
    l.SkipSpaces();
    if (l.done()) continue;
    if (l.Eat('#')) {
      l.SkipSpaces();
      const std::string_view word = l.Token();
      if (word != "TYPE") continue;  // HELP and other comments say nothing to keep
      l.SkipSpaces();
      const std::string name(l.Name(false));
      if (name.empty()) return Bad(number, "# TYPE names no metric");
      l.SkipSpaces();
      const std::string kind(l.Token());
      static const char* kKinds[] = {"counter", "gauge", "histogram", "summary", "untyped"};
      if (std::none_of(std::begin(kKinds), std::end(kKinds),
                       [&](const char* k) { return kind == k; })) {
        return Bad(number, "# TYPE " + name + ": \"" + kind +
                               "\" is not counter, gauge, histogram, summary or untyped");
      }
      e.types[name] = kind;
      continue;
    }
    Sample s;
    s.name = std::string(l.Name(false));
    if (s.name.empty()) {
      return Bad(number, "expected a metric name, got \"" + std::string(raw.substr(0, 40)) + "\"");
    }
    l.SkipSpaces();
    if (l.Eat('{')) {
      while (true) {
        l.SkipSpaces();
        if (l.Eat('}')) break;
        const std::string label(l.Name(true));
        if (label.empty()) return Bad(number, s.name + ": expected a label name or '}'");
        l.SkipSpaces();
        if (!l.Eat('=')) return Bad(number, s.name + ": label " + label + " has no '='");
        l.SkipSpaces();
        std::string value;
        if (!l.Quoted(&value)) {
          return Bad(number, s.name + ": label " + label + "'s value is not a quoted string");
        }
        s.labels.emplace_back(label, std::move(value));
        l.SkipSpaces();
        if (l.Eat(',')) continue;
        if (l.Eat('}')) break;
        return Bad(number, s.name + ": expected ',' or '}' after label " + label);
      }
      std::sort(s.labels.begin(), s.labels.end());
      for (size_t i = 1; i < s.labels.size(); ++i) {
        if (s.labels[i].first == s.labels[i - 1].first) {
          return Bad(number, s.name + ": label " + s.labels[i].first + " is given twice");
        }
      }
    }
    l.SkipSpaces();
    const std::string_view value = l.Token();
    if (!ParseValue(value, &s.value)) {
      return Bad(number, s.name + ": \"" + std::string(value.substr(0, 40)) + "\" is not a number");
    }
    l.SkipSpaces();
    if (!l.done()) {
      const std::string_view ts = l.Token();
      int64_t t = 0;
      auto r = std::from_chars(ts.data(), ts.data() + ts.size(), t);
      if (r.ec != std::errc() || r.ptr != ts.data() + ts.size()) {
        return Bad(number, s.name + ": \"" + std::string(ts.substr(0, 40)) +
                               "\" is not a timestamp in milliseconds");
      }
      l.SkipSpaces();
      if (!l.done()) return Bad(number, s.name + ": unexpected text after the timestamp");
    }
    if (e.samples.size() >= max_samples) {
      return Bad(number, "more than " + std::to_string(max_samples) + " samples");
    }
    e.samples.push_back(std::move(s));
  }
  return e;
}

std::string LabelText(const std::vector<std::pair<std::string, std::string>>& labels) {
  if (labels.empty()) return "";
  std::string s = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) s += ",";
    s += labels[i].first + "=\"";
    for (char c : labels[i].second) {
      if (c == '\\' || c == '"') {
        s += '\\';
        s += c;
      } else if (c == '\n') {
        s += "\\n";
      } else {
        s += c;
      }
    }
    s += "\"";
  }
  return s + "}";
}

}  // namespace tarn::metrics
