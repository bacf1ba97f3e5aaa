#include "api/watches.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

namespace tarn::api {
namespace {

using namespace std::chrono_literals;

// A snapshot of generation `generation` holding assembly "alice/a" last changed at
// `modified` (none when 0).
std::shared_ptr<const StateSnapshot> Snapshot(uint64_t generation, uint64_t modified) {
  auto s = std::make_shared<StateSnapshot>();
  s->generation = generation;
  if (modified > 0) {
    service::AssemblyStatus a;
    a.user = "alice";
    a.name = "a";
    s->by_key["alice/a"] = 0;
    s->assemblies.push_back(std::make_shared<const AssemblyView>(
        a, std::make_shared<const std::vector<service::Event>>(), 0, modified));
  }
  return s;
}

class WatchesTest : public ::testing::Test {
 protected:
  void Set(std::shared_ptr<const StateSnapshot> s) {
    std::lock_guard lock(mu_);
    current_ = std::move(s);
  }
  std::shared_ptr<const StateSnapshot> Get() {
    std::lock_guard lock(mu_);
    return current_;
  }
  // Publishes `s` as the loop does: current first, then Published().
  void Publish(Watches& w, std::shared_ptr<const StateSnapshot> s) {
    Set(s);
    w.Published(*s);
  }
  std::unique_ptr<Watches> Make(size_t max_waiting = 16) {
    return std::make_unique<Watches>([this] { return Get(); }, max_waiting);
  }

  std::mutex mu_;
  std::shared_ptr<const StateSnapshot> current_ = Snapshot(5, 3);
};

TEST_F(WatchesTest, AReadIsHeldUntilItsAssemblyChangesPastItsIndex) {
  std::atomic<int> woken{0};  // before w: its destructor wakes what still waits
  auto w = Make();
  ASSERT_TRUE(w->Wait("alice/a", 3, 60s, [&] { ++woken; }));
  EXPECT_EQ(w->waiting(), 1u);
  Publish(*w, Snapshot(6, 3));  // another assembly changed: not this one
  EXPECT_EQ(woken, 0);
  Publish(*w, Snapshot(7, 7));
  EXPECT_EQ(woken, 1);
  EXPECT_EQ(w->waiting(), 0u);
  Publish(*w, Snapshot(8, 8));  // woken once only
  EXPECT_EQ(woken, 1);
}

TEST_F(WatchesTest, ChangedGoneOrForeignIndexesAreAnsweredAtOnce) {
  auto w = Make();
  auto never = [] { ADD_FAILURE() << "woken, though it was answered at once"; };
  EXPECT_FALSE(w->Wait("alice/a", 2, 60s, never));    // changed at 3, after 2
  EXPECT_FALSE(w->Wait("alice/b", 3, 60s, never));    // no such assembly (gone)
  EXPECT_FALSE(w->Wait("alice/a", 900, 60s, never));  // above generation 5: another run's
  EXPECT_EQ(w->waiting(), 0u);
}

TEST_F(WatchesTest, AnAssemblyThatGoesAwayWakesItsReaders) {
  std::atomic<int> woken{0};  // before w: its destructor wakes what still waits
  auto w = Make();
  ASSERT_TRUE(w->Wait("alice/a", 3, 60s, [&] { ++woken; }));
  Publish(*w, Snapshot(6, 0));
  EXPECT_EQ(woken, 1);
}

TEST_F(WatchesTest, TheWaitEndsAReadWithoutAChange) {
  std::atomic<int> woken{0};  // before w: its destructor wakes what still waits
  auto w = Make();
  ASSERT_TRUE(w->Wait("alice/a", 3, 60s, [&] { woken += 10; }));
  ASSERT_TRUE(w->Wait("alice/a", 3, 50ms, [&] { ++woken; }));
  for (int i = 0; i < 400 && woken == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(woken, 1);  // the short one alone
  EXPECT_EQ(w->waiting(), 1u);
}

TEST_F(WatchesTest, AtTheLimitReadsAreAnsweredAtOnceAndCloseWakesEveryone) {
  std::atomic<int> woken{0};
  auto w = Make(2);
  ASSERT_TRUE(w->Wait("alice/a", 3, 60s, [&] { ++woken; }));
  ASSERT_TRUE(w->Wait("alice/a", 3, 60s, [&] { ++woken; }));
  EXPECT_FALSE(w->Wait("alice/a", 3, 60s, [&] { ++woken; }));
  w->Close();
  EXPECT_EQ(woken, 2);
  EXPECT_FALSE(w->Wait("alice/a", 3, 60s, [&] { ++woken; }));
  EXPECT_EQ(woken, 2);
}

// A publish racing a Wait never loses the wake-up: whatever the interleaving, a reader of
// index 3 is answered (at once or woken) once generation 4 changed it.
TEST_F(WatchesTest, APublishRacingAWaitIsNeverMissed) {
  for (int round = 0; round < 200; ++round) {
    Set(Snapshot(5, 3));
    std::atomic<bool> answered{false};
    auto w = Make();
    std::thread publisher([&] { Publish(*w, Snapshot(6, 6)); });
    if (!w->Wait("alice/a", 3, 60s, [&] { answered = true; })) answered = true;
    publisher.join();
    ASSERT_TRUE(answered) << "round " << round;
  }
}

}  // namespace
}  // namespace tarn::api
