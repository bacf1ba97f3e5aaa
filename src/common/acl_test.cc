#include "common/acl.h"

#include <gtest/gtest.h>

namespace tarn {
namespace {

TEST(AclTest, StarAdmitsEveryone) {
  auto acl = ParseAcl("*", "x");
  ASSERT_TRUE(acl.ok()) << acl.status().ToString();
  EXPECT_TRUE(acl->Admits("anyone", {}));
  EXPECT_EQ(acl->ToString(), "*");
}

TEST(AclTest, UsersThenGroupsAfterOneSpace) {
  auto acl = ParseAcl("alice,bob ml,ops", "x");
  ASSERT_TRUE(acl.ok()) << acl.status().ToString();
  EXPECT_EQ(acl->users, (std::vector<std::string>{"alice", "bob"}));
  EXPECT_EQ(acl->groups, (std::vector<std::string>{"ml", "ops"}));
  EXPECT_TRUE(acl->Admits("alice", {}));
  EXPECT_TRUE(acl->Admits("carol", {"carol", "ops"}));
  EXPECT_FALSE(acl->Admits("carol", {"carol", "users"}));
  EXPECT_FALSE(acl->Admits("Alice", {}));  // account names are case-sensitive
  EXPECT_FALSE(acl->Admits("ml", {}));     // a group's name is not a user's
  EXPECT_EQ(acl->ToString(), "alice,bob ml,ops");
}

TEST(AclTest, GroupsAlone) {
  auto acl = ParseAcl(" admins", "x");
  ASSERT_TRUE(acl.ok()) << acl.status().ToString();
  EXPECT_TRUE(acl->users.empty());
  EXPECT_TRUE(acl->Admits("dave", {"admins"}));
  EXPECT_FALSE(acl->Admits("admins", {}));
}

TEST(AclTest, ErrorsNameTheFieldAndTheForm) {
  for (const char* bad : {"", " ", ",,", " ,"}) {
    auto acl = ParseAcl(bad, "auth.admins");
    ASSERT_FALSE(acl.ok()) << "\"" << bad << "\"";
    EXPECT_EQ(acl.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(acl.status().message().find("auth.admins: names no user"), std::string::npos)
        << acl.status().message();
  }
  auto spaces = ParseAcl("a b c", "q");
  ASSERT_FALSE(spaces.ok());
  EXPECT_NE(spaces.status().message().find("more than one space"), std::string::npos);
  auto star = ParseAcl("alice,*", "q");
  ASSERT_FALSE(star.ok());
  EXPECT_NE(star.status().message().find("must stand alone"), std::string::npos);
}

}  // namespace
}  // namespace tarn
