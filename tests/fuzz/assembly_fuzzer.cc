// libFuzzer target for the assembly parser: JSON or YAML text in, diagnostics or an
// assembly out. Beyond "no crash, no sanitizer report", it checks the parser's contract:
// an assembly comes back exactly when there is no error, and a valid assembly always has a
// plan with one instance per container.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "spec/parser.h"
#include "spec/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tarn::spec::ParseOptions options;
  options.user = "alice";
  tarn::spec::ParseResult result =
      tarn::spec::ParseAssembly(text, tarn::spec::DocumentFormat::kAuto, options);
  bool has_error = false;
  for (const auto& d : result.diagnostics) {
    has_error |= d.severity == tarn::spec::Severity::kError;
  }
  if (has_error == result.ok()) __builtin_trap();
  if (!result.ok()) return 0;
  int64_t instances = 0;
  for (const auto& c : result.assembly->components) instances += c.number_of_containers;
  if (instances > 64) return 0;  // keep each run fast; the plan is linear in instances
  tarn::spec::Plan plan = tarn::spec::MakePlan(*result.assembly, "alice", "tarn");
  if (static_cast<int64_t>(plan.instances.size()) != instances) __builtin_trap();
  size_t waved = 0;
  for (const auto& wave : plan.waves) waved += wave.size();
  if (waved != result.assembly->components.size()) __builtin_trap();
  return 0;
}
