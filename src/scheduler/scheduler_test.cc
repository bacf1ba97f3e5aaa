#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <set>

namespace tarn::scheduler {
namespace {

NodeSpec Node(const std::string& name, int64_t vcores, int64_t memory_mib, int gpus = 0) {
  NodeSpec n{name, vcores, memory_mib, {}};
  for (int i = 0; i < gpus; ++i) n.gpus.push_back({i, "Fake GPU", 16384});
  return n;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void Make(std::vector<NodeSpec> nodes, std::vector<QueueConfig> queues = {},
            Clock::Duration reservation_after = std::chrono::seconds(60)) {
    auto s = Scheduler::Create({std::move(nodes), std::move(queues), &clock_, reservation_after});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    sched_ = std::move(s).value();
  }
  void Submit(const std::string& id, const std::string& user, Resources r,
              const std::string& queue = "", std::optional<int> priority = std::nullopt) {
    Status s = sched_->Submit({id, user, queue, r, priority});
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  Decision Get(const std::string& id) {
    auto d = sched_->Get(id);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : Decision(Pending{"<missing>"});
  }
  bool IsPlaced(const std::string& id) { return std::holds_alternative<Placed>(Get(id)); }
  std::string PendingReason(const std::string& id) {
    Decision d = Get(id);
    if (auto* p = std::get_if<Pending>(&d)) return p->reason;
    return "<not pending>";
  }
  std::map<std::string, int> PlacedPerUser(const std::vector<Placement>& placements) {
    std::map<std::string, int> out;
    for (const Placement& p : placements) ++out[p.id.substr(0, p.id.find('/'))];
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<Scheduler> sched_;
};

// The example of the DRF paper (Ghodsi et al., NSDI 2011): 9 CPUs and 18 GB; A's tasks need
// <1 CPU, 4 GB> (memory-heavy), B's <3 CPUs, 1 GB> (CPU-heavy). DRF gives A three tasks and
// B two, both at a dominant share of 2/3, even though A submitted everything first (FIFO
// would give A four tasks and B one).
TEST_F(SchedulerTest, DrfGivesEqualDominantSharesWhateverTheSubmissionOrder) {
  Make({Node("n1", 9, 18 * 1024)});
  for (int i = 0; i < 20; ++i) Submit("alice/" + std::to_string(i), "alice", {1, 4096, 0});
  for (int i = 0; i < 20; ++i) Submit("bob/" + std::to_string(i), "bob", {3, 1024, 0});
  auto placed = PlacedPerUser(sched_->Schedule());
  EXPECT_EQ(placed["alice"], 3);
  EXPECT_EQ(placed["bob"], 2);
  Resources total = sched_->total();
  double alice = DominantShare({3, 3 * 4096, 0}, total);
  double bob = DominantShare({6, 2 * 1024, 0}, total);
  EXPECT_DOUBLE_EQ(alice, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(bob, 2.0 / 3.0);
  // Another pass changes nothing: the node is full in CPUs.
  EXPECT_TRUE(sched_->Schedule().empty());
  EXPECT_EQ(PendingReason("bob/2"), "needs 3 vcores on one node, at most 0 free on any node");
}

TEST_F(SchedulerTest, DrfHoldsAcrossReleases) {
  Make({Node("n1", 9, 18 * 1024)});
  for (int i = 0; i < 20; ++i) Submit("alice/" + std::to_string(i), "alice", {1, 4096, 0});
  for (int i = 0; i < 20; ++i) Submit("bob/" + std::to_string(i), "bob", {3, 1024, 0});
  std::vector<Placement> first = sched_->Schedule();
  // Every placed task finishes; the next pass again splits 3 / 2.
  for (const Placement& p : first) ASSERT_TRUE(sched_->Release(p.id).ok());
  auto placed = PlacedPerUser(sched_->Schedule());
  EXPECT_EQ(placed["alice"], 3);
  EXPECT_EQ(placed["bob"], 2);
}

TEST_F(SchedulerTest, OldestRequestOfAUserFirst) {
  Make({Node("n1", 2, 4096)});
  Submit("u/a", "u", {2, 100, 0});
  Submit("u/b", "u", {1, 100, 0});
  Submit("u/c", "u", {1, 100, 0});
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("u/a"));
  EXPECT_FALSE(IsPlaced("u/b"));
  EXPECT_FALSE(IsPlaced("u/c"));
}

TEST_F(SchedulerTest, GangThatDoesNotFitStaysPendingWholeWhileSmallerWorkRuns) {
  Make({Node("n1", 4, 8192), Node("n2", 4, 8192)});
  Submit("other/blocker-1", "other", {3, 1024, 0});
  Submit("other/blocker-2", "other", {3, 1024, 0});
  sched_->Schedule();
  ASSERT_TRUE(IsPlaced("other/blocker-1"));
  ASSERT_TRUE(IsPlaced("other/blocker-2"));
  std::vector<Request> gang;
  for (int i = 0; i < 3; ++i) {
    gang.push_back({"alice/train/worker-" + std::to_string(i), "alice", "", {2, 1024, 0}});
  }
  ASSERT_TRUE(sched_->SubmitGang("alice/train", gang).ok());
  Submit("alice/small", "alice", {1, 512, 0});
  auto placements = sched_->Schedule();
  // 1 vcore is free on each node: no worker fits, and the gang is not placed in part.
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(IsPlaced("alice/train/worker-" + std::to_string(i)));
    EXPECT_NE(PendingReason("alice/train/worker-" + std::to_string(i))
                  .find("gang alice/train (3 instances) does not fit all at once: with 0 placed, "),
              std::string::npos);
  }
  EXPECT_TRUE(IsPlaced("alice/small"));
  // The blockers finish: the gang is placed whole in one pass.
  ASSERT_TRUE(sched_->Release("other/blocker-1").ok());
  ASSERT_TRUE(sched_->Release("other/blocker-2").ok());
  placements = sched_->Schedule();
  EXPECT_EQ(placements.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(IsPlaced("alice/train/worker-" + std::to_string(i)));
}

TEST_F(SchedulerTest, PartlyFittingGangIsRolledBack) {
  // 6 vcores in all, but as 3 + 3: two members of 2 fit, the third does not.
  Make({Node("n1", 3, 8192), Node("n2", 3, 8192)});
  std::vector<Request> gang = {
      {"g/a", "u", "", {2, 100, 0}}, {"g/b", "u", "", {2, 100, 0}}, {"g/c", "u", "", {2, 100, 0}}};
  ASSERT_TRUE(sched_->SubmitGang("g", gang).ok());
  EXPECT_TRUE(sched_->Schedule().empty());
  EXPECT_EQ(PendingReason("g/a"),
            "gang g (3 instances) does not fit all at once: with 2 placed, g/c needs 2 vcores on "
            "one node, at most 1 free on any node");
  // Nothing of the gang holds resources: a 3-vcore request fits.
  Submit("u/big", "u", {3, 100, 0});
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("u/big"));
  EXPECT_EQ(sched_->Nodes()[0].free.vcores + sched_->Nodes()[1].free.vcores, 3);
}

TEST_F(SchedulerTest, GpusAreNeverGivenTwice) {
  Make({Node("n1", 64, 65536, 4)});
  for (int i = 0; i < 6; ++i) Submit("u/" + std::to_string(i), "u", {1, 1024, 1});
  auto placements = sched_->Schedule();
  ASSERT_EQ(placements.size(), 4u);
  std::set<int> used;
  for (const Placement& p : placements) {
    ASSERT_EQ(p.gpus.size(), 1u);
    EXPECT_TRUE(used.insert(p.gpus[0]).second) << "GPU " << p.gpus[0] << " given twice";
  }
  EXPECT_EQ(used, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(PendingReason("u/4"), "needs 1 GPU on one node, at most 0 free on any node");
  // A release frees exactly that device, and the next placement gets it.
  ASSERT_TRUE(sched_->Release(placements[2].id).ok());
  auto next = sched_->Schedule();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].gpus, placements[2].gpus);
}

TEST_F(SchedulerTest, GpuExclusivityHoldsUnderRandomChurn) {
  Make({Node("a", 32, 65536, 8), Node("b", 32, 65536, 8), Node("c", 16, 32768, 2)});
  std::mt19937 rng(7);
  std::set<std::string> live;
  int next_id = 0;
  for (int round = 0; round < 200; ++round) {
    for (int k = 0; k < 5; ++k) {
      std::string id = "u" + std::to_string(rng() % 3) + "/" + std::to_string(next_id++);
      Submit(id, id.substr(0, 2), {1 + int64_t(rng() % 4), 1024, int64_t(rng() % 4)});
      live.insert(id);
    }
    sched_->Schedule();
    std::map<std::string, std::set<int>> used;  // node -> GPU indices
    Resources total_used;
    for (const std::string& id : live) {
      Decision d = Get(id);
      if (auto* p = std::get_if<Placed>(&d)) {
        for (int g : p->gpus) {
          ASSERT_TRUE(used[p->node].insert(g).second)
              << "round " << round << ": GPU " << g << " of " << p->node << " twice";
        }
      }
    }
    for (const NodeUsage& n : sched_->Nodes()) {
      EXPECT_EQ(static_cast<int64_t>(n.free_gpus.size()), n.free.gpus);
      EXPECT_EQ(n.capacity.gpus - n.free.gpus, static_cast<int64_t>(used[n.name].size()));
      EXPECT_GE(n.free.vcores, 0);
    }
    // Release a random third.
    for (auto it = live.begin(); it != live.end();) {
      if (rng() % 3 == 0) {
        ASSERT_TRUE(sched_->Release(*it).ok());
        it = live.erase(it);
      } else {
        ++it;
      }
    }
  }
}

TEST_F(SchedulerTest, BestFitPacksGpuWorkAndAvoidsFragmentation) {
  Make({Node("n1", 16, 65536, 2), Node("n2", 16, 65536, 2)});
  Submit("u/one-a", "u", {1, 1024, 1});
  Submit("u/one-b", "u", {1, 1024, 1});
  auto first = sched_->Schedule();
  ASSERT_EQ(first.size(), 2u);
  // Both single-GPU requests share a node, so a two-GPU request still fits on the other.
  EXPECT_EQ(first[0].node, first[1].node);
  Submit("u/two", "u", {1, 1024, 2});
  auto second = sched_->Schedule();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0].node, first[0].node);
}

TEST_F(SchedulerTest, FragmentedGpusGiveAPendingReason) {
  Make({Node("n1", 16, 65536, 2), Node("n2", 16, 65536, 2)});
  ASSERT_TRUE(sched_->Restore({"x/1", "x", "", {1, 1024, 1}}, "n1", {0}).ok());
  ASSERT_TRUE(sched_->Restore({"x/2", "x", "", {1, 1024, 1}}, "n2", {1}).ok());
  Submit("u/two", "u", {1, 1024, 2});
  EXPECT_TRUE(sched_->Schedule().empty());
  EXPECT_EQ(PendingReason("u/two"), "needs 2 GPUs on one node, at most 1 free on any node");
  // Whichever frees first makes room; the GPUs given are that node's two devices.
  ASSERT_TRUE(sched_->Release("x/2").ok());
  auto p = sched_->Schedule();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].node, "n2");
  EXPECT_EQ(p[0].gpus, (std::vector<int>{0, 1}));
}

// The reason says what the queue holds and what the request would add: a queue below its
// cap is not "at" it.
TEST_F(SchedulerTest, AQueueBelowItsMaximumSaysWhatTheRequestWouldAdd) {
  Make({Node("n1", 8, 100000)}, {{"batch", 0, 0.5, {}, {}}});
  for (int i = 0; i < 3; ++i) Submit("b/" + std::to_string(i), "b", {1, 100, 0}, "batch");
  Submit("b/big", "b", {2, 100, 0}, "batch");
  sched_->Schedule();
  EXPECT_EQ(PendingReason("b/big"),
            "queue batch holds 37.5% of the cluster; 2 vcores, 100 MiB more would take it past "
            "its maximum share (50%)");
}

TEST_F(SchedulerTest, QueuesBelowTheirGuaranteeComeFirst) {
  Make({Node("n1", 10, 100000)}, {{"prod", 0.7, 1.0, {}, {}}, {"research", 0.3, 1.0, {}, {}}});
  // prod submits everything first; research still reaches its 30%.
  for (int i = 0; i < 10; ++i) Submit("p/" + std::to_string(i), "p", {1, 100, 0}, "prod");
  for (int i = 0; i < 10; ++i) Submit("r/" + std::to_string(i), "r", {1, 100, 0}, "research");
  auto placed = PlacedPerUser(sched_->Schedule());
  EXPECT_EQ(placed["p"], 7);
  EXPECT_EQ(placed["r"], 3);
}

TEST_F(SchedulerTest, QueueNeverPassesItsMaximumShare) {
  Make({Node("n1", 10, 100000)}, {{"batch", 0, 0.5, {}, {}}});
  for (int i = 0; i < 10; ++i) Submit("b/" + std::to_string(i), "b", {1, 100, 0}, "batch");
  EXPECT_EQ(sched_->Schedule().size(), 5u);
  EXPECT_EQ(PendingReason("b/7"),
            "queue batch holds 50% of the cluster; 1 vcore, 100 MiB more would take it past its "
            "maximum share (50%)");
  // The default queue is not held back by batch's cap.
  Submit("d/0", "d", {5, 100, 0});
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("d/0"));
}

TEST_F(SchedulerTest, InfeasibleRequestsSayWhy) {
  Make({Node("n1", 8, 16384, 8), Node("n2", 8, 16384, 8)}, {{"small", 0, 0.25, {}, {}}});
  Submit("u/huge", "u", {1, 1024, 16});
  Decision d = Get("u/huge");
  ASSERT_TRUE(std::holds_alternative<Infeasible>(d));
  EXPECT_EQ(std::get<Infeasible>(d).reason,
            "no node is large enough for 1 vcore, 1024 MiB, 16 GPUs (largest: 8 vcores, 16384 "
            "MiB, 8 GPUs)");
  Submit("u/capped", "u", {6, 1024, 0}, "small");
  d = Get("u/capped");
  ASSERT_TRUE(std::holds_alternative<Infeasible>(d));
  EXPECT_NE(std::get<Infeasible>(d).reason.find("more than queue small's maximum share (25%"),
            std::string::npos);
  std::vector<Request> gang;
  for (int i = 0; i < 5; ++i) gang.push_back({"g/" + std::to_string(i), "u", "", {4, 1024, 0}});
  ASSERT_TRUE(sched_->SubmitGang("g", gang).ok());
  d = Get("g/0");
  ASSERT_TRUE(std::holds_alternative<Infeasible>(d));
  EXPECT_NE(std::get<Infeasible>(d).reason.find("more than the whole cluster"), std::string::npos);
  // Infeasible work is never placed and does not block anything.
  Submit("u/ok", "u", {1, 1024, 1});
  auto p = sched_->Schedule();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].id, "u/ok");
}

TEST_F(SchedulerTest, BadRequestsAreErrors) {
  Make({Node("n1", 8, 16384)}, {{"team", 0, 1, {}, {}}});
  EXPECT_EQ(sched_->Submit({"x", "u", "nope", {1, 1, 0}}).code(), StatusCode::kNotFound);
  EXPECT_TRUE(sched_->Submit({"x", "alice", "team", {1, 1, 0}}).ok());
  EXPECT_EQ(sched_->Submit({"x", "alice", "team", {1, 1, 0}}).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(sched_->Submit({"y", "alice", "", {0, 0, 0}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sched_->Submit({"y", "alice", "", {-1, 10, 0}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      sched_->SubmitGang("g", {{"a", "alice", "", {1, 1, 0}}, {"b", "bob", "", {1, 1, 0}}}).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(sched_->Get("a").status().code(), StatusCode::kNotFound);  // nothing was queued
  EXPECT_EQ(sched_->Release("zzz").code(), StatusCode::kNotFound);
}

TEST_F(SchedulerTest, ReleaseFreesAndForgets) {
  Make({Node("n1", 4, 4096)});
  Submit("u/a", "u", {4, 1024, 0});
  Submit("u/b", "u", {4, 1024, 0});
  sched_->Schedule();
  ASSERT_TRUE(IsPlaced("u/a"));
  ASSERT_TRUE(sched_->Release("u/a").ok());
  EXPECT_EQ(sched_->Get("u/a").status().code(), StatusCode::kNotFound);
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("u/b"));
  // Withdrawing a pending request: it is never placed.
  Submit("u/c", "u", {4, 1024, 0});
  ASSERT_TRUE(sched_->Release("u/c").ok());
  ASSERT_TRUE(sched_->Release("u/b").ok());
  EXPECT_TRUE(sched_->Schedule().empty());
  EXPECT_EQ(sched_->Nodes()[0].free, (Resources{4, 4096, 0}));
  EXPECT_EQ(sched_->Queues().back().used, (Resources{}));
}

TEST_F(SchedulerTest, RestoreRejectsConflicts) {
  Make({Node("n1", 4, 4096, 2)});
  ASSERT_TRUE(sched_->Restore({"u/a", "u", "", {1, 100, 1}}, "n1", {1}).ok());
  EXPECT_EQ(sched_->Restore({"u/b", "u", "", {1, 100, 1}}, "n1", {1}).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(sched_->Restore({"u/b", "u", "", {1, 100, 1}}, "n9", {0}).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(sched_->Restore({"u/b", "u", "", {1, 100, 2}}, "n1", {0}).code(),
            StatusCode::kInvalidArgument);
  Submit("u/c", "u", {1, 100, 1});
  auto p = sched_->Schedule();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].gpus, (std::vector<int>{0}));
}

// ---- priorities ----------------------------------------------------------------------

QueueConfig PriorityQueue(const std::string& name, int default_priority, int max_priority) {
  QueueConfig q{name, 0, 1, {}, {}};
  q.default_priority = default_priority;
  q.max_priority = max_priority;
  return q;
}

// Within a queue the highest priority goes first, before the users' dominant shares and the
// requests' ages; at equal priority DRF and age decide as before.
TEST_F(SchedulerTest, TheHighestPriorityGoesFirstInItsQueue) {
  Make({Node("n1", 2, 4096)}, {PriorityQueue("default", 0, 10)});
  Submit("bob/older", "bob", {1, 100, 0});
  Submit("alice/old", "alice", {1, 100, 0});
  Submit("alice/urgent", "alice", {1, 100, 0}, "", 10);
  Submit("carol/default", "carol", {1, 100, 0});
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("alice/urgent"));
  // Then, at priority 0, DRF: bob and carol hold nothing, alice half the node; of bob and
  // carol, the older request.
  EXPECT_FALSE(IsPlaced("alice/old"));
  EXPECT_TRUE(IsPlaced("bob/older"));
  EXPECT_FALSE(IsPlaced("carol/default"));
}

TEST_F(SchedulerTest, APriorityIsTheQueuesDefaultAndNeverAboveItsMaximum) {
  Make({Node("n1", 2, 4096)}, {PriorityQueue("gpu", 3, 5)});
  EXPECT_EQ(*sched_->EffectivePriority("gpu", std::nullopt), 3);
  EXPECT_EQ(*sched_->EffectivePriority("gpu", 4), 4);
  EXPECT_EQ(*sched_->EffectivePriority("gpu", 50), 5);  // a stored launch meets a lower cap
  EXPECT_EQ(*sched_->EffectivePriority("gpu", -7), -7);
  // The default queue (added, as ParseQueues adds it) allows none above 0, as YARN's
  // cluster-wide max-application-priority defaults to 0.
  EXPECT_EQ(*sched_->EffectivePriority("", 9), 0);
  EXPECT_EQ(sched_->EffectivePriority("nope", 1).status().code(), StatusCode::kNotFound);
  // Capped at submission: a request asking for 50 in "gpu" waits behind one at 5 only by age.
  Submit("u/five", "u", {2, 100, 0}, "gpu", 5);
  Submit("u/fifty", "u", {2, 100, 0}, "gpu", 50);
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("u/five"));
  EXPECT_FALSE(IsPlaced("u/fifty"));
}

TEST_F(SchedulerTest, AGangsMembersShareOnePriority) {
  Make({Node("n1", 4, 4096)}, {PriorityQueue("default", 0, 10)});
  Status s = sched_->SubmitGang("u/g", {{"u/g/a", "u", "", {1, 100, 0}, 1},
                                        {"u/g/b", "u", "", {1, 100, 0}, 2}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("same priority"), std::string::npos) << s.ToString();
}

// ---- reservations --------------------------------------------------------------------

// A 4-GPU gang (2 members of 2 GPUs) on a 4-GPU node behind a steady stream of 1-GPU
// requests of the same priority: each time a GPU frees, a 1-GPU request takes it and the
// gang never has 4 at once. With a reservation after 60 s of waiting, the GPUs that free are
// held for the gang, which is placed once all four are free.
TEST_F(SchedulerTest, AFourGpuGangBehindAStreamOfOneGpuRequestsIsPlacedAfterItsReservation) {
  auto run = [this](Clock::Duration reservation_after, int rounds, std::string* holder_reason,
                    std::string* blocked_reason) {
    Make({Node("n1", 16, 65536, 4)}, {}, reservation_after);
    std::deque<std::string> running;
    int next = 0;
    auto one_more = [&] {
      const std::string id = "stream/" + std::to_string(next++);
      Submit(id, "stream", {1, 1024, 1});
      return id;
    };
    for (int i = 0; i < 4; ++i) one_more();
    for (const Placement& p : sched_->Schedule()) running.push_back(p.id);
    EXPECT_EQ(running.size(), 4u);
    EXPECT_TRUE(sched_
                    ->SubmitGang("gang/train", {{"gang/train/worker-0", "gang", "", {2, 1024, 2}},
                                                {"gang/train/worker-1", "gang", "", {2, 1024, 2}}})
                    .ok());
    one_more();  // always one 1-GPU request waiting beside the gang
    for (int round = 1; round <= rounds; ++round) {
      clock_.Advance(std::chrono::seconds(10));
      // The oldest 1-GPU job ends, and another arrives.
      EXPECT_TRUE(sched_->Release(running.front()).ok());
      running.pop_front();
      one_more();
      for (const Placement& p : sched_->Schedule()) {
        if (p.id.rfind("gang/", 0) == 0) return round;
        running.push_back(p.id);
      }
      if (holder_reason->empty() && PendingReason("gang/train/worker-0").find("reservation") !=
                                        std::string::npos) {
        *holder_reason = PendingReason("gang/train/worker-0");
        *blocked_reason = PendingReason("stream/" + std::to_string(next - 1));
      }
    }
    return -1;
  };
  std::string holder, blocked;
  // Without a reservation within the test's 100 rounds (1,000 s): never.
  EXPECT_EQ(run(std::chrono::hours(1), 100, &holder, &blocked), -1);
  EXPECT_EQ(holder, "");
  // With one after 60 s: the reservation starts in round 6 (60 s), the four running jobs
  // end by round 9, and the gang is placed then.
  const int placed = run(std::chrono::seconds(60), 100, &holder, &blocked);
  EXPECT_GE(placed, 6);
  EXPECT_LE(placed, 10);
  EXPECT_NE(holder.find("holds the reservation (waited 60 s, the longest at priority 0): n1: "
                        "4 vcores, 2048 MiB, 4 GPUs"),
            std::string::npos)
      << holder;
  EXPECT_NE(blocked.find("is reserved for gang gang/train"), std::string::npos) << blocked;
}

// Later work may use what the reservation does not need (backfill): CPU-only work runs beside
// a reservation of GPUs, GPU work does not.
TEST_F(SchedulerTest, WorkThatDoesNotDelayTheReservationStillRuns) {
  Make({Node("n1", 8, 16384, 2)}, {}, std::chrono::seconds(0));
  Submit("a/gpu", "a", {1, 1024, 1});
  sched_->Schedule();
  Submit("b/two-gpus", "b", {2, 2048, 2});
  clock_.Advance(std::chrono::seconds(1));
  Submit("c/cpu", "c", {4, 4096, 0});
  Submit("c/gpu", "c", {1, 1024, 1});
  sched_->Schedule();
  EXPECT_FALSE(IsPlaced("b/two-gpus"));
  EXPECT_TRUE(IsPlaced("c/cpu"));
  EXPECT_FALSE(IsPlaced("c/gpu")) << "the free GPU is b's when a's frees";
  auto r = sched_->CurrentReservation();
  EXPECT_EQ(r.holder, "b/two-gpus");
  ASSERT_EQ(r.nodes.size(), 1u);
  EXPECT_EQ(r.nodes[0].first, "n1");
  EXPECT_EQ(r.nodes[0].second, (Resources{2, 2048, 2}));
  ASSERT_TRUE(sched_->Release("a/gpu").ok());
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("b/two-gpus"));
  EXPECT_EQ(sched_->CurrentReservation().holder, "");
  EXPECT_FALSE(IsPlaced("c/gpu"));  // nothing left for it
}

// The reservation goes to the highest priority first, then the oldest; a withdrawn holder
// leaves it to the next.
TEST_F(SchedulerTest, TheReservationGoesToTheHighestPriorityThenTheOldest) {
  Make({Node("n1", 4, 4096, 2)}, {PriorityQueue("default", 0, 10)}, std::chrono::seconds(30));
  Submit("x/holder", "x", {1, 100, 2});
  sched_->Schedule();
  Submit("a/old", "a", {1, 100, 2});
  clock_.Advance(std::chrono::seconds(10));
  Submit("b/urgent", "b", {1, 100, 2}, "", 5);
  clock_.Advance(std::chrono::seconds(25));
  sched_->Schedule();  // a has waited 35 s, b 25 s: only a may reserve
  EXPECT_EQ(sched_->CurrentReservation().holder, "a/old");
  clock_.Advance(std::chrono::seconds(5));
  sched_->Schedule();  // both have waited 30 s or more: b, of the higher priority
  EXPECT_EQ(sched_->CurrentReservation().holder, "b/urgent");
  ASSERT_TRUE(sched_->Release("b/urgent").ok());
  EXPECT_EQ(sched_->CurrentReservation().holder, "");
  sched_->Schedule();
  EXPECT_EQ(sched_->CurrentReservation().holder, "a/old");
  ASSERT_TRUE(sched_->Release("x/holder").ok());
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("a/old"));
}

// A reservation holds back work of its holder's priority or lower, not more urgent work.
TEST_F(SchedulerTest, MoreUrgentWorkIsNotHeldBackByAReservation) {
  Make({Node("n1", 4, 4096, 2)}, {PriorityQueue("default", 0, 10)}, std::chrono::seconds(10));
  Submit("x/one", "x", {1, 100, 1});
  sched_->Schedule();
  Submit("a/two", "a", {1, 100, 2});
  clock_.Advance(std::chrono::seconds(10));
  Submit("b/low", "b", {1, 100, 1});
  sched_->Schedule();
  EXPECT_EQ(sched_->CurrentReservation().holder, "a/two");
  EXPECT_FALSE(IsPlaced("b/low")) << "the free GPU is a's when x's frees";
  // More urgent, and not waiting long enough to take the reservation over: placed beside it.
  Submit("c/urgent", "c", {1, 100, 1}, "", 3);
  sched_->Schedule();
  EXPECT_TRUE(IsPlaced("c/urgent"));
  EXPECT_EQ(sched_->CurrentReservation().holder, "a/two");
  EXPECT_FALSE(IsPlaced("b/low"));
}

// Infeasible work and work past its queue's maximum never hold a reservation.
TEST_F(SchedulerTest, WorkThatCannotRunHoldsNoReservation) {
  Make({Node("n1", 4, 4096, 2)}, {{"small", 0, 0.5, {}, {}}}, std::chrono::seconds(0));
  Submit("u/too-big", "u", {1, 100, 3});
  Submit("u/past-cap", "u", {1, 100, 2}, "small");
  clock_.Advance(std::chrono::seconds(5));
  sched_->Schedule();
  EXPECT_EQ(sched_->CurrentReservation().holder, "");
  EXPECT_TRUE(std::holds_alternative<Infeasible>(Get("u/too-big")));
}

TEST_F(SchedulerTest, SameInputsSamePlacements) {
  auto run = [this]() {
    Make({Node("a", 8, 16384, 4), Node("b", 8, 16384, 4)},
         {{"q1", 0.5, 1, {}, {}}, {"q2", 0.2, 0.6, {}, {}}});
    std::mt19937 rng(11);
    std::vector<Placement> all;
    for (int i = 0; i < 60; ++i) {
      std::string q = i % 3 == 0 ? "q1" : i % 3 == 1 ? "q2" : "";
      Submit("u" + std::to_string(i % 4) + "/" + std::to_string(i), "u" + std::to_string(i % 4),
             {1 + int64_t(rng() % 3), 512 + int64_t(rng() % 2048), int64_t(rng() % 2)}, q);
    }
    for (const Placement& p : sched_->Schedule()) all.push_back(p);
    std::vector<std::string> flat;
    for (const Placement& p : all) {
      std::string s = p.id + "@" + p.node;
      for (int g : p.gpus) s += ":" + std::to_string(g);
      flat.push_back(s);
    }
    return flat;
  };
  auto a = run();
  auto b = run();
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace tarn::scheduler
