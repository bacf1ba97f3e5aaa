#include "train/shard_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

namespace tarn::train {
namespace {

// Every element of every parameter is held exactly once.
void ExpectCovers(const ShardPlan& plan, const std::vector<int64_t>& sizes) {
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> ranges;
  for (int s = 0; s < plan.servers(); ++s) {
    int64_t held = 0;
    for (const ParamSlice& slice : plan.slices[static_cast<size_t>(s)]) {
      ranges[slice.param].push_back({slice.offset, slice.count});
      held += slice.count;
    }
    EXPECT_EQ(held, plan.elements[static_cast<size_t>(s)]);
  }
  for (size_t p = 0; p < sizes.size(); ++p) {
    auto& r = ranges[static_cast<int>(p)];
    std::sort(r.begin(), r.end());
    int64_t next = 0;
    for (const auto& [offset, count] : r) {
      EXPECT_EQ(offset, next) << "param " << p;
      next = offset + count;
    }
    EXPECT_EQ(next, sizes[p]) << "param " << p;
  }
}

TEST(ShardPlanTest, TheCnnSplitsEvenlyAcrossTwoServers) {
  // conv1 w/b, conv2 w/b, fc1 w/b, fc2 w/b: 225,034 elements, fc1's weight 204,800 of them.
  const std::vector<int64_t> sizes = {288, 32, 18432, 64, 204800, 128, 1280, 10};
  const ShardPlan plan = PlanShards(sizes, 2);
  ASSERT_EQ(plan.servers(), 2);
  ExpectCovers(plan, sizes);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  for (int64_t e : plan.elements) {
    EXPECT_LE(std::abs(e - total / 2), total / 8) << "balanced by bytes: " << e;
  }
  EXPECT_EQ(PlanShards(sizes, 2).slices, plan.slices) << "deterministic";
  for (const auto& list : plan.slices) {
    EXPECT_TRUE(std::is_sorted(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.param != b.param ? a.param < b.param : a.offset < b.offset;
    }));
  }
}

TEST(ShardPlanTest, OneServerHoldsEverythingInOrderAndOddCasesWork) {
  const std::vector<int64_t> sizes = {10, 3, 7};
  const ShardPlan one = PlanShards(sizes, 1, 100);
  ASSERT_EQ(one.slices[0].size(), 3u);
  EXPECT_EQ(one.slices[0][1], (ParamSlice{1, 0, 3}));
  ExpectCovers(PlanShards(sizes, 3), sizes);
  ExpectCovers(PlanShards(sizes, 8), sizes);  // more servers than pieces of work
  ExpectCovers(PlanShards({1}, 4), {1});
}

}  // namespace
}  // namespace tarn::train
