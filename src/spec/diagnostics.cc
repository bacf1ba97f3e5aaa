#include "spec/diagnostics.h"

#include <cstdio>

namespace tarn::spec {

void Diagnostics::Error(std::string path, std::string message) {
  items_.push_back({Severity::kError, std::move(path), std::move(message)});
  ++errors_;
}

void Diagnostics::Warning(std::string path, std::string message) {
  items_.push_back({Severity::kWarning, std::move(path), std::move(message)});
}

std::string FormatDiagnostic(std::string_view source, const Diagnostic& d) {
  std::string out(source);
  out += ": ";
  if (d.severity == Severity::kWarning) out += "warning: ";
  if (!d.path.empty()) {
    out += d.path;
    out += ": ";
  }
  out += d.message;
  return out;
}

static bool IsIdentifier(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string ChildPath(std::string_view parent, std::string_view key) {
  std::string out(parent);
  if (IsIdentifier(key)) {
    if (!out.empty()) out += '.';
    out += key;
  } else {
    out += '[';
    out += Quote(key);
    out += ']';
  }
  return out;
}

std::string IndexPath(std::string_view parent, size_t index) {
  std::string out(parent);
  out += '[';
  out += std::to_string(index);
  out += ']';
  return out;
}

std::string Quote(std::string_view value) {
  constexpr size_t kMax = 60;
  std::string out = "\"";
  size_t n = 0;
  for (unsigned char c : value) {
    if (n++ == kMax) {
      out += "...";
      break;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace tarn::spec
