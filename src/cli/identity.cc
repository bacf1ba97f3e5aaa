#include "cli/identity.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

namespace tarn::cli {

StatusOr<std::string> CurrentUserName() {
  if (const char* u = std::getenv("TARN_USER"); u != nullptr && *u != '\0') return std::string(u);
  struct passwd pw {};
  struct passwd* result = nullptr;
  char buf[4096];
  uid_t uid = ::geteuid();
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &result) == 0 && result != nullptr) {
    return std::string(result->pw_name);
  }
  return NotFoundError("uid " + std::to_string(uid) +
                       " has no account name; set TARN_USER to the name to act as");
}

std::optional<std::string> ActingUser(const std::string& flag) {
  if (!flag.empty()) return flag;
  auto current = CurrentUserName();
  if (!current.ok()) {
    std::cerr << "tarn: " << current.status().message() << "\n";
    return std::nullopt;
  }
  return *current;
}

}  // namespace tarn::cli
