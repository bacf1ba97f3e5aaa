#include "auth/auth_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "auth/token.h"
#include "common/temp_dir.h"

namespace tarn::auth {
namespace {

class AuthStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void TearDown() override {
    store_.reset();
  }
  void Reopen() {
    store_.reset();
    auto s = AuthStore::Open(path(), &clock_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  std::string path() const { return (dir_ / "auth.db").string(); }

  TokenRecord Token(const std::string& tenant, const std::string& name, const std::string& secret,
                    int64_t expires_ms = 0) {
    return TokenRecord{tenant, name, TokenHash(secret), Role::kUser, clock_.WallMillis(),
                       expires_ms, tenant};
  }

  TempDir tmp_{"auth-store-test"};
  const std::filesystem::path dir_ = tmp_.path();
  FakeClock clock_;
  std::unique_ptr<AuthStore> store_;
};

TEST_F(AuthStoreTest, TheFileIsTheServersAlone) {
  struct stat st {};
  ASSERT_EQ(::stat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(AuthStoreTest, ALabelIsBoundToOneUidForGood) {
  auto a = store_->TenantOfAccount(1001, "Bob_dev");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(*a, "bob-dev");
  // Another account whose name maps to the same label is refused, never merged.
  auto b = store_->TenantOfAccount(1002, "bob-dev");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("\"bob-dev\" (uid 1002)"), std::string::npos)
      << b.status().message();
  EXPECT_NE(b.status().message().find("never merged"), std::string::npos);
  // Nor may a remote user take it.
  EXPECT_FALSE(store_->TenantOfRemote("bob_dev").ok());
  // The binding outlives the server, and a renamed account keeps its label.
  Reopen();
  EXPECT_EQ(*store_->TenantOfAccount(1001, "robert"), "bob-dev");
  EXPECT_FALSE(store_->TenantOfAccount(1002, "bob-dev").ok());
  ASSERT_TRUE(store_->Tenant("bob-dev").has_value());
  EXPECT_EQ(store_->Tenant("bob-dev")->uid, uid_t{1001});
}

TEST_F(AuthStoreTest, RemoteTenantsHoldTheirLabelWithoutAUid) {
  EXPECT_EQ(*store_->TenantOfRemote("carol"), "carol");
  EXPECT_EQ(*store_->TenantOfRemote("carol"), "carol");
  EXPECT_FALSE(store_->Tenant("carol")->uid.has_value());
  EXPECT_EQ(store_->TenantOfAccount(1003, "carol").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->TenantOfRemote("a.b").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(AuthStoreTest, TokensAreFoundByTheirSecretAndRevokedByName) {
  ASSERT_TRUE(store_->TenantOfAccount(1001, "alice").ok());
  const std::string secret = *NewToken();
  ASSERT_TRUE(store_->AddToken(Token("alice", "ci", secret)).ok());
  EXPECT_EQ(store_->AddToken(Token("alice", "ci", *NewToken())).code(),
            StatusCode::kAlreadyExists);
  ASSERT_TRUE(store_->AddToken(Token("bob", "ci", *NewToken())).ok());  // names are per tenant
  TokenRecord found;
  EXPECT_EQ(store_->FindToken(secret, &found), AuthStore::Found::kValid);
  EXPECT_EQ(found.tenant, "alice");
  EXPECT_EQ(found.name, "ci");
  EXPECT_EQ(store_->FindToken(*NewToken(), &found), AuthStore::Found::kUnknown);
  EXPECT_EQ(store_->Tokens("alice").size(), 1u);
  EXPECT_EQ(store_->Tokens("").size(), 2u);

  EXPECT_EQ(store_->RevokeToken("alice", "nope").code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->RevokeToken("bob", "nope").code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->RevokeToken("alice", "ci").ok());
  EXPECT_EQ(store_->FindToken(secret, &found), AuthStore::Found::kRevoked);
  Reopen();  // revocation is durable
  EXPECT_EQ(store_->FindToken(secret, &found), AuthStore::Found::kRevoked);
  EXPECT_TRUE(store_->Tokens("alice").empty());
  // The name is free again; the old secret stays revoked.
  const std::string again = *NewToken();
  ASSERT_TRUE(store_->AddToken(Token("alice", "ci", again)).ok());
  EXPECT_EQ(store_->FindToken(again, &found), AuthStore::Found::kValid);
  EXPECT_EQ(store_->FindToken(secret, &found), AuthStore::Found::kRevoked);
}

TEST_F(AuthStoreTest, TokensExpire) {
  const std::string secret = *NewToken();
  ASSERT_TRUE(store_->AddToken(Token("alice", "short", secret, clock_.WallMillis() + 1000)).ok());
  TokenRecord found;
  EXPECT_EQ(store_->FindToken(secret, &found), AuthStore::Found::kValid);
  clock_.Advance(std::chrono::milliseconds(1000));
  EXPECT_EQ(store_->FindToken(secret, &found), AuthStore::Found::kExpired);
}

// Only hashes reach the file.
TEST_F(AuthStoreTest, TheSecretIsNeverStored) {
  const std::string secret = *NewToken();
  ASSERT_TRUE(store_->AddToken(Token("alice", "ci", secret)).ok());
  store_.reset();
  std::string bytes;
  for (const char* suffix : {"", "-wal"}) {
    FILE* f = std::fopen((path() + suffix).c_str(), "rb");
    if (f == nullptr) continue;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
    std::fclose(f);
  }
  EXPECT_NE(bytes.find(TokenHash(secret)), std::string::npos);
  EXPECT_EQ(bytes.find(secret.substr(5)), std::string::npos);
}

}  // namespace
}  // namespace tarn::auth
