// Acl: who an access-control list admits, in Hadoop's format (YARN's queue ACLs, tarn's
// roles): "*" admits everyone; otherwise "USERS GROUPS", comma-separated account names, one
// space, comma-separated group names ("alice,bob ml,ops"; " ops" is the group ops alone).
// Names are matched exactly (account names are case-sensitive). Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tarn {

struct Acl {
  bool everyone = false;
  std::vector<std::string> users;
  std::vector<std::string> groups;

  static Acl Everyone() { return Acl{true, {}, {}}; }

  // True when `account` is listed, or is a member of a listed group (`groups`: the account's
  // groups, primary and supplementary, by name).
  bool Admits(std::string_view account, const std::vector<std::string>& groups) const;
  bool empty() const { return !everyone && users.empty() && groups.empty(); }
  // Back in Hadoop's format: "*", "alice,bob ml".
  std::string ToString() const;

  friend bool operator==(const Acl&, const Acl&) = default;
};

// Parses `text`; `where` names the field in errors ("queues[0].acl_submit_applications: ...").
// An ACL that names nobody is an error (a typo must not lock everyone out silently).
StatusOr<Acl> ParseAcl(std::string_view text, const std::string& where);

}  // namespace tarn
