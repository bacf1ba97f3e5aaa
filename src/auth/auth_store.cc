#include "auth/auth_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/token.h"
#include "common/file.h"
#include "common/dns_name.h"
#include "store/sqlite.h"

namespace tarn::auth {
namespace {

using store::Statement;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS tenants (
  label TEXT PRIMARY KEY,
  uid INTEGER UNIQUE,
  name TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
  hash TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  role TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  UNIQUE (tenant, name)
);
CREATE TABLE IF NOT EXISTS revoked_tokens (
  hash TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  revoked_ms INTEGER NOT NULL
);
)sql";

Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    return InternalError("auth store: " + why);
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<AuthStore>> AuthStore::Open(const std::string& path, const Clock* clock) {
  // Made 0600 before SQLite opens it: token hashes and the tenants are the server's alone.
  if (Status s = MakeDatabaseFilePrivate(path); !s.ok()) {
    return UnavailableError("the auth database: " + s.message());
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return UnavailableError(path + ": cannot open the auth database: " + why);
  }
  std::unique_ptr<AuthStore> s(new AuthStore(db, clock));
  sqlite3_busy_timeout(db, 5000);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", kSchema}) {
    if (Status st = Exec(db, sql); !st.ok()) return st.WithContext(path);
  }
  if (Status st = s->Load(); !st.ok()) return st.WithContext(path);
  return s;
}

AuthStore::AuthStore(sqlite3* db, const Clock* clock) : db_(db), clock_(clock) {}

AuthStore::~AuthStore() { sqlite3_close(db_); }

Status AuthStore::Load() {
  std::lock_guard lock(mu_);
  Statement t(db_, "SELECT label, uid, name, created_ms FROM tenants");
  for (;;) {
    ASSIGN_OR_RETURN(bool row, t.Step());
    if (!row) break;
    TenantRecord r{t.Text(0), std::nullopt, t.Text(2), t.Int(3)};
    if (!t.IsNull(1)) {
      r.uid = static_cast<uid_t>(t.Int(1));
      label_of_uid_[*r.uid] = r.label;
    }
    tenants_[r.label] = std::move(r);
  }
  Statement k(db_,
              "SELECT hash, tenant, name, role, created_ms, expires_ms, created_by FROM tokens");
  for (;;) {
    ASSIGN_OR_RETURN(bool row, k.Step());
    if (!row) break;
    TokenRecord r{k.Text(1), k.Text(2), k.Text(0), Role::kUser, k.Int(4), k.Int(5), k.Text(6)};
    auto role = ParseRole(k.Text(3));
    if (!role.ok()) return DataLossError("token " + r.name + " of " + r.tenant + ": " +
                                         role.status().message());
    r.role = *role;
    tokens_[r.hash] = std::move(r);
  }
  Statement v(db_, "SELECT hash FROM revoked_tokens");
  for (;;) {
    ASSIGN_OR_RETURN(bool row, v.Step());
    if (!row) break;
    revoked_.insert(v.Text(0));
  }
  return OkStatus();
}

StatusOr<std::string> AuthStore::Bind(std::optional<uid_t> uid, const std::string& name) {
  {
    // Every request asks: the bound answer is a read, which the I/O threads share.
    std::shared_lock read(mu_);
    if (uid) {
      if (auto it = label_of_uid_.find(*uid); it != label_of_uid_.end()) return it->second;
    } else if (auto it = tenants_.find(UserToDnsLabel(name));
               it != tenants_.end() && !it->second.uid) {
      return it->first;
    }
  }
  std::lock_guard lock(mu_);
  if (uid) {
    if (auto it = label_of_uid_.find(*uid); it != label_of_uid_.end()) return it->second;
  }
  const std::string label = UserToDnsLabel(name);
  const std::string who = uid ? "account \"" + name + "\" (uid " + std::to_string(*uid) + ")"
                              : "remote user \"" + name + "\"";
  if (!IsDnsLabel(label)) {
    return InvalidArgumentError(who + ": the name does not map to a DNS label (letters, digits, "
                                "'-' and '_', at most 63), so it cannot name assemblies");
  }
  if (auto it = tenants_.find(label); it != tenants_.end()) {
    const TenantRecord& held = it->second;
    if (held.uid == uid) return label;  // a remote tenant asking again
    return FailedPreconditionError(
        who + " maps to the tenant label \"" + label + "\", which " +
        (held.uid ? "another local account already holds"
                  : "a remote user (a token owner without a local account) already holds") +
        "; two accounts are never merged into one tenant: rename one of them, or ask an admin");
  }
  TenantRecord r{label, uid, name, clock_->WallMillis()};
  Statement s(db_, "INSERT INTO tenants (label, uid, name, created_ms) VALUES (?, ?, ?, ?)");
  s.Bind(1, label);
  if (uid) {
    s.Bind(2, static_cast<int64_t>(*uid));
  } else {
    s.BindNull(2);
  }
  s.Bind(3, name).Bind(4, r.created_ms);
  RETURN_IF_ERROR(store::Run(s));
  if (uid) label_of_uid_[*uid] = label;
  tenants_[label] = std::move(r);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return label;
}

StatusOr<std::string> AuthStore::TenantOfAccount(uid_t uid, const std::string& name) {
  return Bind(uid, name);
}

StatusOr<std::string> AuthStore::TenantOfRemote(const std::string& name) {
  return Bind(std::nullopt, name);
}

std::optional<TenantRecord> AuthStore::Tenant(const std::string& label) const {
  std::shared_lock lock(mu_);
  auto it = tenants_.find(label);
  if (it == tenants_.end()) return std::nullopt;
  return it->second;
}

Status AuthStore::AddToken(const TokenRecord& r) {
  std::lock_guard lock(mu_);
  for (const auto& [hash, t] : tokens_) {
    if (t.tenant == r.tenant && t.name == r.name) {
      return AlreadyExistsError("you already have a token named \"" + r.name +
                                "\" (revoke it first, or choose another --name)");
    }
  }
  Statement s(db_,
              "INSERT INTO tokens (hash, tenant, name, role, created_ms, expires_ms, created_by) "
              "VALUES (?, ?, ?, ?, ?, ?, ?)");
  s.Bind(1, r.hash).Bind(2, r.tenant).Bind(3, r.name).Bind(4, std::string(RoleName(r.role)));
  s.Bind(5, r.created_ms).Bind(6, r.expires_ms).Bind(7, r.created_by);
  RETURN_IF_ERROR(store::Run(s));
  tokens_[r.hash] = r;
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return OkStatus();
}

AuthStore::Found AuthStore::FindToken(std::string_view token, TokenRecord* record) const {
  const std::string hash = TokenHash(token);
  std::shared_lock lock(mu_);
  auto it = tokens_.find(hash);
  // The map found it by the hash; the constant-time compare is the habit of never comparing
  // credentials with memcmp, not a defence the hash lookup needs.
  if (it != tokens_.end() && ConstantTimeEquals(it->first, hash)) {
    *record = it->second;
    if (record->expires_ms > 0 && clock_->WallMillis() >= record->expires_ms) {
      return Found::kExpired;
    }
    return Found::kValid;
  }
  return revoked_.count(hash) ? Found::kRevoked : Found::kUnknown;
}

std::vector<TokenRecord> AuthStore::Tokens(const std::string& tenant) const {
  std::shared_lock lock(mu_);
  std::vector<TokenRecord> out;
  for (const auto& [hash, t] : tokens_) {
    if (tenant.empty() || t.tenant == tenant) out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) {
    return std::tie(a.tenant, a.name) < std::tie(b.tenant, b.name);
  });
  return out;
}

Status AuthStore::RevokeToken(const std::string& tenant, const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = tokens_.begin();
  while (it != tokens_.end() && !(it->second.tenant == tenant && it->second.name == name)) ++it;
  if (it == tokens_.end()) return NotFoundError("no token named \"" + name + "\"");
  const std::string hash = it->first;
  RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
  Statement del(db_, "DELETE FROM tokens WHERE hash = ?");
  del.Bind(1, hash);
  Statement add(db_,
                "INSERT OR REPLACE INTO revoked_tokens (hash, tenant, name, revoked_ms) "
                "VALUES (?, ?, ?, ?)");
  add.Bind(1, hash).Bind(2, tenant).Bind(3, name).Bind(4, clock_->WallMillis());
  Status st = store::Run(del);
  if (st.ok()) st = store::Run(add);
  if (st.ok()) st = Exec(db_, "COMMIT");
  if (!st.ok()) {
    Exec(db_, "ROLLBACK").ok();
    return st;
  }
  tokens_.erase(it);
  revoked_.insert(hash);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return OkStatus();
}

}  // namespace tarn::auth
