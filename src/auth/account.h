// Local accounts as the system's user database (NSS: /etc/passwd, LDAP, ...) knows them: by
// uid or by name, with the names of the account's groups. Thread-safe (reentrant lookups).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace tarn::auth {

struct LocalAccount {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
  std::vector<std::string> groups;  // by name: the primary group first, then supplementary
};

std::optional<LocalAccount> AccountByUid(uid_t uid);
std::optional<LocalAccount> AccountByName(const std::string& name);

}  // namespace tarn::auth
