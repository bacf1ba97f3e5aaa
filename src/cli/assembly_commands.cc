// tarn validate and tarn explain: read assembly files the way tarn launch will send them.
#include <iostream>

#include "cli/commands.h"
#include "cli/explain_format.h"
#include "cli/identity.h"
#include "common/dns_name.h"
#include "spec/parser.h"
#include "spec/plan.h"

namespace tarn::cli {
namespace {

// Resolves the DNS label of the acting user, printing why when it cannot.
bool ResolveUser(const AssemblyFlags& flags, std::string* label) {
  std::optional<std::string> name = ActingUser(flags.user);
  if (!name) return false;
  *label = UserToDnsLabel(*name);
  return true;
}

// Prints the diagnostics of one file; returns true when it had no error.
bool Report(const std::string& file, const spec::ParseResult& result) {
  for (const spec::Diagnostic& d : result.diagnostics) {
    std::cerr << spec::FormatDiagnostic(file, d) << "\n";
  }
  return result.ok();
}

}  // namespace

int RunValidate(const std::vector<std::string>& files, const AssemblyFlags& flags) {
  spec::ParseOptions options;
  if (!ResolveUser(flags, &options.user)) return 2;
  options.domain = flags.domain;
  bool all_ok = true;
  for (const std::string& file : files) {
    spec::ParseResult result = spec::LoadAssemblyFile(file, options);
    if (!Report(file, result)) {
      all_ok = false;
      continue;
    }
    int64_t instances = 0;
    for (const auto& c : result.assembly->components) instances += c.number_of_containers;
    size_t n = result.assembly->components.size();
    std::cout << file << ": valid: assembly " << result.assembly->name << ", " << n
              << (n == 1 ? " component, " : " components, ") << instances
              << (instances == 1 ? " instance" : " instances") << "\n";
  }
  return all_ok ? 0 : 1;
}

int RunExplain(const std::string& file, const std::string& output, const AssemblyFlags& flags) {
  spec::ParseOptions options;
  if (!ResolveUser(flags, &options.user)) return 2;
  options.domain = flags.domain;
  spec::ParseResult result = spec::LoadAssemblyFile(file, options);
  if (!Report(file, result)) return 1;
  spec::Plan plan = spec::MakePlan(*result.assembly, options.user, options.domain);
  if (output == "json") {
    std::cout << FormatPlanJson(*result.assembly, plan, options.user).dump(2) << "\n";
  } else {
    std::cout << FormatPlanText(*result.assembly, plan, options.user);
  }
  return 0;
}

}  // namespace tarn::cli
