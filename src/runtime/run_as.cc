#include "runtime/run_as.h"

#include <pwd.h>

#include <algorithm>

namespace tarn::runtime {

std::optional<Account> LookUpAccount(const std::string& name) {
  struct passwd pw {};
  struct passwd* result = nullptr;
  char buf[16384];
  if (::getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &result) != 0 || result == nullptr) {
    return std::nullopt;
  }
  return Account{result->pw_name, result->pw_uid, result->pw_gid};
}

StatusOr<RunAs> ResolveRunAs(const RunAsPolicy& policy, const std::string& user,
                             bool privileged_requested, uid_t daemon_uid,
                             const AccountLookup& lookup) {
  if (daemon_uid != 0) {
    struct passwd pw {};
    struct passwd* result = nullptr;
    char buf[16384];
    std::string name = ::getpwuid_r(daemon_uid, &pw, buf, sizeof buf, &result) == 0 && result
                           ? result->pw_name
                           : std::to_string(daemon_uid);
    return RunAs{{name, daemon_uid, result ? result->pw_gid : static_cast<gid_t>(daemon_uid)},
                 false,
                 "tarn does not run as root, so every container runs as its account"};
  }
  if (privileged_requested) {
    if (!policy.allow_privileged) {
      return PermissionDeniedError(
          "run_privileged_container is set but privileged containers are disabled on this "
          "machine (the daemon's configuration must allow them)");
    }
    return RunAs{{"root", 0, 0}, true, "privileged container, allowed by the configuration"};
  }
  std::string why;
  if (std::find(policy.banned_users.begin(), policy.banned_users.end(), user) !=
      policy.banned_users.end()) {
    why = "user " + user + " is banned from running containers";
  } else if (auto account = lookup(user)) {
    if (account->uid == 0) {
      why = "user " + user + " is root";
    } else if (static_cast<int64_t>(account->uid) < policy.min_user_id) {
      why = "user " + user + " has uid " + std::to_string(account->uid) + ", below the minimum " +
            std::to_string(policy.min_user_id);
    } else {
      return RunAs{*account, false, "the submitting user's own account"};
    }
  } else {
    why = "user " + user + " has no account on this machine";
  }
  auto local = lookup(policy.local_user);
  if (!local) {
    return FailedPreconditionError("cannot run containers: " + why + ", and the local user " +
                                   policy.local_user + " does not exist either");
  }
  if (local->uid == 0) {
    return FailedPreconditionError("the configured local user " + policy.local_user +
                                   " is root; containers never run as root by default");
  }
  return RunAs{*local, false, why + "; running as " + policy.local_user};
}

}  // namespace tarn::runtime
