#include "scheduler/resources.h"

#include <gtest/gtest.h>

#include <string>

namespace tarn::scheduler {
namespace {

TEST(ResourcesTest, DefaultIsZero) {
  Resources r;
  EXPECT_EQ(r.vcores, 0);
  EXPECT_EQ(r.memory_mib, 0);
  EXPECT_EQ(r.gpus, 0);
}

TEST(ResourcesTest, AddAndSubtractComponentWise) {
  Resources a{2, 4096, 1};
  Resources b{3, 1024, 2};
  EXPECT_EQ(a + b, (Resources{5, 5120, 3}));
  EXPECT_EQ(b - a, (Resources{1, -3072, 1}));
  // The operands are unchanged by the binary operators.
  EXPECT_EQ(a, (Resources{2, 4096, 1}));
  EXPECT_EQ(b, (Resources{3, 1024, 2}));
}

TEST(ResourcesTest, CompoundAssignmentModifiesInPlace) {
  Resources a{1, 512, 0};
  a += Resources{4, 1536, 2};
  EXPECT_EQ(a, (Resources{5, 2048, 2}));
  a -= Resources{2, 2048, 1};
  EXPECT_EQ(a, (Resources{3, 0, 1}));
}

TEST(ResourcesTest, EqualityComparesEveryComponent) {
  EXPECT_EQ((Resources{1, 2, 3}), (Resources{1, 2, 3}));
  EXPECT_NE((Resources{1, 2, 3}), (Resources{0, 2, 3}));
  EXPECT_NE((Resources{1, 2, 3}), (Resources{1, 0, 3}));
  EXPECT_NE((Resources{1, 2, 3}), (Resources{1, 2, 0}));
}

TEST(ResourcesTest, FitsIsComponentWise) {
  Resources node{8, 16384, 2};
  EXPECT_TRUE(node.Fits(Resources{8, 16384, 2}));  // exactly full
  EXPECT_TRUE(node.Fits(Resources{1, 512, 0}));
  EXPECT_TRUE(node.Fits(Resources{}));
  EXPECT_FALSE(node.Fits(Resources{9, 512, 0}));    // vcores over
  EXPECT_FALSE(node.Fits(Resources{1, 16385, 0}));  // memory over by one
  EXPECT_FALSE(node.Fits(Resources{1, 512, 3}));    // GPUs over
  // Not a total order: neither fits the other.
  Resources cpu_heavy{8, 1024, 0};
  Resources mem_heavy{1, 16384, 0};
  EXPECT_FALSE(cpu_heavy.Fits(mem_heavy));
  EXPECT_FALSE(mem_heavy.Fits(cpu_heavy));
  EXPECT_TRUE(Resources{}.Fits(Resources{}));
  EXPECT_FALSE(Resources{}.Fits(Resources{0, 0, 1}));
}

TEST(ResourcesTest, ToStringSingularAndPlural) {
  EXPECT_EQ(ToString(Resources{1, 512, 0}), "1 vcore, 512 MiB");
  EXPECT_EQ(ToString(Resources{2, 4096, 1}), "2 vcores, 4096 MiB, 1 GPU");
  EXPECT_EQ(ToString(Resources{16, 65536, 8}), "16 vcores, 65536 MiB, 8 GPUs");
  EXPECT_EQ(ToString(Resources{0, 0, 0}), "0 vcores, 0 MiB");
}

TEST(ResourcesTest, DominantShareTakesLargestShare) {
  // 3 of 9 vcores = 1/3; 12 of 18 GiB = 2/3 -> 2/3.
  Resources total{9, 18 * 1024, 0};
  EXPECT_DOUBLE_EQ(DominantShare(Resources{3, 12 * 1024, 0}, total), 2.0 / 3.0);
  // 6 of 9 vcores = 2/3; 3 of 18 GiB = 1/6 -> 2/3.
  EXPECT_DOUBLE_EQ(DominantShare(Resources{6, 3 * 1024, 0}, total), 2.0 / 3.0);
  // GPUs dominate: 1 of 4 vcores, 1 of 16 GiB, 1 of 2 GPUs -> 1/2.
  EXPECT_DOUBLE_EQ(DominantShare(Resources{1, 1024, 1}, Resources{4, 16384, 2}), 0.5);
  // Everything: 1.
  EXPECT_DOUBLE_EQ(DominantShare(total, total), 1.0);
  EXPECT_DOUBLE_EQ(DominantShare(Resources{}, total), 0.0);
}

TEST(ResourcesTest, DominantShareIgnoresDimensionsWithZeroTotal) {
  // The cluster has no GPUs: the request's GPU is ignored, 2 of 8 vcores = 1/4,
  // 1 of 8 GiB = 1/8 -> 1/4.
  EXPECT_DOUBLE_EQ(DominantShare(Resources{2, 1024, 1}, Resources{8, 8192, 0}), 0.25);
  // Only memory in the total: 3 of 4 GiB.
  EXPECT_DOUBLE_EQ(DominantShare(Resources{100, 3072, 5}, Resources{0, 4096, 0}), 0.75);
}

TEST(ResourcesTest, DominantShareOfEmptyTotalIsZero) {
  EXPECT_DOUBLE_EQ(DominantShare(Resources{4, 4096, 1}, Resources{}), 0.0);
  EXPECT_DOUBLE_EQ(DominantShare(Resources{}, Resources{}), 0.0);
}

TEST(ResourcesTest, DominantShareCanExceedOne) {
  // Over-allocation is reported as is: 6 of 4 vcores = 1.5.
  EXPECT_DOUBLE_EQ(DominantShare(Resources{6, 0, 0}, Resources{4, 1024, 0}), 1.5);
}

TEST(NodeSpecTest, CapacityCountsGpus) {
  NodeSpec node;
  node.name = "n1";
  node.vcores = 32;
  node.memory_mib = 262144;
  node.gpus = {{0, "NVIDIA H200", 143771}, {1, "NVIDIA H200", 143771}, {2, "NVIDIA H200", 143771}};
  EXPECT_EQ(node.capacity(), (Resources{32, 262144, 3}));

  NodeSpec cpu_only{"n2", 4, 8192, {}};
  EXPECT_EQ(cpu_only.capacity(), (Resources{4, 8192, 0}));
  EXPECT_EQ(NodeSpec{}.capacity(), Resources{});
}

TEST(NodeSpecTest, EqualityIncludesGpus) {
  NodeSpec a{"n", 4, 8192, {{0, "A", 1}}};
  NodeSpec b = a;
  EXPECT_EQ(a, b);
  b.gpus[0].memory_mib = 2;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace tarn::scheduler
