// Store: tarn server's durable state in one SQLite file (WAL mode, synchronous=FULL):
// assemblies and their instances, keyed by user so that alice's and bob's "fmnist" never
// meet. Every write is a transaction that is on disk when the call returns, so a change is
// acknowledged only once it would survive kill -9 or a power cut; readers see whole
// transactions only.
//
// Not thread-safe: one owner (the service loop) calls it. Open() once per process; a second
// process opening the same file waits for the first's write lock (busy timeout), it does not
// corrupt it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

struct sqlite3;

namespace tarn::store {

struct AssemblyRecord {
  std::string user;
  std::string name;
  std::string spec_json;      // the assembly as accepted
  std::string desired_state;  // "STARTED" | "STOPPED"
  std::string state;          // ACCEPTED, STARTED, STABLE, ...
  std::string diagnostics;
  int64_t created_ms = 0;
  int64_t lifetime_deadline_ms = 0;  // 0: unlimited
  int64_t generation = 0;            // bumped by every update; optimistic concurrency
  // An upgrade in progress (the manager's JSON: its state, the new spec and both versions);
  // "" when none.
  std::string upgrade_json;

  friend bool operator==(const AssemblyRecord&, const AssemblyRecord&) = default;
};

struct InstanceRecord {
  std::string user;
  std::string assembly;
  std::string name;  // worker-0
  std::string component;
  int64_t index = 0;
  std::string state;  // RUNNING_BUT_UNREADY, READY, STOPPED, SUCCEEDED, FAILED, ...
  std::string node;
  std::string gpus_json = "[]";
  std::string container_id;
  std::string shim_dir;
  int64_t restarts = 0;
  std::string last_exit;  // diagnostics of the last exit
  int64_t launched_ms = 0;
  std::string ip;  // its own address (TARN_IP), kept while it holds its place
  std::string version;        // the spec version it runs (its assembly's `version`)
  std::string upgrade_state;  // "" | NEEDS_UPGRADE | UPGRADING | FAILED_UPGRADE

  friend bool operator==(const InstanceRecord&, const InstanceRecord&) = default;
};

class Store {
 public:
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // AlreadyExists when the user has an assembly of that name.
  Status CreateAssembly(const AssemblyRecord& record);
  StatusOr<AssemblyRecord> GetAssembly(const std::string& user, const std::string& name) const;
  // Every assembly of `user`, or of everyone when `user` is empty; by user, then name.
  StatusOr<std::vector<AssemblyRecord>> ListAssemblies(const std::string& user = "") const;
  // Replaces the record if its generation is still `record.generation` (else ABORTED: someone
  // changed it since it was read) and stores it with generation + 1.
  Status UpdateAssembly(const AssemblyRecord& record);
  // Deletes the assembly and all its instances.
  Status DeleteAssembly(const std::string& user, const std::string& name);

  // Inserts or replaces one instance of an existing assembly (NotFound otherwise).
  Status PutInstance(const InstanceRecord& record);
  Status DeleteInstance(const std::string& user, const std::string& assembly,
                        const std::string& name);
  StatusOr<std::vector<InstanceRecord>> ListInstances(const std::string& user,
                                                      const std::string& assembly) const;

  // Runs `body` in one transaction: all of its writes or none. Nested calls are an error.
  Status Transaction(const std::function<Status()>& body);

 private:
  explicit Store(sqlite3* db);
  Status Exec(const std::string& sql) const;

  sqlite3* db_;
  bool in_transaction_ = false;
};

}  // namespace tarn::store
