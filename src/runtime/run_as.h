// Which account a container runs as, by the rules of YARN's LinuxContainerExecutor in
// non-secure mode. When tarn runs as root: never root, unless the assembly asks for a
// privileged container and the daemon's configuration allows it; the submitting user's own
// account when it exists here and passes the guards (uid >= min_user_id, not banned);
// otherwise the configured local user (default nobody). When tarn is not root: its own
// account, whatever was asked. Pure given the account lookup; thread-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::runtime {

struct Account {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct RunAsPolicy {
  int64_t min_user_id = 1000;  // yarn.nodemanager.linux-container-executor... min.user.id
  std::vector<std::string> banned_users = {"hdfs", "yarn", "mapred", "bin"};  // YARN's
  std::string local_user = "nobody";  // ...nonsecure-mode.local-user
  bool allow_privileged = false;      // docker.privileged-containers.enabled
};

struct RunAs {
  Account account;
  bool privileged = false;
  std::string reason;  // why this account, for `tarn status` and the logs
};

using AccountLookup = std::function<std::optional<Account>(const std::string& name)>;

// getpwnam_r.
std::optional<Account> LookUpAccount(const std::string& name);

// Whether `account` may enter every directory from / down to `path` (search permission by
// owner, group, its supplementary groups, or others), as the kernel would decide without
// ACLs. FailedPrecondition naming the first directory it cannot enter, with its mode and
// owner, and the account.
Status CheckCanEnter(const std::string& path, const Account& account);

// `lookup` empty: LookUpAccount.
StatusOr<RunAs> ResolveRunAs(const RunAsPolicy& policy, const std::string& user,
                             bool privileged_requested, uid_t daemon_uid,
                             const AccountLookup& lookup = LookUpAccount);

}  // namespace tarn::runtime
