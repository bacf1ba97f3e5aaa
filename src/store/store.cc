#include "store/store.h"

#include <sqlite3.h>

#include <cstdlib>

#include "common/file.h"
#include "store/sqlite.h"

namespace tarn::store {
namespace {

constexpr int kSchemaVersion = 3;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS assemblies (
  user TEXT NOT NULL,
  name TEXT NOT NULL,
  spec TEXT NOT NULL,
  desired_state TEXT NOT NULL,
  state TEXT NOT NULL,
  diagnostics TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  lifetime_deadline_ms INTEGER NOT NULL,
  generation INTEGER NOT NULL,
  upgrade TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (user, name)
);
CREATE TABLE IF NOT EXISTS instances (
  user TEXT NOT NULL,
  assembly TEXT NOT NULL,
  name TEXT NOT NULL,
  component TEXT NOT NULL,
  idx INTEGER NOT NULL,
  state TEXT NOT NULL,
  node TEXT NOT NULL,
  gpus TEXT NOT NULL,
  container_id TEXT NOT NULL,
  shim_dir TEXT NOT NULL,
  restarts INTEGER NOT NULL,
  last_exit TEXT NOT NULL,
  launched_ms INTEGER NOT NULL,
  ip TEXT NOT NULL DEFAULT '',
  version TEXT NOT NULL DEFAULT '',
  upgrade_state TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (user, assembly, name),
  FOREIGN KEY (user, assembly) REFERENCES assemblies (user, name) ON DELETE CASCADE
);
)sql";

constexpr const char* kAssemblyColumns =
    "user, name, spec, desired_state, state, diagnostics, created_ms, lifetime_deadline_ms, "
    "generation, upgrade";

AssemblyRecord ReadAssembly(const Statement& s) {
  return {s.Text(0), s.Text(1), s.Text(2), s.Text(3), s.Text(4),
          s.Text(5), s.Int(6),  s.Int(7),  s.Int(8),  s.Text(9)};
}

}  // namespace

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  // Every tenant's assemblies (their environments too): the server's account's alone.
  if (path != ":memory:") {
    if (Status s = MakeDatabaseFilePrivate(path); !s.ok()) {
      return UnavailableError("the state database: " + s.message());
    }
  }
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return UnavailableError(path + ": cannot open the state database: " + why);
  }
  std::unique_ptr<Store> store(new Store(db));
  sqlite3_busy_timeout(db, 5000);
  // WAL: readers never block the writer; FULL: a commit is on disk when it returns.
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
    if (Status s = store->Exec(pragma); !s.ok()) return s.WithContext(path);
  }
  if (Status s = store->Exec(kSchema); !s.ok()) return s.WithContext(path);
  Statement get(db, "SELECT value FROM meta WHERE key = 'schema_version'");
  ASSIGN_OR_RETURN(bool found, get.Step());
  if (!found) {
    RETURN_IF_ERROR(store->Exec("INSERT INTO meta VALUES ('schema_version', '" +
                                std::to_string(kSchemaVersion) + "')"));
  } else if (const int64_t found_version = std::atoll(get.Text(0).c_str());
             found_version < kSchemaVersion) {
    // Each step in one transaction: version 2 gave each instance its own address; version 3
    // records upgrades (the assembly's, and each instance's spec version and upgrade state).
    RETURN_IF_ERROR(
        store
            ->Transaction([&]() -> Status {
              if (found_version < 2) {
                RETURN_IF_ERROR(
                    store->Exec("ALTER TABLE instances ADD COLUMN ip TEXT NOT NULL DEFAULT ''"));
              }
              RETURN_IF_ERROR(store->Exec(
                  "ALTER TABLE assemblies ADD COLUMN upgrade TEXT NOT NULL DEFAULT ''"));
              RETURN_IF_ERROR(
                  store->Exec("ALTER TABLE instances ADD COLUMN version TEXT NOT NULL DEFAULT ''"));
              RETURN_IF_ERROR(store->Exec(
                  "ALTER TABLE instances ADD COLUMN upgrade_state TEXT NOT NULL DEFAULT ''"));
              return store->Exec("UPDATE meta SET value = '" + std::to_string(kSchemaVersion) +
                                 "' WHERE key = 'schema_version'");
            })
            .WithContext(path));
  } else if (std::atoll(get.Text(0).c_str()) > kSchemaVersion) {
    return FailedPreconditionError(path + ": written by a newer tarn (schema " + get.Text(0) +
                                   ", this tarn knows " + std::to_string(kSchemaVersion) +
                                   "); it was left untouched");
  }
  return store;
}

Store::Store(sqlite3* db) : db_(db) {}

Store::~Store() { sqlite3_close(db_); }

Status Store::Exec(const std::string& sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return InternalError("store: " + why);
  }
  return OkStatus();
}

Status Store::Transaction(const std::function<Status()>& body) {
  if (in_transaction_) return FailedPreconditionError("store: nested transaction");
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  in_transaction_ = true;
  Status s = body();
  in_transaction_ = false;
  if (!s.ok()) {
    Exec("ROLLBACK").ok();
    return s;
  }
  if (Status c = Exec("COMMIT"); !c.ok()) {
    Exec("ROLLBACK").ok();
    return c;
  }
  return OkStatus();
}

Status Store::CreateAssembly(const AssemblyRecord& r) {
  Statement s(db_, (std::string("INSERT INTO assemblies (") + kAssemblyColumns +
                    ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                       .c_str());
  s.Bind(1, r.user).Bind(2, r.name).Bind(3, r.spec_json).Bind(4, r.desired_state);
  s.Bind(5, r.state).Bind(6, r.diagnostics).Bind(7, r.created_ms);
  s.Bind(8, r.lifetime_deadline_ms).Bind(9, r.generation).Bind(10, r.upgrade_json);
  Status st = Run(s);
  if (st.code() == StatusCode::kAlreadyExists) {
    return AlreadyExistsError("assembly " + r.name + " of user " + r.user + " already exists");
  }
  return st;
}

StatusOr<AssemblyRecord> Store::GetAssembly(const std::string& user,
                                            const std::string& name) const {
  Statement s(db_, (std::string("SELECT ") + kAssemblyColumns +
                    " FROM assemblies WHERE user = ? AND name = ?")
                       .c_str());
  s.Bind(1, user).Bind(2, name);
  ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) return NotFoundError("assembly " + name + " of user " + user + " does not exist");
  return ReadAssembly(s);
}

StatusOr<std::vector<AssemblyRecord>> Store::ListAssemblies(const std::string& user) const {
  std::string sql = std::string("SELECT ") + kAssemblyColumns + " FROM assemblies" +
                    (user.empty() ? "" : " WHERE user = ?") + " ORDER BY user, name";
  Statement s(db_, sql.c_str());
  if (!user.empty()) s.Bind(1, user);
  std::vector<AssemblyRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadAssembly(s));
  }
  return out;
}

Status Store::UpdateAssembly(const AssemblyRecord& r) {
  Statement s(db_,
              "UPDATE assemblies SET spec = ?, desired_state = ?, state = ?, diagnostics = ?, "
              "lifetime_deadline_ms = ?, upgrade = ?, generation = generation + 1 "
              "WHERE user = ? AND name = ? AND generation = ?");
  s.Bind(1, r.spec_json).Bind(2, r.desired_state).Bind(3, r.state).Bind(4, r.diagnostics);
  s.Bind(5, r.lifetime_deadline_ms).Bind(6, r.upgrade_json).Bind(7, r.user).Bind(8, r.name);
  s.Bind(9, r.generation);
  RETURN_IF_ERROR(Run(s));
  if (sqlite3_changes(db_) == 1) return OkStatus();
  auto current = GetAssembly(r.user, r.name);
  if (!current.ok()) return current.status();
  return Status(StatusCode::kAborted, "assembly " + r.name + " of user " + r.user +
                                          " changed since it was read (generation " +
                                          std::to_string(current->generation) + ", not " +
                                          std::to_string(r.generation) + ")");
}

Status Store::DeleteAssembly(const std::string& user, const std::string& name) {
  Statement s(db_, "DELETE FROM assemblies WHERE user = ? AND name = ?");
  s.Bind(1, user).Bind(2, name);
  RETURN_IF_ERROR(Run(s));
  if (sqlite3_changes(db_) == 0) {
    return NotFoundError("assembly " + name + " of user " + user + " does not exist");
  }
  return OkStatus();
}

Status Store::PutInstance(const InstanceRecord& r) {
  Statement s(db_,
              "INSERT OR REPLACE INTO instances (user, assembly, name, component, idx, state, "
              "node, gpus, container_id, shim_dir, restarts, last_exit, launched_ms, ip, version, "
              "upgrade_state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.Bind(1, r.user).Bind(2, r.assembly).Bind(3, r.name).Bind(4, r.component).Bind(5, r.index);
  s.Bind(6, r.state).Bind(7, r.node).Bind(8, r.gpus_json).Bind(9, r.container_id);
  s.Bind(10, r.shim_dir).Bind(11, r.restarts).Bind(12, r.last_exit).Bind(13, r.launched_ms);
  s.Bind(14, r.ip).Bind(15, r.version).Bind(16, r.upgrade_state);
  Status st = Run(s);
  if (st.code() == StatusCode::kAlreadyExists) {  // the foreign key: no such assembly
    return NotFoundError("assembly " + r.assembly + " of user " + r.user + " does not exist");
  }
  return st;
}

Status Store::DeleteInstance(const std::string& user, const std::string& assembly,
                             const std::string& name) {
  Statement s(db_, "DELETE FROM instances WHERE user = ? AND assembly = ? AND name = ?");
  s.Bind(1, user).Bind(2, assembly).Bind(3, name);
  RETURN_IF_ERROR(Run(s));
  if (sqlite3_changes(db_) == 0) return NotFoundError("no instance " + name);
  return OkStatus();
}

StatusOr<std::vector<InstanceRecord>> Store::ListInstances(const std::string& user,
                                                           const std::string& assembly) const {
  Statement s(
      db_,
      "SELECT user, assembly, name, component, idx, state, node, gpus, container_id, "
      "shim_dir, restarts, last_exit, launched_ms, ip, version, upgrade_state FROM instances "
      "WHERE user = ? AND assembly = ? ORDER BY component, idx");
  s.Bind(1, user).Bind(2, assembly);
  std::vector<InstanceRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back({s.Text(0), s.Text(1), s.Text(2), s.Text(3), s.Int(4), s.Text(5), s.Text(6),
                   s.Text(7), s.Text(8), s.Text(9), s.Int(10), s.Text(11), s.Int(12), s.Text(13),
                   s.Text(14), s.Text(15)});
  }
  return out;
}

}  // namespace tarn::store
