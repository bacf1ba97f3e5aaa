// The tarn binary: one command line for every verb (DESIGN.md, "Contracts").
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"tarn: run machine-learning assemblies on shared CPU/GPU machines"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tarn ") + TARN_VERSION);

  tarn::cli::AssemblyFlags flags;
  auto add_assembly_flags = [&flags](CLI::App* cmd) {
    cmd->add_option("--user", flags.user,
                    "act as this user (default: $TARN_USER, else the account you run as)");
    cmd->add_option("--domain", flags.domain, "DNS domain of instance names")
        ->capture_default_str();
  };

  std::vector<std::string> validate_files;
  CLI::App* validate = app.add_subcommand(
      "validate", "check assembly files (JSON or YAML); exit 1 with every error on stderr");
  validate->add_option("FILE", validate_files, "assembly files")->required();
  add_assembly_flags(validate);

  std::string explain_file;
  std::string output = "text";
  CLI::App* explain = app.add_subcommand(
      "explain",
      "print the plan of an assembly: every instance, its command and environment, "
      "and the start order");
  explain->add_option("FILE", explain_file, "assembly file")->required();
  explain->add_option("-o,--output", output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  add_assembly_flags(explain);

  const std::string first = argc > 1 ? argv[1] : "";
  if (!first.empty() && first[0] != '-' && first != "validate" && first != "explain") {
    std::cerr << "tarn: unknown command \"" << first << "\" (commands: validate, explain; "
              << "see tarn --help)\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (*validate) return tarn::cli::RunValidate(validate_files, flags);
  if (*explain) return tarn::cli::RunExplain(explain_file, output, flags);
  return 2;
}
