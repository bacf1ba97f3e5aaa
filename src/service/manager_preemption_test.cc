// The manager carrying out preemptions the backend's scheduler decided: stops in gang
// order, nobody judged by the exit code of a stop, the gang queued again as a whole, and
// what users read meanwhile.
#include <gtest/gtest.h>

#include "service/manager_test_fixture.h"

namespace tarn::service::testing_manager {
namespace {

class ManagerPreemptionTest : public ManagerTest {
 protected:
  // 1 ps + 1 chief + 1 worker, one gang; the ps with a 5 s grace period. (Priorities are the
  // scheduler's business: the fake's preemptions name them.)
  static json Gang() {
    return json::parse(R"({
      "name": "train", "version": "1",
      "components": [
        {"name": "ps", "number_of_containers": 1, "launch_command": "tarn-train",
         "resource": {"cpus": 1, "memory": "256"},
         "configuration": {"properties": {"tarn.tf.role": "ps", "tarn.tf.port": "2222",
                                          "tarn.stop.grace_secs": "5"}}},
        {"name": "chief", "number_of_containers": 1, "launch_command": "tarn-train",
         "resource": {"cpus": 1, "memory": "256"},
         "configuration": {"properties": {"tarn.tf.role": "chief", "tarn.tf.port": "2222"}}},
        {"name": "worker", "number_of_containers": 1, "launch_command": "tarn-train",
         "resource": {"cpus": 1, "memory": "256"},
         "configuration": {"properties": {"tarn.tf.role": "worker", "tarn.tf.port": "2222"}}}
      ]})");
  }
  static json Urgent() {
    return json::parse(R"({
      "name": "urgent", "version": "1",
      "components": [{"name": "web", "number_of_containers": 1, "launch_command": "serve",
                      "resource": {"cpus": 1, "memory": "256"}}]})");
  }
  // alice's one-instance assembly that never restarts: any end but a stop would be final.
  static json Batch() {
    json j = Urgent();
    j["name"] = "batch";
    j["components"][0]["restart_policy"] = "NEVER";
    return j;
  }
  void Exit(const std::string& key, int code, const std::string& last_stderr = "") {
    BackendEvent e;
    e.kind = BackendEvent::Kind::kExited;
    e.key = key;
    e.container_id = backend_.container_of[key];
    e.exit.exit_code = code;
    e.exit.diagnostics = "exited with code " + std::to_string(code);
    e.exit.last_stderr = last_stderr;
    manager_->Handle(e);
  }
  // The gang runs on all 3 slots; bob's urgent assembly waits; the scheduler (the fake's
  // stand-in) decides to preempt the gang for it.
  void GangRunsThenUrgentPreemptsIt() {
    backend_.slots = 3;
    ASSERT_TRUE(Launch(Gang()).ok());
    for (const char* i : {"ps-0", "chief-0", "worker-0"}) Started(std::string("alice/train/") + i);
    ASSERT_EQ(State("train"), "STABLE");
    ASSERT_TRUE(Launch(Urgent(), "bob").ok());
    ASSERT_EQ(Instance("urgent", "web-0", "bob").state, "PENDING");
    scheduler::Preemption p;
    p.preemptor = "bob/urgent/web-0";
    p.preemptor_ids = {"bob/urgent/web-0"};
    p.priority = 10;
    p.victims = {"alice/train/chief-0", "alice/train/ps-0", "alice/train/worker-0"};
    p.reason = "priority 10 above 1 in queue default";
    backend_.preemptions = {p};
    stops_before_ = backend_.stops.size();
    Advance(milliseconds(1));
  }
  bool Stopped(const std::string& key) const {
    return std::count(backend_.stops.begin() + stops_before_, backend_.stops.end(), key) > 0;
  }
  std::vector<service::Event> EventsOf(const std::string& user, const std::string& name,
                                       const std::string& type) {
    std::vector<service::Event> out;
    auto events = manager_->Events(user, name);
    EXPECT_TRUE(events.ok());
    for (const service::Event& e : *events) {
      if (e.type == type) out.push_back(e);
    }
    return out;
  }

  size_t stops_before_ = 0;
};

TEST_F(ManagerPreemptionTest, TheChiefAndWorkersStopFirstThenThePsAndTheGangWaitsAsAWhole) {
  checkpoints_["alice/train/chief-0"] = {300, clock_.WallMillis()};
  GangRunsThenUrgentPreemptsIt();
  EXPECT_TRUE(Stopped("alice/train/chief-0"));
  EXPECT_TRUE(Stopped("alice/train/worker-0"));
  EXPECT_FALSE(Stopped("alice/train/ps-0")) << "the ps stops after the chief has exited";
  EXPECT_EQ(Instance("train", "ps-0").state, "READY");
  EXPECT_EQ(Instance("train", "ps-0").diagnostics.rfind("stopping once the chief and workers", 0),
            0u)
      << Instance("train", "ps-0").diagnostics;

  auto preempted = EventsOf("alice", "train", "PREEMPTED");
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_NE(preempted[0].message.find("by bob/urgent (priority 10)"), std::string::npos)
      << preempted[0].message;
  EXPECT_NE(preempted[0].message.find("chief-0, ps-0, worker-0"), std::string::npos);
  EXPECT_NE(preempted[0].message.find("step 300"), std::string::npos);
  ASSERT_EQ(EventsOf("bob", "urgent", "PREEMPTING").size(), 1u);
  EXPECT_NE(EventsOf("bob", "urgent", "PREEMPTING")[0].message.find("alice/train"),
            std::string::npos);

  // The chief checkpoints on SIGTERM and says at which step; 143 is not a failure.
  Exit("alice/train/chief-0", 143, "tarn-train: stopped: checkpoint at step 420 in /ckpt");
  EXPECT_FALSE(Stopped("alice/train/ps-0")) << "a worker still runs";
  Exit("alice/train/worker-0", 143);
  EXPECT_TRUE(Stopped("alice/train/ps-0"));
  EXPECT_EQ(Instance("train", "ps-0").state, "RUNNING_BUT_UNREADY") << "stopping, not gone";
  Exit("alice/train/ps-0", 143);

  // The urgent work is placed the moment the places are free; the gang waits whole.
  EXPECT_EQ(backend_.launches.back(), "bob/urgent/web-0");
  for (const char* name : {"ps-0", "chief-0", "worker-0"}) {
    InstanceStatus i = Instance("train", name);
    EXPECT_EQ(i.state, "PENDING") << name;
    EXPECT_EQ(i.diagnostics,
              "preempted by bob/urgent (priority 10); resumes from step 420 when there is room")
        << name;
    EXPECT_EQ(i.restarts, 0) << name << ": a stop is not a restart";
  }
  EXPECT_EQ(State("train"), "ACCEPTED") << "waiting for resources, as at its first launch";
  auto listed = manager_->Get("alice", "train");
  EXPECT_NE(listed->diagnostics.find("preempted by bob/urgent"), std::string::npos)
      << listed->diagnostics;
  EXPECT_EQ(counters_.preemptions.load(), 1u);
  EXPECT_EQ(counters_.preempted_instances.load(), 3u);

  // Once the urgent assembly goes, the gang is placed again as a whole and starts as a
  // restart would: same names, a new start of each. It checkpointed the step it had
  // reached: nothing is redone.
  checkpoints_["alice/train/chief-0"] = {420, clock_.WallMillis(), 420};
  ASSERT_TRUE(manager_->Destroy("bob", "urgent").ok());
  Exit("bob/urgent/web-0", 0);
  EXPECT_EQ(backend_.placed(), 3u);
  for (const char* name : {"ps-0", "chief-0", "worker-0"}) {
    InstanceStatus i = Instance("train", name);
    EXPECT_EQ(i.container_id, "alice_train_" + std::string(name) + "_2") << name;
    EXPECT_EQ(i.diagnostics.rfind("starting", 0), 0u) << name << ": " << i.diagnostics;
  }
  auto resumed = EventsOf("alice", "train", "RESUMED");
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0].message,
            "placed again after its preemption; resumes from step 420; it had reached step 420: "
            "0 steps redone");
  EXPECT_EQ(counters_.steps_redone.load(), 0u);
}

// Killed without a checkpoint of its own (no last words), the gang resumes from its last
// periodic checkpoint and redoes the steps since: the count is the step it had reached, as
// its metrics last said, less that one.
TEST_F(ManagerPreemptionTest, AGangKilledOnItsWayOutRedoesTheStepsSinceItsLastCheckpoint) {
  checkpoints_["alice/train/chief-0"] = {300, clock_.WallMillis(), 310};
  GangRunsThenUrgentPreemptsIt();
  checkpoints_["alice/train/chief-0"] = {300, clock_.WallMillis(), 980};
  for (const char* name : {"chief-0", "worker-0", "ps-0"}) {
    Exit(std::string("alice/train/") + name, 137);
  }
  EXPECT_EQ(Instance("train", "chief-0").diagnostics,
            "preempted by bob/urgent (priority 10); resumes from step 300 when there is room");
  ASSERT_TRUE(manager_->Destroy("bob", "urgent").ok());
  Exit("bob/urgent/web-0", 0);
  auto resumed = EventsOf("alice", "train", "RESUMED");
  ASSERT_EQ(resumed.size(), 1u) << "once per preemption, not per member";
  EXPECT_EQ(resumed[0].message,
            "placed again after its preemption; resumes from step 300; it had reached step 980: "
            "680 steps redone");
  EXPECT_EQ(counters_.steps_redone.load(), 680u);
}

// The backend's own scheduler may take a place back (a Slurm job PREEMPTED by its QOS): a
// stop, not a failure; the instance waits for a place again and is asked for at once.
TEST_F(ManagerPreemptionTest, APreemptionByTheClustersSchedulerIsAStopNotAFailure) {
  backend_.slots = 1;
  ASSERT_TRUE(Launch(Batch()).ok());
  Started("alice/batch/web-0");
  const size_t launches = backend_.launches.size();
  BackendEvent e;
  e.kind = BackendEvent::Kind::kExited;
  e.key = "alice/batch/web-0";
  e.container_id = backend_.container_of[e.key];
  e.exit.exit_code = -1;
  e.exit.diagnostics = "Slurm: PREEMPTED";
  e.preempted = true;
  backend_.slots = 0;  // the place is Slurm's now
  manager_->Handle(e);
  InstanceStatus i = Instance("batch", "web-0");
  EXPECT_EQ(i.state, "PENDING") << "NEVER would make any other end final";
  EXPECT_EQ(i.diagnostics,
            "preempted by the cluster's scheduler (Slurm: PREEMPTED); starts again when there is "
            "room");
  EXPECT_EQ(i.restarts, 0);
  EXPECT_EQ(State("batch"), "ACCEPTED");
  auto preempted = EventsOf("alice", "batch", "PREEMPTED");
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_EQ(preempted[0].message, "by the cluster's scheduler: Slurm: PREEMPTED");
  EXPECT_EQ(counters_.preemptions.load(), 1u);
  backend_.slots = 1;
  Advance(milliseconds(1));
  EXPECT_EQ(backend_.launches.size(), launches + 1) << "asked for again";
}

TEST_F(ManagerPreemptionTest, ThePsStopsAtItsGracePeriodWhenTheChiefDoesNotExit) {
  GangRunsThenUrgentPreemptsIt();
  Advance(seconds(4));
  EXPECT_FALSE(Stopped("alice/train/ps-0"));
  Advance(seconds(1));
  EXPECT_TRUE(Stopped("alice/train/ps-0")) << "tarn.stop.grace_secs of the ps is 5";
}

TEST_F(ManagerPreemptionTest, AStoppedInstanceIsNotJudgedByItsExitCode) {
  backend_.slots = 1;
  ASSERT_TRUE(Launch(Batch()).ok());
  Started("alice/batch/web-0");
  ASSERT_TRUE(Launch(Urgent(), "bob").ok());
  scheduler::Preemption p;
  p.preemptor = "bob/urgent/web-0";
  p.preemptor_ids = {"bob/urgent/web-0"};
  p.priority = 10;
  p.victims = {"alice/batch/web-0"};
  backend_.preemptions = {p};
  Advance(milliseconds(1));
  Exit("alice/batch/web-0", 0);  // exit 0 under NEVER would be SUCCEEDED, were it not stopped
  InstanceStatus i = Instance("batch", "web-0");
  EXPECT_EQ(i.state, "PENDING");
  EXPECT_EQ(i.diagnostics,
            "preempted by bob/urgent (priority 10); starts again when there is room");
  EXPECT_EQ(State("batch"), "ACCEPTED");
  EXPECT_EQ(Instance("urgent", "web-0", "bob").diagnostics.rfind("starting", 0), 0u);
}

TEST_F(ManagerPreemptionTest, AVictimThatHadNotStartedGivesItsPlaceAtOnce) {
  json j = Urgent();
  j["name"] = "batch";
  backend_.slots = 1;
  ASSERT_TRUE(Launch(j).ok());
  // Its start failed and it waits out its backoff, keeping its place.
  Event(BackendEvent::Kind::kStartFailed, "alice/batch/web-0", "no such image");
  ASSERT_EQ(backend_.placed(), 1u);
  const size_t launches = backend_.launches.size();
  ASSERT_TRUE(Launch(Urgent(), "bob").ok());
  scheduler::Preemption p;
  p.preemptor = "bob/urgent/web-0";
  p.preemptor_ids = {"bob/urgent/web-0"};
  p.priority = 10;
  p.victims = {"alice/batch/web-0"};
  backend_.preemptions = {p};
  Advance(milliseconds(1));
  EXPECT_EQ(backend_.launches.size(), launches + 1);
  EXPECT_EQ(backend_.launches.back(), "bob/urgent/web-0") << "placed in the same pass";
  EXPECT_EQ(Instance("batch", "web-0").state, "PENDING");
}

TEST_F(ManagerPreemptionTest, RunningTrainingTellsTheSchedulerWhenItLastCheckpointed) {
  backend_.slots = 3;
  ASSERT_TRUE(Launch(Gang()).ok());
  for (const char* i : {"ps-0", "chief-0", "worker-0"}) Started(std::string("alice/train/") + i);
  clock_.Advance(seconds(100));
  // Written 30 s ago, during this run.
  checkpoints_["alice/train/chief-0"] = {500, clock_.WallMillis() - 30000};
  backend_.slots = 3;
  ASSERT_TRUE(Launch(Urgent(), "bob").ok());  // pending: a placement pass runs
  ASSERT_EQ(backend_.checkpoints.count("alice/train/chief-0"), 1u);
  EXPECT_EQ(backend_.checkpoints["alice/train/chief-0"], clock_.Now() - seconds(30));
  EXPECT_EQ(backend_.checkpoints.count("alice/train/ps-0"), 0u) << "it reported none";
}

}  // namespace
}  // namespace tarn::service::testing_manager
