#include "common/local_paths.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

namespace tarn {

std::string HomeDir() {
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') return home;
  struct passwd pw {};
  struct passwd* result = nullptr;
  char buf[4096];
  if (::getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &result) == 0 && result != nullptr) {
    return result->pw_dir;
  }
  return "/tmp";
}

std::string DefaultStateDir() {
  if (::geteuid() == 0) return "/var/lib/tarn";
  return HomeDir() + "/.local/state/tarn";
}

std::string DefaultSocketPath(const std::string& state_dir) {
  if (::geteuid() == 0) return kRootSocketPath;
  return (state_dir.empty() ? DefaultStateDir() : state_dir) + "/tarn.sock";
}

}  // namespace tarn
