// The scheduler's preemption (scheduler.h, preemption.cc): whom it takes back from, and what
// the preemptor gets once they are gone.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "scheduler/scheduler.h"

namespace tarn::scheduler {
namespace {

NodeSpec GpuNode(const std::string& name, int gpus) {
  NodeSpec n{name, 64, 65536, {}};
  for (int i = 0; i < gpus; ++i) n.gpus.push_back({i, "Fake GPU", 16384});
  return n;
}

// Two queues that may each set priorities up to 100.
QueueConfig Queue(const std::string& name, double guarantee, bool disable_preemption = false) {
  QueueConfig q{name, guarantee, 1, {}, {}};
  q.max_priority = 100;
  q.disable_preemption = disable_preemption;
  return q;
}

class PreemptionTest : public ::testing::Test {
 protected:
  void Make(std::vector<NodeSpec> nodes, std::vector<QueueConfig> queues = {Queue("default", 1)}) {
    auto s = Scheduler::Create({std::move(nodes), std::move(queues), &clock_,
                                /*reservation_after=*/std::chrono::hours(1)});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    sched_ = std::move(s).value();
  }
  // One request of `gpus` GPUs (1 vcore), placed at once when `place` (and it fits).
  void Run(const std::string& id, int gpus, int priority, const std::string& queue = "") {
    ASSERT_TRUE(
        sched_->Submit({id, id.substr(0, id.find('/')), queue, {1, 256, gpus}, priority}).ok());
    clock_.Advance(std::chrono::seconds(1));  // so that placements have an order
  }
  // A training gang: a ps without GPUs and `workers` workers of 2 GPUs each.
  void Gang(const std::string& name, int workers, int priority, const std::string& queue = "") {
    const std::string user = name.substr(0, name.find('/'));
    std::vector<Request> members = {{name + "/ps-0", user, queue, {1, 512, 0}, priority}};
    for (int w = 0; w < workers; ++w) {
      members.push_back(
          {name + "/worker-" + std::to_string(w), user, queue, {2, 1024, 2}, priority});
    }
    ASSERT_TRUE(sched_->SubmitGang(name, members).ok());
    clock_.Advance(std::chrono::seconds(1));
  }
  bool IsPlaced(const std::string& id) {
    auto d = sched_->Get(id);
    return d.ok() && std::holds_alternative<Placed>(*d);
  }
  // The victims the request waits for; empty when it is not preempting.
  std::vector<std::string> VictimsOf(const std::string& id) {
    auto d = sched_->Get(id);
    if (!d.ok()) return {"<unknown>"};
    const auto* p = std::get_if<Preempt>(&*d);
    return p == nullptr ? std::vector<std::string>{} : p->victims;
  }
  void Release(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) ASSERT_TRUE(sched_->Release(id).ok()) << id;
  }

  FakeClock clock_;
  std::unique_ptr<Scheduler> sched_;
};

// The case: a priority-1 training gang (1 ps + 2 workers, 2 GPUs each) holds all 4
// GPUs; a priority-10 request for 2 GPUs takes the whole gang back (never half of it: the ps,
// which holds no GPU, goes too), and what the gang frees is held for it.
TEST_F(PreemptionTest, UrgentWorkTakesBackAWholeLowerPriorityGang) {
  Make({GpuNode("n1", 4)});
  Gang("bob/train", 2, 1);
  sched_->Schedule();
  ASSERT_TRUE(IsPlaced("bob/train/worker-1"));
  Run("alice/urgent/serve-0", 2, 10);
  Run("carol/small/job-0", 1, 1);  // waits too, and must not take what the gang frees
  EXPECT_TRUE(sched_->Schedule().empty());

  const std::vector<std::string> gang = {"bob/train/ps-0", "bob/train/worker-0",
                                         "bob/train/worker-1"};
  EXPECT_EQ(VictimsOf("alice/urgent/serve-0"), gang);
  std::vector<Preemption> decided = sched_->TakePreemptions();
  ASSERT_EQ(decided.size(), 1u);
  EXPECT_EQ(decided[0].preemptor, "alice/urgent/serve-0");
  EXPECT_EQ(decided[0].preemptor_ids, std::vector<std::string>{"alice/urgent/serve-0"});
  EXPECT_EQ(decided[0].priority, 10);
  EXPECT_EQ(decided[0].victims, gang);
  EXPECT_EQ(decided[0].reason, "lower priority than 10 in queue default");
  EXPECT_TRUE(sched_->TakePreemptions().empty());  // told once
  // The victims stay placed (their resources count) until they are released.
  EXPECT_TRUE(IsPlaced("bob/train/worker-0"));

  // The ps and the first worker stop: the 2 GPUs freed are the preemptor's, not carol's,
  // whatever their order of arrival.
  Release({"bob/train/ps-0", "bob/train/worker-0"});
  std::vector<Placement> placed = sched_->Schedule();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].id, "alice/urgent/serve-0");
  EXPECT_EQ(placed[0].gpus.size(), 2u);
  EXPECT_FALSE(IsPlaced("carol/small/job-0"));
  EXPECT_TRUE(sched_->TakePreemptions().empty());  // carol's priority equals the worker's
  Release({"bob/train/worker-1"});
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("carol/small/job-0"));
}

// Minimal: a victim whose place the preemptor turns out not to need is spared.
TEST_F(PreemptionTest, TheVictimsAreAMinimalSet) {
  Make({GpuNode("n1", 4)});
  Run("u/a", 1, 0);  // the lowest priority: tried first
  Run("u/b", 3, 1);
  sched_->Schedule();
  Run("v/urgent", 3, 5);
  sched_->Schedule();
  // Taking a (1 GPU) is not enough; taking b too is; then a is not needed after all.
  EXPECT_EQ(VictimsOf("v/urgent"), std::vector<std::string>{"u/b"});
}

TEST_F(PreemptionTest, LowestPriorityGoesFirst) {
  Make({GpuNode("n1", 4)});
  Run("u/p3", 1, 3);
  Run("u/p0", 1, 0);
  Run("u/p2", 1, 2);
  Run("u/p1", 1, 1);
  sched_->Schedule();
  Run("v/urgent", 2, 9);
  sched_->Schedule();
  std::vector<std::string> victims = VictimsOf("v/urgent");
  std::sort(victims.begin(), victims.end());
  EXPECT_EQ(victims, (std::vector<std::string>{"u/p0", "u/p1"}));
}

// At equal priority, the work that loses least (the freshest checkpoint) goes first; without
// checkpoints, the most recently placed.
TEST_F(PreemptionTest, ThenTheLeastWorkLostThenTheMostRecentlyStarted) {
  Make({GpuNode("n1", 3)});
  Run("u/old", 1, 0);
  sched_->Schedule();
  clock_.Advance(std::chrono::minutes(10));
  Run("u/middle", 1, 0);
  sched_->Schedule();
  clock_.Advance(std::chrono::minutes(10));
  Run("u/new", 1, 0);
  sched_->Schedule();
  clock_.Advance(std::chrono::minutes(10));

  Run("v/first", 1, 5);
  sched_->Schedule();
  EXPECT_EQ(VictimsOf("v/first"), std::vector<std::string>{"u/new"});

  // The oldest saved its work a second ago: it loses least, less than `middle`.
  sched_->SetLastCheckpoint("u/old", clock_.Now() - std::chrono::seconds(1));
  Run("v/second", 1, 5);
  sched_->Schedule();
  EXPECT_EQ(VictimsOf("v/second"), std::vector<std::string>{"u/old"});
}

TEST_F(PreemptionTest, EqualOrHigherPriorityIsNeverTaken) {
  Make({GpuNode("n1", 2)});
  Run("u/a", 2, 5);
  sched_->Schedule();
  Run("v/same", 2, 5);
  sched_->Schedule();
  EXPECT_TRUE(VictimsOf("v/same").empty());
  EXPECT_TRUE(sched_->TakePreemptions().empty());
}

// A queue below its guarantee takes back from a queue above its own, whatever the
// priorities, but never takes that queue below its guarantee; at its guarantee it takes
// nothing.
TEST_F(PreemptionTest, AQueueBelowItsGuaranteeReclaimsItFromQueuesAboveTheirs) {
  Make({GpuNode("n1", 4)}, {Queue("prod", 0.5), Queue("research", 0.5)});
  for (int k = 0; k < 4; ++k) Run("r/job-" + std::to_string(k), 1, 50, "research");
  sched_->Schedule();  // research borrows all of it
  Run("p/serve-0", 1, 0, "prod");
  Run("p/serve-1", 1, 0, "prod");
  Run("p/serve-2", 1, 0, "prod");
  sched_->Schedule();
  std::vector<Preemption> decided = sched_->TakePreemptions();
  // serve-0 and serve-1 each take one job back; serve-2 would take prod past its guarantee
  // and research below its own.
  ASSERT_EQ(decided.size(), 2u);
  EXPECT_EQ(decided[0].preemptor, "p/serve-0");
  EXPECT_EQ(decided[1].preemptor, "p/serve-1");
  EXPECT_EQ(decided[0].reason,
            "queue prod is below its guarantee (50%) and takes back from queues above theirs");
  EXPECT_TRUE(VictimsOf("p/serve-2").empty());
  // Most recently placed first: job-3, then job-2.
  EXPECT_EQ(decided[0].victims, std::vector<std::string>{"r/job-3"});
  EXPECT_EQ(decided[1].victims, std::vector<std::string>{"r/job-2"});
}

TEST_F(PreemptionTest, NothingIsTakenFromADisablePreemptionQueue) {
  Make({GpuNode("n1", 4)}, {Queue("prod", 0.5), Queue("research", 0.5, true)});
  Run("r/low", 2, 0, "research");
  Run("r/borrowed", 2, 0, "research");
  sched_->Schedule();
  Run("p/serve", 2, 0, "prod");        // below its guarantee
  Run("r/urgent", 2, 90, "research");  // more urgent, in the protected queue itself
  sched_->Schedule();
  EXPECT_TRUE(sched_->TakePreemptions().empty());
  EXPECT_TRUE(VictimsOf("p/serve").empty());
  EXPECT_TRUE(VictimsOf("r/urgent").empty());
}

TEST_F(PreemptionTest, InfeasibleWorkAndWorkPastItsMaximumNeverPreempt) {
  QueueConfig small = Queue("small", 0);
  small.maximum_share = 0.25;
  Make({GpuNode("n1", 4)}, {Queue("default", 1), small});
  Run("u/all", 4, 0);
  sched_->Schedule();
  Run("v/too-big", 5, 99);            // no node has 5 GPUs
  Run("v/past-cap", 2, 99, "small");  // more than the queue's 25% maximum
  sched_->Schedule();
  EXPECT_TRUE(sched_->TakePreemptions().empty());
  EXPECT_TRUE(std::holds_alternative<Infeasible>(*sched_->Get("v/too-big")));
  EXPECT_TRUE(VictimsOf("v/past-cap").empty());
  EXPECT_TRUE(IsPlaced("u/all"));
}

// Work already leaving is never chosen twice; the next urgent request finds other victims.
TEST_F(PreemptionTest, VictimsAlreadyLeavingAreNotChosenAgain) {
  Make({GpuNode("n1", 2)});
  Run("u/a", 1, 0);
  Run("u/b", 1, 0);
  sched_->Schedule();
  Run("v/one", 1, 5);
  Run("v/two", 1, 5);
  sched_->Schedule();
  std::vector<Preemption> decided = sched_->TakePreemptions();
  ASSERT_EQ(decided.size(), 2u);
  EXPECT_NE(decided[0].victims, decided[1].victims);
}

// A preemptor withdrawn while its victims stop: they stop anyway (they were told), and what
// they free goes to whoever is next.
TEST_F(PreemptionTest, AWithdrawnPreemptorLeavesNothingHeld) {
  Make({GpuNode("n1", 2)});
  Run("u/a", 2, 0);
  sched_->Schedule();
  Run("v/urgent", 2, 5);
  sched_->Schedule();
  ASSERT_EQ(sched_->TakePreemptions().size(), 1u);
  Release({"v/urgent"});
  Run("w/next", 2, 0);
  Release({"u/a"});
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("w/next"));
}

TEST_F(PreemptionTest, SameInputsSameVictims) {
  auto run = [this] {
    Make({GpuNode("a", 4), GpuNode("b", 4)}, {Queue("q1", 0.5), Queue("q2", 0.5)});
    for (int k = 0; k < 8; ++k) {
      Run("u" + std::to_string(k % 3) + "/" + std::to_string(k), 1, k % 4, k % 2 ? "q1" : "q2");
    }
    sched_->Schedule();
    Gang("g/train", 2, 50, "q1");
    Run("h/serve", 3, 60, "q2");
    sched_->Schedule();
    std::vector<std::string> out;
    for (const Preemption& p : sched_->TakePreemptions()) {
      std::string s = p.preemptor + ":";
      for (const std::string& v : p.victims) s += " " + v;
      out.push_back(s);
    }
    return out;
  };
  std::vector<std::string> first = run();
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, run());
}

TEST_F(PreemptionTest, PreemptionCanBeSwitchedOff) {
  auto s = Scheduler::Create({{GpuNode("n1", 2)},
                              {Queue("default", 1)},
                              &clock_,
                              std::chrono::hours(1),
                              /*preemption=*/false});
  ASSERT_TRUE(s.ok());
  sched_ = std::move(s).value();
  Run("u/a", 2, 0);
  sched_->Schedule();
  Run("v/urgent", 2, 5);
  sched_->Schedule();
  EXPECT_TRUE(sched_->TakePreemptions().empty());
}

}  // namespace
}  // namespace tarn::scheduler
