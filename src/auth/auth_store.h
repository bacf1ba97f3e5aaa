// AuthStore: the server's tenants and tokens, durable in their own SQLite file (the state
// directory's auth.db, mode 0600), read from memory.
//
// Tenants: each DNS label is bound, the first time an account uses tarn, to that account's
// uid for good, so the label is only another name for the uid: a second account whose name
// maps to the same label ("Bob_dev" and "bob-dev") is refused, never merged with the first.
// A remote tenant (a token user without a local account) holds its label with no uid.
//
// Tokens: a tenant's named bearer tokens, stored as hashes (token.h) with a role and an
// optional expiry. Revoking moves the hash to a list of revoked ones, so that a revoked
// token is told apart from an unknown one and its name can be used again.
//
// Thread-safe: lookups (every request) take a mutex over in-memory maps; writes go to the
// file first and then to the maps, so what a lookup finds is on disk.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <atomic>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "auth/identity.h"
#include "common/clock.h"
#include "common/status.h"

struct sqlite3;

namespace tarn::auth {

struct TenantRecord {
  std::string label;
  std::optional<uid_t> uid;  // none: a remote tenant
  std::string name;          // the account's name when it was bound
  int64_t created_ms = 0;
};

struct TokenRecord {
  std::string tenant;  // the owner's label
  std::string name;    // unique among the owner's tokens
  std::string hash;    // TokenHash of the secret
  Role role = Role::kUser;
  int64_t created_ms = 0;
  int64_t expires_ms = 0;  // 0: never
  std::string created_by;  // "alice", or "root as alice"
};

class AuthStore {
 public:
  // Opens (creating) the file at `path`, mode 0600.
  static StatusOr<std::unique_ptr<AuthStore>> Open(const std::string& path, const Clock* clock);
  ~AuthStore();
  AuthStore(const AuthStore&) = delete;
  AuthStore& operator=(const AuthStore&) = delete;

  // The label of local account `uid` (named `name` now): the one bound to the uid, else
  // UserToDnsLabel(name), bound now. InvalidArgument when the name maps to no DNS label;
  // FailedPrecondition when the label is bound to another account or to a remote tenant.
  StatusOr<std::string> TenantOfAccount(uid_t uid, const std::string& name);
  // The label of the remote tenant `name` (no local account), bound now if new. Errors as
  // TenantOfAccount's, when the label belongs to a local account.
  StatusOr<std::string> TenantOfRemote(const std::string& name);
  std::optional<TenantRecord> Tenant(const std::string& label) const;

  // AlreadyExists when the tenant has a token of that name.
  Status AddToken(const TokenRecord& record);

  enum class Found { kValid, kUnknown, kRevoked, kExpired };
  // The token whose secret is `token` (looked up by its hash), and whether it may be used.
  Found FindToken(std::string_view token, TokenRecord* record) const;
  // The tenant's tokens ("" for every tenant's), by tenant then name.
  std::vector<TokenRecord> Tokens(const std::string& tenant) const;
  // NotFound when the tenant has no token of that name.
  Status RevokeToken(const std::string& tenant, const std::string& name);

  // Changes with every change above (a tenant bound, a token added or revoked): what was
  // concluded from the store at one generation holds while it is still the same.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  AuthStore(sqlite3* db, const Clock* clock);
  Status Load();
  StatusOr<std::string> Bind(std::optional<uid_t> uid, const std::string& name);

  sqlite3* const db_;
  const Clock* const clock_;
  // Shared by the reads every request makes (a token, a tenant), exclusive for changes.
  mutable std::shared_mutex mu_;
  std::map<std::string, TenantRecord> tenants_;   // by label; guarded by mu_
  std::map<uid_t, std::string> label_of_uid_;     // guarded by mu_
  std::map<std::string, TokenRecord> tokens_;     // by hash; guarded by mu_
  std::set<std::string> revoked_;                 // hashes; guarded by mu_
  std::atomic<uint64_t> generation_{0};
};

}  // namespace tarn::auth
