#include "auth/authenticator.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "auth/token.h"
#include "common/temp_dir.h"

namespace tarn::auth {
namespace {

// Accounts of a pretend machine: root, alice (in ml), bob, carol (in ops), dave (in wheel).
const std::map<std::string, LocalAccount> kAccounts = {
    {"root", {0, 0, "root", {"root"}}},
    {"alice", {1001, 1001, "alice", {"alice", "ml"}}},
    {"bob", {1002, 1002, "bob", {"bob"}}},
    {"carol", {1003, 1003, "carol", {"carol", "ops"}}},
    {"dave", {1004, 1004, "dave", {"dave", "wheel"}}},
    {"Alice", {1005, 1005, "Alice", {"Alice"}}},
};

class AuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = AuthStore::Open((dir_ / "auth.db").string(), &clock_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    config_.operators = Acl{false, {}, {"ops"}};
    config_.admins = Acl{false, {}, {"wheel"}};
    Make();
  }
  void TearDown() override {
    auth_.reset();
    store_.reset();
  }
  void Make() {
    Authenticator::Options o;
    o.config = config_;
    o.store = store_.get();
    o.clock = &clock_;
    o.by_uid = [this](uid_t uid) -> std::optional<LocalAccount> {
      ++lookups_;
      for (const auto& [n, a] : kAccounts) {
        if (a.uid == uid) return a;
      }
      return std::nullopt;
    };
    o.by_name = [this](const std::string& name) -> std::optional<LocalAccount> {
      ++lookups_;
      auto it = kAccounts.find(name);
      return it == kAccounts.end() ? std::nullopt : std::optional(it->second);
    };
    auth_ = std::make_unique<Authenticator>(o);
  }
  Credentials Socket(uid_t uid) {
    Credentials c;
    c.unix_socket = true;
    c.uid = uid;
    c.pid = 42;
    c.peer = "unix";
    return c;
  }
  Credentials Tcp(std::string_view authorization) {
    Credentials c;
    c.authorization = authorization;
    c.peer = "127.0.0.1:5000";
    c.loopback = true;
    return c;
  }
  std::string MakeToken(const std::string& tenant, const std::string& name, Role role,
                        int64_t expires_ms = 0) {
    std::string secret = *NewToken();
    EXPECT_TRUE(store_
                    ->AddToken({tenant, name, TokenHash(secret), role, clock_.WallMillis(),
                                expires_ms, tenant})
                    .ok());
    return secret;
  }

  TempDir tmp_{"authenticator-test"};
  const std::filesystem::path dir_ = tmp_.path();
  FakeClock clock_;
  AuthConfig config_;
  std::unique_ptr<AuthStore> store_;
  std::unique_ptr<Authenticator> auth_;
  int lookups_ = 0;
};

TEST_F(AuthenticatorTest, TheSocketPeerIsItsUidAndRootIsAdmin) {
  auto alice = auth_->Authenticate(Socket(1001));
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  EXPECT_EQ(alice->who.tenant, "alice");
  EXPECT_EQ(alice->who.uid, uid_t{1001});
  EXPECT_EQ(alice->who.role, Role::kUser);
  EXPECT_EQ(alice->method, AuthMethod::kSocket);
  EXPECT_EQ(alice->socket_pid, 42);
  EXPECT_EQ(auth_->Authenticate(Socket(0))->who.role, Role::kAdmin);
  EXPECT_EQ(auth_->Authenticate(Socket(1003))->who.role, Role::kOperator);  // group ops
  EXPECT_EQ(auth_->Authenticate(Socket(1004))->who.role, Role::kAdmin);     // group wheel
  // Whatever else the socket peer sends, it is its uid.
  Credentials c = Socket(1002);
  const std::string alice_name = "alice";
  c.simple_user = &alice_name;
  c.authorization = "Bearer " + MakeToken("alice", "t", Role::kUser);
  EXPECT_EQ(auth_->Authenticate(c)->who.tenant, "bob");
  // A uid with no account is no tenant.
  auto ghost = auth_->Authenticate(Socket(4242));
  EXPECT_EQ(ghost.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(AuthenticatorTest, CollidingLabelsRefuseTheSecondAccount) {
  ASSERT_TRUE(auth_->Authenticate(Socket(1001)).ok());  // alice takes "alice"
  auto other = auth_->Authenticate(Socket(1005));      // "Alice" maps to "alice" too
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("never merged"), std::string::npos);
  EXPECT_EQ(auth_->Authenticate(Socket(1001))->who.tenant, "alice");
}

TEST_F(AuthenticatorTest, TcpNeedsAValidToken) {
  AuthFailure why = AuthFailure::kNone;
  auto none = auth_->Authenticate(Tcp(""), &why);
  EXPECT_EQ(none.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(why, AuthFailure::kMissing);
  EXPECT_NE(none.status().message().find("Bearer"), std::string::npos);

  ASSERT_TRUE(auth_->Authenticate(Socket(1002)).ok());  // bob is a tenant
  const std::string token = MakeToken("bob", "laptop", Role::kUser);
  auto bob = auth_->Authenticate(Tcp("Bearer " + token), &why);
  ASSERT_TRUE(bob.ok()) << bob.status().ToString();
  EXPECT_EQ(bob->who.tenant, "bob");
  EXPECT_EQ(bob->who.uid, uid_t{1002});
  EXPECT_EQ(bob->method, AuthMethod::kToken);
  EXPECT_EQ(bob->token_name, "laptop");
  EXPECT_EQ(auth_->Authenticate(Tcp("bearer  " + token + " "))->who.tenant, "bob");

  struct Case {
    std::string header;
    AuthFailure want;
  };
  for (const Case& c : std::vector<Case>{
           {"Basic Ym9iOnB3", AuthFailure::kMalformed},
           {"Bearer " + token.substr(0, token.size() - 1), AuthFailure::kMalformed},
           {"Bearer " + *NewToken(), AuthFailure::kUnknown},
           {"Bearer", AuthFailure::kMalformed},
       }) {
    auto r = auth_->Authenticate(Tcp(c.header), &why);
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << c.header;
    EXPECT_EQ(why, c.want) << c.header << ": " << r.status().message();
    // No error names another tenant.
    EXPECT_EQ(r.status().message().find("bob"), std::string::npos) << r.status().message();
  }
  ASSERT_TRUE(store_->RevokeToken("bob", "laptop").ok());
  EXPECT_FALSE(auth_->Authenticate(Tcp("Bearer " + token), &why).ok());
  EXPECT_EQ(why, AuthFailure::kRevoked);

  const std::string brief = MakeToken("bob", "brief", Role::kUser, clock_.WallMillis() + 60000);
  EXPECT_TRUE(auth_->Authenticate(Tcp("Bearer " + brief)).ok());
  clock_.Advance(std::chrono::minutes(1));
  auto late = auth_->Authenticate(Tcp("Bearer " + brief), &why);
  EXPECT_EQ(why, AuthFailure::kExpired);
  EXPECT_NE(late.status().message().find("expired at 2023-11-14T22:14:21.000Z"), std::string::npos)
      << late.status().message();
}

// A token never does more than its owner may do now.
TEST_F(AuthenticatorTest, ATokensRoleIsCappedByItsOwnersRoleNow) {
  ASSERT_TRUE(auth_->Authenticate(Socket(1003)).ok());  // carol, an operator by group
  const std::string token = MakeToken("carol", "ops", Role::kAdmin);
  EXPECT_EQ(auth_->Authenticate(Tcp("Bearer " + token))->who.role, Role::kOperator);
  const std::string low = MakeToken("carol", "low", Role::kUser);
  EXPECT_EQ(auth_->Authenticate(Tcp("Bearer " + low))->who.role, Role::kUser);
}

TEST_F(AuthenticatorTest, SimpleAuthOnlyWhenConfiguredAndFromLoopback) {
  const std::string alice = "alice";
  Credentials c = Tcp("");
  c.simple_user = &alice;
  AuthFailure why;
  EXPECT_EQ(auth_->Authenticate(c, &why).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(why, AuthFailure::kMissing);
  config_.simple = true;
  Make();
  auto r = auth_->Authenticate(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->who.tenant, "alice");
  EXPECT_EQ(r->who.uid, uid_t{1001});
  EXPECT_EQ(r->method, AuthMethod::kSimple);
  // A name with no account is a remote tenant.
  const std::string ext = "Ext_User";
  c.simple_user = &ext;
  EXPECT_EQ(auth_->Authenticate(c)->who.tenant, "ext-user");
  EXPECT_FALSE(auth_->Authenticate(c)->who.uid.has_value());
  c.loopback = false;
  EXPECT_EQ(auth_->Authenticate(c).status().code(), StatusCode::kUnauthenticated);
}

TEST_F(AuthenticatorTest, OnlyAdminsActAsAnother) {
  Credentials c = Socket(1002);
  c.impersonate = "alice";
  auto bob = auth_->Authenticate(c);
  EXPECT_EQ(bob.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(bob.status().message().find("needs the admin role"), std::string::npos);
  c = Socket(1003);  // an operator may not either
  c.impersonate = "alice";
  EXPECT_EQ(auth_->Authenticate(c).status().code(), StatusCode::kPermissionDenied);

  c = Socket(0);
  c.impersonate = "alice";
  auto root = auth_->Authenticate(c);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(root->who.tenant, "alice");
  EXPECT_EQ(root->who.role, Role::kUser);  // alice's own role, not root's
  ASSERT_TRUE(root->actor.has_value());
  EXPECT_EQ(root->actor->account, "root");
  EXPECT_EQ(root->asker().tenant, "root");
  // Acting as a name without an account makes a remote tenant.
  c.impersonate = "ghost";
  EXPECT_FALSE(auth_->Authenticate(c)->who.uid.has_value());
}

TEST_F(AuthenticatorTest, AccountsAreLookedUpOncePerTtl) {
  ASSERT_TRUE(auth_->Authenticate(Socket(1001)).ok());
  const int after_first = lookups_;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(auth_->Authenticate(Socket(1001)).ok());
  EXPECT_EQ(lookups_, after_first);
  clock_.Advance(std::chrono::seconds(6));
  ASSERT_TRUE(auth_->Authenticate(Socket(1001)).ok());
  EXPECT_EQ(lookups_, after_first + 1);
}

// A connection remembers who it authenticated as, but nothing that changed since: a revoked
// token, an expired one, another token or another Impersonate-User on it is checked anew.
TEST_F(AuthenticatorTest, AConnectionRemembersItsCallerUntilAnythingChanges) {
  ASSERT_TRUE(auth_->Authenticate(Socket(1002)).ok());  // bob is a tenant
  const std::string token = MakeToken("bob", "laptop", Role::kUser, clock_.WallMillis() + 60000);
  const std::string header = "Bearer " + token;
  std::shared_ptr<Authenticator::Remembered> memo;
  auto first = auth_->AuthenticateRemembered(Tcp(header), &memo);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_NE(memo, nullptr);
  auto again = auth_->AuthenticateRemembered(Tcp(header), &memo);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), first->get()) << "the same caller, not looked up again";

  // Another token on the same connection is another caller.
  const std::string other = MakeToken("bob", "desk", Role::kUser);
  auto desk = auth_->AuthenticateRemembered(Tcp("Bearer " + other), &memo);
  ASSERT_TRUE(desk.ok());
  EXPECT_EQ((*desk)->token_name, "desk");
  // A token cut short is checked, not matched against what was remembered.
  AuthFailure why;
  EXPECT_FALSE(auth_->AuthenticateRemembered(Tcp(header.substr(0, header.size() - 1)), &memo, &why)
                   .ok());
  EXPECT_EQ(why, AuthFailure::kMalformed);

  // Revoked: refused at once on a connection that remembered it.
  ASSERT_TRUE(auth_->AuthenticateRemembered(Tcp(header), &memo).ok());
  ASSERT_TRUE(store_->RevokeToken("bob", "laptop").ok());
  EXPECT_FALSE(auth_->AuthenticateRemembered(Tcp(header), &memo, &why).ok());
  EXPECT_EQ(why, AuthFailure::kRevoked);

  // Expired: refused at its expiry, though remembered a moment before.
  const std::string brief = MakeToken("bob", "brief", Role::kUser, clock_.WallMillis() + 1000);
  ASSERT_TRUE(auth_->AuthenticateRemembered(Tcp("Bearer " + brief), &memo).ok());
  clock_.Advance(std::chrono::milliseconds(1000));
  EXPECT_FALSE(auth_->AuthenticateRemembered(Tcp("Bearer " + brief), &memo, &why).ok());
  EXPECT_EQ(why, AuthFailure::kExpired);

  // Acting as someone is checked anew: bob's socket may not, though bob was remembered.
  Credentials c = Socket(1002);
  ASSERT_TRUE(auth_->AuthenticateRemembered(c, &memo).ok());
  c.impersonate = "alice";
  EXPECT_EQ(auth_->AuthenticateRemembered(c, &memo).status().code(),
            StatusCode::kPermissionDenied);

  // The accounts behind a remembered answer are looked up again after account_ttl.
  Credentials alice = Socket(1001);
  ASSERT_TRUE(auth_->AuthenticateRemembered(alice, &memo).ok());
  const int looked = lookups_;
  ASSERT_TRUE(auth_->AuthenticateRemembered(alice, &memo).ok());
  EXPECT_EQ(lookups_, looked);
  clock_.Advance(std::chrono::seconds(6));
  ASSERT_TRUE(auth_->AuthenticateRemembered(alice, &memo).ok());
  EXPECT_EQ(lookups_, looked + 1);
}

TEST_F(AuthenticatorTest, SimpleAuthIsNeverRemembered) {
  config_.simple = true;
  Make();
  const std::string alice = "alice";
  Credentials c = Tcp("");
  c.simple_user = &alice;
  std::shared_ptr<Authenticator::Remembered> memo;
  ASSERT_TRUE(auth_->AuthenticateRemembered(c, &memo).ok());
  EXPECT_EQ(memo, nullptr);
}

}  // namespace
}  // namespace tarn::auth
