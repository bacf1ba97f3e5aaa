// Diagnostics: the errors and warnings found in one assembly file, each naming the place.
//
// Parsing never stops at the first problem: every rule adds what it finds here, and the
// caller prints them all. Not thread-safe; one Diagnostics per parse.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tarn::spec {

enum class Severity { kError, kWarning };

struct Diagnostic {
  Severity severity = Severity::kError;
  std::string path;     // JSON path in the document, e.g. components[1].resource.memory
  std::string message;  // what is wrong and what would be right

  friend bool operator==(const Diagnostic&, const Diagnostic&) = default;
};

class Diagnostics {
 public:
  void Error(std::string path, std::string message);
  void Warning(std::string path, std::string message);

  bool has_errors() const { return errors_ > 0; }
  int error_count() const { return errors_; }
  const std::vector<Diagnostic>& items() const { return items_; }

 private:
  std::vector<Diagnostic> items_;
  int errors_ = 0;
};

// One line for a user: "assembly.json: components[1].resource.memory: ...", warnings as
// "assembly.json: warning: components[0].launch_command: ...". An empty path is left out.
std::string FormatDiagnostic(std::string_view source, const Diagnostic& d);

// Path helpers: Child("components[1]", "resource") -> "components[1].resource";
// a key that is not a plain identifier is quoted: properties["tarn.tf.role"].
std::string ChildPath(std::string_view parent, std::string_view key);
std::string IndexPath(std::string_view parent, size_t index);

// A quoted, escaped rendering of a user's value for messages, shortened past 60 characters.
std::string Quote(std::string_view value);

}  // namespace tarn::spec
