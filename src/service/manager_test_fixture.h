// The manager tests' fake backend and fixture (manager_test.cc, manager_preemption_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "service/manager.h"
#include "spec/parser.h"

namespace tarn::service::testing_manager {

using json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A backend that records what it is asked and lets the test answer: placement has a fixed
// number of slots (one per instance), gangs are all or nothing.
class FakeBackend final : public Backend {
 public:
  int slots = 100;
  // Places with no node and no address, as a backend that picks the node at launch (Slurm).
  bool places_at_launch = false;
  std::vector<std::string> launches;  // keys, in order
  std::vector<std::string> launched_versions;  // the spec version of each launch
  std::map<std::string, std::string> container_of;
  std::vector<std::string> stops;
  std::vector<std::string> recovers;
  std::vector<std::string> probes;
  std::vector<std::string> cleanups;
  std::vector<std::string> destroyed;
  // NamesChanged calls: "user/assembly" and the hosts lines; and how many had come when
  // each launch was asked for.
  std::vector<std::pair<std::string, std::string>> names_changed;
  std::vector<size_t> names_before_launch;
  // What the next TakePreemptions() returns (once), and the checkpoints noted.
  std::vector<scheduler::Preemption> preemptions;
  std::map<std::string, Clock::TimePoint> checkpoints;

  std::vector<scheduler::Preemption> TakePreemptions() override {
    return std::exchange(preemptions, {});
  }
  void NoteCheckpoint(const std::string& key, Clock::TimePoint at) override {
    checkpoints[key] = at;
  }

  Status RequestPlacement(const spec::Assembly&, const std::vector<InstanceRef>& members,
                          bool gang) override {
    if (gang) {
      pending_.push_back({});
      for (const auto& m : members) pending_.back().push_back(m.Key());
    } else {
      for (const auto& m : members) pending_.push_back({m.Key()});
    }
    return OkStatus();
  }
  std::vector<std::string> Place() override {
    std::vector<std::string> out;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (static_cast<int>(it->size()) <= slots - static_cast<int>(placed_.size())) {
        for (const auto& k : *it) {
          placed_.insert(k);
          out.push_back(k);
        }
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  PlacementStatus GetPlacement(const std::string& key) const override {
    PlacementStatus s;
    if (placed_.count(key)) {
      s.phase = PlacementStatus::Phase::kPlaced;
      if (places_at_launch) return s;
      s.placement = {
          "node-a",
          {},
          "127.42.0." + std::to_string(2 + std::distance(placed_.begin(), placed_.find(key)))};
    } else {
      for (const auto& g : pending_) {
        if (std::find(g.begin(), g.end(), key) != g.end()) {
          s.phase = PlacementStatus::Phase::kPending;
          s.reason = "no free slot";
        }
      }
    }
    return s;
  }
  Status RestorePlacement(const spec::Assembly&, const InstanceRef& ref,
                          const Placement&) override {
    placed_.insert(ref.Key());
    return OkStatus();
  }
  void ReleasePlacement(const std::string& key) override {
    placed_.erase(key);
    for (auto it = pending_.begin(); it != pending_.end();) {
      it->erase(std::remove(it->begin(), it->end(), key), it->end());
      it = it->empty() ? pending_.erase(it) : it + 1;
    }
  }
  void Launch(const spec::Assembly& assembly, const InstanceRef& ref, const Placement&,
              const std::string& id) override {
    launches.push_back(ref.Key());
    launched_versions.push_back(assembly.version);
    container_of[ref.Key()] = id;
    names_before_launch.push_back(names_changed.size());
  }
  void NamesChanged(const std::string& user, const std::string& assembly,
                    const std::string& hosts_lines) override {
    names_changed.push_back({user + "/" + assembly, hosts_lines});
  }
  void Stop(const InstanceRef& ref, const std::string&) override { stops.push_back(ref.Key()); }
  void Recover(const spec::Assembly&, const InstanceRef& ref, const std::string& id) override {
    recovers.push_back(ref.Key());
    container_of[ref.Key()] = id;
  }
  void Probe(const spec::Assembly&, const InstanceRef& ref, const std::string&,
             const spec::ReadinessCheck&) override {
    probes.push_back(ref.Key());
  }
  void Cleanup(const InstanceRef& ref, bool) override { cleanups.push_back(ref.Key()); }
  void DestroyAssembly(const std::string& user, const std::string& a) override {
    destroyed.push_back(user + "/" + a);
  }
  std::vector<scheduler::NodeUsage> Nodes() const override { return {}; }
  std::vector<scheduler::QueueUsage> Queues() const override {
    scheduler::QueueUsage def, research;
    def.config.name = "default";
    research.config.name = "research";
    research.config.submit_acl = Acl{false, {"alice"}, {}};
    research.config.default_priority = 2;
    research.config.max_priority = 5;
    return {def, research};
  }
  std::string LogFile(const InstanceRef&, bool) const override { return ""; }
  std::string SharedDir(const std::string& u, const std::string& a) const override {
    return "/shared/" + u + "/" + a;
  }
  size_t placed() const { return placed_.size(); }

 private:
  std::vector<std::vector<std::string>> pending_;
  std::set<std::string> placed_;
};

class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("manager_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    OpenStore();
    NewManager();
  }
  void TearDown() override {
    manager_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void OpenStore() {
    auto s = store::Store::Open((dir_ / "state.db").string());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  void NewManager() {
    Manager::Options o;
    o.clock = &clock_;
    o.store = store_.get();
    o.backend = &backend_;
    o.registry = &registry_;
    o.last_checkpoint = [this](const std::string& key) -> std::optional<Checkpoint> {
      auto it = checkpoints_.find(key);
      if (it == checkpoints_.end()) return std::nullopt;
      return it->second;
    };
    o.counters = &counters_;
    o.in_flight = [this](const std::string& key) -> std::optional<double> {
      auto it = in_flight_.find(key);
      if (it == in_flight_.end()) return std::nullopt;
      return it->second;
    };
    auto m = Manager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manager_ = std::move(*m);
  }
  // Simulates kill -9 of the server: a new store handle and a new manager, same backend.
  void RestartServer() {
    manager_.reset();
    store_.reset();
    OpenStore();
    NewManager();
  }

  Status Launch(const json& j, const std::string& user = "alice") {
    spec::ParseOptions po;
    po.user = user;
    spec::ParseResult r = spec::ParseAssemblyJson(j, po);
    EXPECT_TRUE(r.ok()) << (r.diagnostics.empty()
                                ? ""
                                : r.diagnostics[0].path + ": " + r.diagnostics[0].message);
    if (!r.ok()) return InvalidArgumentError("bad test assembly");
    return manager_->Launch(user, *r.assembly, j.dump());
  }

  void Started(const std::string& key) { Event(BackendEvent::Kind::kStarted, key); }
  void Exited(const std::string& key, int code) {
    BackendEvent e;
    e.kind = BackendEvent::Kind::kExited;
    e.key = key;
    e.container_id = backend_.container_of[key];
    e.exit.exit_code = code;
    e.exit.diagnostics = "exited with code " + std::to_string(code);
    manager_->Handle(e);
  }
  void Probed(const std::string& key, bool ready) {
    BackendEvent e;
    e.kind = BackendEvent::Kind::kProbed;
    e.key = key;
    e.container_id = backend_.container_of[key];
    e.ready = ready;
    e.detail = ready ? "answered 200" : "connection refused";
    manager_->Handle(e);
  }
  void Event(BackendEvent::Kind kind, const std::string& key, const std::string& detail = "") {
    BackendEvent e;
    e.kind = kind;
    e.key = key;
    e.container_id = backend_.container_of[key];
    e.ip = "127.0.0.1";
    e.detail = detail;
    manager_->Handle(e);
  }
  void Advance(Clock::Duration d) {
    clock_.Advance(d);
    manager_->Tick();
  }

  std::string State(const std::string& name, const std::string& user = "alice") {
    auto s = manager_->Get(user, name);
    return s.ok() ? s->state : s.status().ToString();
  }
  InstanceStatus Instance(const std::string& name, const std::string& instance,
                          const std::string& user = "alice") {
    auto s = manager_->Get(user, name);
    EXPECT_TRUE(s.ok());
    for (const auto& c : s->components) {
      for (const auto& i : c.instances) {
        if (i.name == instance) return i;
      }
    }
    ADD_FAILURE() << "no instance " << instance;
    return {};
  }

  static json Training() {
    return json::parse(R"({
      "name": "fmnist", "version": "1",
      "components": [
        {"name": "ps", "number_of_containers": 2, "launch_command": "sleep 100",
         "resource": {"cpus": 1, "memory": "256"}},
        {"name": "worker", "number_of_containers": 2, "launch_command": "sleep 100",
         "dependencies": ["ps"], "resource": {"cpus": 1, "memory": "256"}}
      ]})");
  }

  std::filesystem::path dir_;
  std::map<std::string, Checkpoint> checkpoints_;  // what the metrics say, by instance key
  PreemptionCounters counters_;
  std::map<std::string, double> in_flight_;  // the serving load the metrics say, by key
  FakeClock clock_;
  FakeBackend backend_;
  registry::Registry registry_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Manager> manager_;
};

}  // namespace tarn::service::testing_manager
