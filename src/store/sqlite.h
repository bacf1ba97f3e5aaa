// Statement: one prepared SQLite statement, finalized when it goes out of scope, with the
// binding and reading the stores need; errors come back as Status (a constraint violation
// as kAlreadyExists). Used by one thread at a time, as its connection allows.
#pragma once

#include <sqlite3.h>

#include <string>

#include "common/status.h"

namespace tarn::store {

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      status_ = InternalError(std::string("store: ") + sqlite3_errmsg(db));
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  const Status& status() const { return status_; }
  Statement& Bind(int i, const std::string& v) {
    if (stmt_) sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    if (stmt_) sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& BindNull(int i) {
    if (stmt_) sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // true: a row is ready; false: done.
  StatusOr<bool> Step() {
    if (!status_.ok()) return status_;
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    if (rc == SQLITE_CONSTRAINT) {
      return Status(StatusCode::kAlreadyExists, std::string("store: ") + sqlite3_errmsg(db_));
    }
    return InternalError(std::string("store: ") + sqlite3_errmsg(db_));
  }
  std::string Text(int col) const {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt_, col))
             : std::string();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  Status status_;
};

inline Status Run(Statement& s) {
  auto r = s.Step();
  return r.ok() ? OkStatus() : r.status();
}

}  // namespace tarn::store
