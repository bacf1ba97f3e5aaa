#include "runtime/run_as.h"

#include <gtest/gtest.h>

#include <map>

namespace tarn::runtime {
namespace {

std::optional<Account> Fake(const std::string& name) {
  static const std::map<std::string, Account> accounts = {{"alice", {"alice", 1001, 1001}},
                                                          {"daemon", {"daemon", 1, 1}},
                                                          {"yarn", {"yarn", 1500, 1500}},
                                                          {"root", {"root", 0, 0}},
                                                          {"nobody", {"nobody", 65534, 65534}}};
  auto it = accounts.find(name);
  if (it == accounts.end()) return std::nullopt;
  return it->second;
}

TEST(ResolveRunAs, OwnAccountWhenItPassesTheGuards) {
  auto r = ResolveRunAs({}, "alice", false, 0, Fake);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->account.uid, 1001u);
  EXPECT_FALSE(r->privileged);
}

TEST(ResolveRunAs, FallsBackToTheLocalUser) {
  struct Case {
    const char* user;
    const char* why;
  };
  for (const Case& c : {Case{"bob", "user bob has no account on this machine"},
                        Case{"daemon", "user daemon has uid 1, below the minimum 1000"},
                        Case{"yarn", "user yarn is banned from running containers"},
                        Case{"root", "user root is root"}}) {
    auto r = ResolveRunAs({}, c.user, false, 0, Fake);
    ASSERT_TRUE(r.ok()) << c.user;
    EXPECT_EQ(r->account.name, "nobody") << c.user;
    EXPECT_EQ(r->reason, std::string(c.why) + "; running as nobody");
  }
}

TEST(ResolveRunAs, PrivilegedOnlyWhenAllowed) {
  auto denied = ResolveRunAs({}, "alice", true, 0, Fake);
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  RunAsPolicy allow;
  allow.allow_privileged = true;
  auto r = ResolveRunAs(allow, "alice", true, 0, Fake);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->account.uid, 0u);
  EXPECT_TRUE(r->privileged);
}

TEST(ResolveRunAs, MissingOrRootLocalUserIsAnError) {
  RunAsPolicy p;
  p.local_user = "ghost";
  EXPECT_EQ(ResolveRunAs(p, "bob", false, 0, Fake).status().code(),
            StatusCode::kFailedPrecondition);
  p.local_user = "root";
  EXPECT_EQ(ResolveRunAs(p, "bob", false, 0, Fake).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(ResolveRunAs, NonRootDaemonRunsEverythingAsItself) {
  auto r = ResolveRunAs({}, "alice", true, 65534, Fake);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->account.uid, 65534u);
  EXPECT_FALSE(r->privileged);
}

}  // namespace
}  // namespace tarn::runtime
