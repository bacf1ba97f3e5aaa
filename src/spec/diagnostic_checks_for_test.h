// Test-only helpers for looking at a ParseResult's diagnostics. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "spec/parser.h"

namespace tarn::spec {

// Every diagnostic as the CLI would print it, for failure messages.
inline std::string Dump(const ParseResult& r) {
  std::string out;
  for (const Diagnostic& d : r.diagnostics) out += FormatDiagnostic("t", d) + "\n";
  return out;
}

inline int CountOf(const ParseResult& r, Severity s) {
  int n = 0;
  for (const Diagnostic& d : r.diagnostics) n += d.severity == s;
  return n;
}
inline int ErrorCount(const ParseResult& r) { return CountOf(r, Severity::kError); }
inline int WarningCount(const ParseResult& r) { return CountOf(r, Severity::kWarning); }

// True when a diagnostic of severity `s` sits exactly at `path` and its message contains
// `part`.
inline bool Has(const ParseResult& r, Severity s, std::string_view path, std::string_view part) {
  for (const Diagnostic& d : r.diagnostics) {
    if (d.severity == s && d.path == path && d.message.find(part) != std::string::npos) {
      return true;
    }
  }
  return false;
}

inline bool Contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// Parses `j` (JSON), expects it refused with exactly one error, at `path`, whose message
// contains `part`.
inline void ExpectOneError(const nlohmann::json& j, std::string_view path, std::string_view part,
                           const ParseOptions& o = {}) {
  ParseResult r = ParseAssembly(j.dump(), DocumentFormat::kJson, o);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.assembly.has_value());
  EXPECT_EQ(ErrorCount(r), 1) << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kError, path, part)) << "want [" << path << "] ~ " << part << "\n"
                                                    << Dump(r);
}

}  // namespace tarn::spec
