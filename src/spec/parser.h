// Parsing and validating assembly files: text (JSON or YAML) -> Assembly + diagnostics.
//
// ParseAssembly runs every rule and reports every problem it finds, not only the first;
// an Assembly is returned only when there is no error (warnings may remain). Pure apart from
// ParseOptions::read_file; thread-safe when that callback is.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "spec/assembly.h"
#include "spec/diagnostics.h"
#include "spec/document.h"

namespace tarn::spec {

struct ParseOptions {
  // The submitting user as a DNS label and the cluster's domain: full instance names
  // <instance>.<assembly>.<user>.<domain> must fit DNS's 253 characters.
  std::string user = "user";
  std::string domain = "tarn";
  // Reads a local file named by a config file's src_file or a TARBALL artifact (relative
  // names are first joined to base_dir). The CLI sets it; the server leaves it unset, so it
  // accepts only inline (data:) contents and absolute tarball paths.
  std::function<StatusOr<std::string>(const std::string& path)> read_file;
  std::string base_dir;
};

struct ParseResult {
  std::optional<Assembly> assembly;  // set exactly when there is no error
  std::vector<Diagnostic> diagnostics;

  bool ok() const { return assembly.has_value(); }
};

ParseResult ParseAssembly(std::string_view text, DocumentFormat format,
                          const ParseOptions& options);
ParseResult ParseAssemblyJson(const nlohmann::json& value, const ParseOptions& options);

// Reads `path` (format from its extension) with read_file set to read local files relative
// to the assembly file's directory, as the CLI does.
ParseResult LoadAssemblyFile(const std::string& path, ParseOptions options);

}  // namespace tarn::spec
