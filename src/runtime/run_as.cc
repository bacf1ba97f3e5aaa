#include "runtime/run_as.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace tarn::runtime {

Status CheckCanEnter(const std::string& path, const Account& account) {
  if (account.uid == 0) return OkStatus();
  std::vector<gid_t> groups(64);
  int n = static_cast<int>(groups.size());
  if (!account.name.empty() &&
      ::getgrouplist(account.name.c_str(), account.gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    ::getgrouplist(account.name.c_str(), account.gid, groups.data(), &n);
  }
  groups.resize(account.name.empty() ? 0 : static_cast<size_t>(std::max(n, 0)));
  groups.push_back(account.gid);
  std::string dir;
  for (size_t at = 0; at != std::string::npos;) {
    const size_t next = path.find('/', at + 1);
    dir = path.substr(0, next == std::string::npos ? path.size() : next);
    at = next;
    if (dir.empty()) dir = "/";
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) break;  // not made yet: its parent decided
    const bool in_group =
        std::find(groups.begin(), groups.end(), st.st_gid) != groups.end();
    const mode_t bit = st.st_uid == account.uid ? S_IXUSR : in_group ? S_IXGRP : S_IXOTH;
    if ((st.st_mode & bit) == 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      passwd pw{};
      passwd* owner = nullptr;
      char buf[4096];
      ::getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &owner);
      return FailedPreconditionError(
          "account " + account.name + " (uid " + std::to_string(account.uid) +
          ") cannot enter " + dir + " (mode " + mode + ", owner " +
          (owner ? std::string(owner->pw_name) : std::to_string(st.st_uid)) + ")");
    }
  }
  return OkStatus();
}

std::optional<Account> LookUpAccount(const std::string& name) {
  struct passwd pw {};
  struct passwd* result = nullptr;
  char buf[16384];
  if (::getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &result) != 0 || result == nullptr) {
    return std::nullopt;
  }
  return Account{result->pw_name, result->pw_uid, result->pw_gid};
}

namespace {
const AccountLookup kLookUpAccount = LookUpAccount;
}  // namespace

StatusOr<RunAs> ResolveRunAs(const RunAsPolicy& policy, const std::string& user,
                             bool privileged_requested, uid_t daemon_uid,
                             const AccountLookup& given) {
  const AccountLookup& lookup = given ? given : kLookUpAccount;
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
