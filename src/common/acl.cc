#include "common/acl.h"

#include <algorithm>

#include "common/strings.h"

namespace tarn {
namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace

bool Acl::Admits(std::string_view account, const std::vector<std::string>& account_groups) const {
  if (everyone) return true;
  if (std::find(users.begin(), users.end(), account) != users.end()) return true;
  for (const std::string& g : account_groups) {
    if (std::find(groups.begin(), groups.end(), g) != groups.end()) return true;
  }
  return false;
}

std::string Acl::ToString() const {
  if (everyone) return "*";
  return groups.empty() ? Join(users) : Join(users) + " " + Join(groups);
}

StatusOr<Acl> ParseAcl(std::string_view text, const std::string& where) {
  Acl acl;
  if (text == "*") return Acl::Everyone();
  const size_t space = text.find(' ');
  acl.users = SplitCommas(text.substr(0, space));
  if (space != std::string_view::npos) {
    std::string_view rest = text.substr(space + 1);
    if (rest.find(' ') != std::string_view::npos) {
      return InvalidArgumentError(where + ": \"" + std::string(text) +
                                  "\" has more than one space (expected \"*\" or "
                                  "\"user1,user2 group1,group2\")");
    }
    acl.groups = SplitCommas(rest);
  }
  for (const auto* list : {&acl.users, &acl.groups}) {
    for (const std::string& n : *list) {
      if (n == "*") {
        return InvalidArgumentError(where + ": \"*\" must stand alone (it admits everyone)");
      }
    }
  }
  if (acl.empty()) {
    return InvalidArgumentError(where + ": names no user and no group (expected \"*\" or "
                                        "\"user1,user2 group1,group2\")");
  }
  return acl;
}

}  // namespace tarn
