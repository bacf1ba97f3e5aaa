// Test-only helpers for the parser's tests (parser_test.cc, parser_properties_test.cc): a
// minimal assembly to change one thing at a time and the checks on what parsing it says.
// Header-only.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string_view>

#include "spec/diagnostic_checks_for_test.h"
#include "spec/parser.h"

namespace tarn::spec {

using json = nlohmann::json;

inline bool HasError(const ParseResult& r, std::string_view path, std::string_view part) {
  return Has(r, Severity::kError, path, part);
}
inline bool HasWarning(const ParseResult& r, std::string_view path, std::string_view part) {
  return Has(r, Severity::kWarning, path, part);
}

// A minimal valid assembly; tests change one thing at a time.
inline json Base() {
  return json::parse(R"({
    "name": "app",
    "version": "1.0",
    "components": [
      {"name": "web", "number_of_containers": 1, "launch_command": "sleep 10",
       "resource": {"cpus": 1, "memory": "256"}}
    ]
  })");
}

inline ParseResult ParseJson(const json& j, const ParseOptions& o = {}) {
  return ParseAssembly(j.dump(), DocumentFormat::kJson, o);
}

inline ParseResult ParseYaml(std::string_view text, const ParseOptions& o = {}) {
  return ParseAssembly(text, DocumentFormat::kYaml, o);
}

// The assembly of a parse expected to succeed (a copy: callers often parse a temporary).
// On failure, an assembly with one empty component so that callers can still index it.
inline Assembly Ok(const ParseResult& r) {
  EXPECT_TRUE(r.ok()) << Dump(r);
  if (r.ok()) return *r.assembly;
  Assembly empty;
  empty.components.emplace_back();
  return empty;
}

// Parses, expects an error at `path` whose message contains `part` (other errors allowed).
inline void ExpectError(const json& j, std::string_view path, std::string_view part,
                        const ParseOptions& o = {}) {
  ParseResult r = ParseJson(j, o);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r, path, part)) << "want [" << path << "] ~ " << part << "\n" << Dump(r);
}

inline json& Comp(json& j, size_t i = 0) { return j["components"][i]; }

}  // namespace tarn::spec
