#include "auth/account.h"

#include <grp.h>
#include <pwd.h>

#include <vector>

namespace tarn::auth {
namespace {

std::vector<std::string> GroupNames(const char* name, gid_t primary) {
  std::vector<gid_t> gids(64);
  int n = static_cast<int>(gids.size());
  if (::getgrouplist(name, primary, gids.data(), &n) < 0) {
    gids.resize(static_cast<size_t>(n));
    if (::getgrouplist(name, primary, gids.data(), &n) < 0) n = 0;
  }
  gids.resize(static_cast<size_t>(n));
  std::vector<std::string> out;
  std::vector<char> buf(16384);
  auto add = [&](gid_t gid) {
    struct group gr {};
    struct group* result = nullptr;
    if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &result) == 0 && result != nullptr) {
      for (const std::string& have : out) {
        if (have == result->gr_name) return;
      }
      out.emplace_back(result->gr_name);
    }
  };
  add(primary);
  for (gid_t g : gids) add(g);
  return out;
}

std::optional<LocalAccount> FromPasswd(const struct passwd* pw) {
  LocalAccount a;
  a.uid = pw->pw_uid;
  a.gid = pw->pw_gid;
  a.name = pw->pw_name;
  a.groups = GroupNames(pw->pw_name, pw->pw_gid);
  return a;
}

}  // namespace

std::optional<LocalAccount> AccountByUid(uid_t uid) {
  struct passwd pw {};
  struct passwd* result = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &result) != 0 || result == nullptr) {
    return std::nullopt;
  }
  return FromPasswd(result);
}

std::optional<LocalAccount> AccountByName(const std::string& name) {
  if (name.empty()) return std::nullopt;
  struct passwd pw {};
  struct passwd* result = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &result) != 0 || result == nullptr) {
    return std::nullopt;
  }
  return FromPasswd(result);
}

}  // namespace tarn::auth
