#include "store/store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace tarn::store {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tarn-store-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/state.db";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::unique_ptr<Store> OpenOk() {
    auto s = Store::Open(path_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  static AssemblyRecord Assembly(const std::string& user, const std::string& name) {
    return {user, name, "{\"name\":\"" + name + "\"}", "STARTED", "ACCEPTED", "", 1000, 0, 1, ""};
  }
  static InstanceRecord Instance(const std::string& user, const std::string& assembly,
                                 const std::string& component, int64_t index) {
    InstanceRecord r;
    r.user = user;
    r.assembly = assembly;
    r.component = component;
    r.index = index;
    r.name = component + "-" + std::to_string(index);
    r.state = "READY";
    r.node = "n1";
    r.gpus_json = "[0]";
    return r;
  }

  std::string dir_, path_;
};

TEST_F(StoreTest, AssembliesAreKeyedByUser) {
  auto store = OpenOk();
  ASSERT_TRUE(store->CreateAssembly(Assembly("alice", "fmnist")).ok());
  ASSERT_TRUE(store->CreateAssembly(Assembly("bob", "fmnist")).ok());
  EXPECT_EQ(store->CreateAssembly(Assembly("alice", "fmnist")).code(), StatusCode::kAlreadyExists);
  auto alice = store->GetAssembly("alice", "fmnist");
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(*alice, Assembly("alice", "fmnist"));
  EXPECT_EQ(store->GetAssembly("carol", "fmnist").status().code(), StatusCode::kNotFound);
  auto mine = store->ListAssemblies("bob");
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].user, "bob");
  EXPECT_EQ(store->ListAssemblies()->size(), 2u);
  ASSERT_TRUE(store->DeleteAssembly("alice", "fmnist").ok());
  EXPECT_EQ(store->DeleteAssembly("alice", "fmnist").code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->GetAssembly("bob", "fmnist").ok());
}

TEST_F(StoreTest, UpdatesAreCheckedAgainstTheGenerationRead) {
  auto store = OpenOk();
  ASSERT_TRUE(store->CreateAssembly(Assembly("alice", "a")).ok());
  AssemblyRecord r = *store->GetAssembly("alice", "a");
  AssemblyRecord stale = r;
  r.state = "STABLE";
  ASSERT_TRUE(store->UpdateAssembly(r).ok());
  EXPECT_EQ(store->GetAssembly("alice", "a")->generation, 2);
  stale.state = "FAILED";
  Status s = store->UpdateAssembly(stale);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(store->GetAssembly("alice", "a")->state, "STABLE");
  EXPECT_EQ(store->UpdateAssembly(Assembly("alice", "missing")).code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, InstancesBelongToTheirAssembly) {
  auto store = OpenOk();
  EXPECT_EQ(store->PutInstance(Instance("alice", "a", "worker", 0)).code(), StatusCode::kNotFound);
  ASSERT_TRUE(store->CreateAssembly(Assembly("alice", "a")).ok());
  ASSERT_TRUE(store->CreateAssembly(Assembly("bob", "a")).ok());
  for (int i = 2; i >= 0; --i)
    ASSERT_TRUE(store->PutInstance(Instance("alice", "a", "worker", i)).ok());
  ASSERT_TRUE(store->PutInstance(Instance("alice", "a", "ps", 0)).ok());
  ASSERT_TRUE(store->PutInstance(Instance("bob", "a", "worker", 0)).ok());
  InstanceRecord changed = Instance("alice", "a", "worker", 1);
  changed.restarts = 3;
  changed.last_exit = "exited with code 1";
  ASSERT_TRUE(store->PutInstance(changed).ok());  // replaces
  auto list = store->ListInstances("alice", "a");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 4u);
  EXPECT_EQ((*list)[0].name, "ps-0");
  EXPECT_EQ((*list)[1].name, "worker-0");
  EXPECT_EQ((*list)[2], changed);
  ASSERT_TRUE(store->DeleteInstance("alice", "a", "worker-2").ok());
  EXPECT_EQ(store->DeleteInstance("alice", "a", "worker-2").code(), StatusCode::kNotFound);
  // Destroying an assembly forgets its instances, and only its own.
  ASSERT_TRUE(store->DeleteAssembly("alice", "a").ok());
  EXPECT_TRUE(store->ListInstances("alice", "a")->empty());
  EXPECT_EQ(store->ListInstances("bob", "a")->size(), 1u);
}

TEST_F(StoreTest, ATransactionIsAllOrNothing) {
  auto store = OpenOk();
  Status s = store->Transaction([&]() -> Status {
    RETURN_IF_ERROR(store->CreateAssembly(Assembly("alice", "a")));
    RETURN_IF_ERROR(store->PutInstance(Instance("alice", "a", "w", 0)));
    return InternalError("the spawn failed");
  });
  EXPECT_EQ(s.message(), "the spawn failed");
  EXPECT_EQ(store->GetAssembly("alice", "a").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store
                  ->Transaction([&]() -> Status {
                    RETURN_IF_ERROR(store->CreateAssembly(Assembly("alice", "a")));
                    return store->PutInstance(Instance("alice", "a", "w", 0));
                  })
                  .ok());
  EXPECT_EQ(store->ListInstances("alice", "a")->size(), 1u);
  EXPECT_EQ(
      store->Transaction([&] { return store->Transaction([] { return OkStatus(); }); }).code(),
      StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, SurvivesReopening) {
  {
    auto store = OpenOk();
    ASSERT_TRUE(store->CreateAssembly(Assembly("alice", "a")).ok());
    ASSERT_TRUE(store->PutInstance(Instance("alice", "a", "w", 0)).ok());
  }
  auto store = OpenOk();
  EXPECT_EQ(*store->GetAssembly("alice", "a"), Assembly("alice", "a"));
  EXPECT_EQ(store->ListInstances("alice", "a")->size(), 1u);
}

TEST_F(StoreTest, RefusesWhatItCannotReadAndLeavesItAlone) {
  std::ofstream(path_) << "this is not a database, it is someone's notes\n";
  auto s = Store::Open(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(path_), std::string::npos);
  EXPECT_NE(s.status().message().find("file is not a database"), std::string::npos)
      << s.status().message();
  std::ifstream in(path_);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "this is not a database, it is someone's notes\n");
}

TEST_F(StoreTest, RefusesANewerSchema) {
  OpenOk().reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE meta SET value = '99' WHERE key = 'schema_version'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto s = Store::Open(path_);
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("written by a newer tarn (schema 99"), std::string::npos);
}

// kill -9 in the middle of a stream of writes: every write acknowledged before the kill is
// there after reopening, nothing is half there, and the file passes SQLite's integrity check.
TEST_F(StoreTest, AcknowledgedWritesSurviveKill9) {
  for (int round = 0; round < 3; ++round) {
    int acks[2];
    ASSERT_EQ(::pipe(acks), 0);
    pid_t child = ::fork();
    if (child == 0) {
      ::close(acks[0]);
      auto store = Store::Open(path_);
      if (!store.ok()) ::_exit(2);
      for (int i = 0;; ++i) {
        std::string name = "r" + std::to_string(round) + "-" + std::to_string(i);
        Status s = (*store)->Transaction([&]() -> Status {
          RETURN_IF_ERROR((*store)->CreateAssembly(Assembly("alice", name)));
          return (*store)->PutInstance(Instance("alice", name, "w", 0));
        });
        if (!s.ok()) ::_exit(3);
        std::string line = name + "\n";
        if (::write(acks[1], line.data(), line.size()) < 0) ::_exit(4);
      }
    }
    ::close(acks[1]);
    std::set<std::string> acknowledged;
    std::string buf;
    char chunk[256];
    while (acknowledged.size() < static_cast<size_t>(40 + 30 * round)) {
      ssize_t n = ::read(acks[0], chunk, sizeof chunk);
      ASSERT_GT(n, 0) << "the writer died";
      buf.append(chunk, n);
      size_t nl;
      while ((nl = buf.find('\n')) != std::string::npos) {
        acknowledged.insert(buf.substr(0, nl));
        buf.erase(0, nl + 1);
      }
    }
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ::close(acks[0]);
    auto store = OpenOk();
    auto all = store->ListAssemblies("alice");
    ASSERT_TRUE(all.ok());
    std::set<std::string> present;
    for (const AssemblyRecord& a : *all) {
      present.insert(a.name);
      EXPECT_EQ(store->ListInstances("alice", a.name)->size(), 1u) << a.name << " is half there";
    }
    for (const std::string& name : acknowledged) EXPECT_TRUE(present.count(name)) << name;
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* check = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &check, nullptr);
    ASSERT_EQ(sqlite3_step(check), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(check, 0)), "ok");
    sqlite3_finalize(check);
    sqlite3_close(db);
  }
}

}  // namespace
TEST_F(StoreTest, UpgradesAVersionOneStoreInPlace) {
  // The schema of tarn's first store, as it was written then, with one instance.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  const char* v1 = R"sql(
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta VALUES ('schema_version', '1');
    CREATE TABLE assemblies (user TEXT NOT NULL, name TEXT NOT NULL, spec TEXT NOT NULL,
      desired_state TEXT NOT NULL, state TEXT NOT NULL, diagnostics TEXT NOT NULL,
      created_ms INTEGER NOT NULL, lifetime_deadline_ms INTEGER NOT NULL,
      generation INTEGER NOT NULL, PRIMARY KEY (user, name));
    CREATE TABLE instances (user TEXT NOT NULL, assembly TEXT NOT NULL, name TEXT NOT NULL,
      component TEXT NOT NULL, idx INTEGER NOT NULL, state TEXT NOT NULL, node TEXT NOT NULL,
      gpus TEXT NOT NULL, container_id TEXT NOT NULL, shim_dir TEXT NOT NULL,
      restarts INTEGER NOT NULL, last_exit TEXT NOT NULL, launched_ms INTEGER NOT NULL,
      PRIMARY KEY (user, assembly, name),
      FOREIGN KEY (user, assembly) REFERENCES assemblies (user, name) ON DELETE CASCADE);
    INSERT INTO assemblies VALUES ('alice', 'a', '{}', 'STARTED', 'STABLE', '', 1, 0, 1);
    INSERT INTO instances VALUES ('alice', 'a', 'w-0', 'w', 0, 'READY', 'n1', '[]', 'c1', '',
      2, 'exited with code 1', 5);
  )sql";
  ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenOk();
  ASSERT_NE(store, nullptr);
  auto instances = store->ListInstances("alice", "a");
  ASSERT_TRUE(instances.ok());
  ASSERT_EQ(instances->size(), 1u);
  EXPECT_EQ((*instances)[0].restarts, 2);
  EXPECT_EQ((*instances)[0].ip, "");
  EXPECT_EQ((*instances)[0].version, "");
  EXPECT_EQ((*instances)[0].upgrade_state, "");
  InstanceRecord r = (*instances)[0];
  r.ip = "127.42.0.2";
  r.version = "2.0";
  r.upgrade_state = "UPGRADING";
  ASSERT_TRUE(store->PutInstance(r).ok());
  AssemblyRecord a = *store->GetAssembly("alice", "a");
  EXPECT_EQ(a.upgrade_json, "");
  a.upgrade_json = R"({"state":"UPGRADING"})";
  ASSERT_TRUE(store->UpdateAssembly(a).ok());
  store.reset();
  store = OpenOk();
  EXPECT_EQ((*store->ListInstances("alice", "a"))[0], r);
  EXPECT_EQ(store->GetAssembly("alice", "a")->upgrade_json, R"({"state":"UPGRADING"})");
}

TEST_F(StoreTest, UpgradesAVersionTwoStoreInPlace) {
  // Version 2: instances have their address; nothing knows of upgrades yet.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  const char* v2 = R"sql(
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta VALUES ('schema_version', '2');
    CREATE TABLE assemblies (user TEXT NOT NULL, name TEXT NOT NULL, spec TEXT NOT NULL,
      desired_state TEXT NOT NULL, state TEXT NOT NULL, diagnostics TEXT NOT NULL,
      created_ms INTEGER NOT NULL, lifetime_deadline_ms INTEGER NOT NULL,
      generation INTEGER NOT NULL, PRIMARY KEY (user, name));
    CREATE TABLE instances (user TEXT NOT NULL, assembly TEXT NOT NULL, name TEXT NOT NULL,
      component TEXT NOT NULL, idx INTEGER NOT NULL, state TEXT NOT NULL, node TEXT NOT NULL,
      gpus TEXT NOT NULL, container_id TEXT NOT NULL, shim_dir TEXT NOT NULL,
      restarts INTEGER NOT NULL, last_exit TEXT NOT NULL, launched_ms INTEGER NOT NULL,
      ip TEXT NOT NULL DEFAULT '',
      PRIMARY KEY (user, assembly, name),
      FOREIGN KEY (user, assembly) REFERENCES assemblies (user, name) ON DELETE CASCADE);
    INSERT INTO assemblies VALUES ('alice', 'a', '{}', 'STARTED', 'STABLE', '', 1, 0, 1);
    INSERT INTO instances VALUES ('alice', 'a', 'w-0', 'w', 0, 'READY', 'n1', '[]', 'c1', '',
      0, '', 5, '127.42.0.9');
  )sql";
  ASSERT_EQ(sqlite3_exec(db, v2, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenOk();
  ASSERT_NE(store, nullptr);
  auto instances = store->ListInstances("alice", "a");
  ASSERT_TRUE(instances.ok());
  ASSERT_EQ(instances->size(), 1u);
  EXPECT_EQ((*instances)[0].ip, "127.42.0.9");
  EXPECT_EQ((*instances)[0].version, "");
  EXPECT_EQ(store->GetAssembly("alice", "a")->upgrade_json, "");
  store.reset();
  // Opened again, it is current: nothing to migrate twice.
  store = OpenOk();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->ListInstances("alice", "a")->size(), 1u);
}

}  // namespace tarn::store
