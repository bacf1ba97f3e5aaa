// Cgroup drivers against fake cgroup trees (plain directories): what is written where.
// The real v1 hierarchy of this machine is exercised by shim_runtime_test.cc.
#include "runtime/cgroups.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tarn::runtime {
namespace {

class FakeTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tarn-cgroup-test-XXXXXX";
    root_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + root_).c_str()); }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(root_ + "/" + rel) << text;
  }
  std::string Read(const std::string& rel) {
    std::ifstream in(root_ + "/" + rel);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void Mkdir(const std::string& rel) { ::mkdir((root_ + "/" + rel).c_str(), 0755); }

  std::string root_;
};

TEST_F(FakeTree, V2WritesLimitsAndEnablesControllersDownThePath) {
  Write("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
  auto cg = MakeCgroupsV2(root_);
  // Each level gets cgroup.controllers in a real tree; the fake needs them written.
  Mkdir("tarn");
  Write("tarn/cgroup.controllers", "cpu memory pids\n");
  Mkdir("tarn/alice");
  Write("tarn/alice/cgroup.controllers", "cpu memory pids\n");
  CgroupLimits l;
  l.memory_mib = 256;
  l.vcores = 2;
  l.pids_max = 512;
  ASSERT_TRUE(cg->Create("tarn/alice/w-0", l).ok());
  EXPECT_EQ(Read("cgroup.subtree_control"), "+memory +cpu +pids");
  EXPECT_EQ(Read("tarn/cgroup.subtree_control"), "+memory +cpu +pids");
  EXPECT_EQ(Read("tarn/alice/cgroup.subtree_control"), "+memory +cpu +pids");
  EXPECT_EQ(Read("tarn/alice/w-0/memory.max"), std::to_string(256 << 20));
  EXPECT_EQ(Read("tarn/alice/w-0/memory.swap.max"), "0");
  EXPECT_EQ(Read("tarn/alice/w-0/cpu.max"), "200000 100000");
  // runc: 1 + ((2048 - 2) * 9999) / 262142 = 79
  EXPECT_EQ(Read("tarn/alice/w-0/cpu.weight"), "79");
  EXPECT_EQ(Read("tarn/alice/w-0/pids.max"), "512");
  ASSERT_TRUE(cg->AddProcess("tarn/alice/w-0", 4242).ok());
  EXPECT_EQ(Read("tarn/alice/w-0/cgroup.procs"), "4242");
  EXPECT_TRUE(cg->Exists("tarn/alice/w-0"));
  EXPECT_FALSE(cg->Exists("tarn/bob"));
}

TEST_F(FakeTree, V2StatsReadTheKernelsOomCounter) {
  auto cg = MakeCgroupsV2(root_);
  Mkdir("g");
  Write("g/memory.events", "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n");
  Write("g/memory.max", "268435456\n");
  Write("g/memory.peak", "268000000\n");
  auto s = cg->Stats("g");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->oom_kills, 2);  // oom_kill, not oom or oom_group_kill
  EXPECT_EQ(s->memory_limit_bytes, 268435456);
  EXPECT_EQ(s->memory_peak_bytes, 268000000);
}

TEST_F(FakeTree, V2CreateFailsClearlyWhenControllersCannotBeEnabled) {
  auto cg = MakeCgroupsV2(root_ + "/missing");
  Status s = cg->Create("tarn/x", {});
  EXPECT_FALSE(s.ok());
}

TEST_F(FakeTree, V1WritesEachControllersFiles) {
  for (const char* c : {"memory", "cpu", "pids", "devices"}) Mkdir(c);
  auto cg = MakeCgroupsV1({{"memory", root_ + "/memory"},
                           {"cpu", root_ + "/cpu"},
                           {"pids", root_ + "/pids"},
                           {"devices", root_ + "/devices"}});
  // memsw exists only when swap accounting is on; the fake has it.
  Mkdir("memory/tarn");
  Mkdir("memory/tarn/c");
  Write("memory/tarn/c/memory.memsw.limit_in_bytes", "");
  CgroupLimits l;
  l.memory_mib = 64;
  l.vcores = 3;
  l.pids_max = 100;
  l.restrict_devices = true;
  l.gpu_minors = {2};
  ASSERT_TRUE(cg->Create("tarn/c", l).ok());
  EXPECT_EQ(Read("memory/tarn/c/memory.limit_in_bytes"), std::to_string(64 << 20));
  EXPECT_EQ(Read("memory/tarn/c/memory.memsw.limit_in_bytes"), std::to_string(64 << 20));
  EXPECT_EQ(Read("cpu/tarn/c/cpu.shares"), "3072");
  EXPECT_EQ(Read("cpu/tarn/c/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(Read("cpu/tarn/c/cpu.cfs_quota_us"), "300000");
  EXPECT_EQ(Read("pids/tarn/c/pids.max"), "100");
  EXPECT_EQ(Read("devices/tarn/c/devices.deny"), "a");
  // The last allow rule written is the GPU's (the fake keeps only the last write).
  EXPECT_EQ(Read("devices/tarn/c/devices.allow"), "c 195:2 rwm");
  Write("memory/tarn/c/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  auto s = cg->Stats("tarn/c");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->oom_kills, 1);
}

TEST_F(FakeTree, DetectPicksV1BasesFromProcSelfCgroup) {
  for (const char* c : {"memory", "cpu", "pids", "devices"}) Mkdir(c);
  Write("self",
        "9:name=systemd:/\n8:pids:/\n5:devices:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n");
  auto cg = DetectCgroups(root_, root_ + "/self");
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ((*cg)->Describe(), "cgroup v1 (cpu, devices, memory, pids)");
  Mkdir("memory/process_api");
  Mkdir("memory/process_api/abc");
  ASSERT_TRUE((*cg)->Create("t", {}).ok());
  struct stat st {};
  EXPECT_EQ(::stat((root_ + "/memory/process_api/abc/t").c_str(), &st), 0);
  EXPECT_EQ(::stat((root_ + "/pids/t").c_str(), &st), 0);
}

TEST_F(FakeTree, DetectPicksV2WhenTheRootIsUnified) {
  Write("cgroup.controllers", "cpu memory pids\n");
  Write("self", "0::/user.slice/tarn.service\n");
  auto cg = DetectCgroups(root_, root_ + "/self");
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ((*cg)->Describe(), "cgroup v2 (" + root_ + "/user.slice/tarn.service)");
}

TEST(SharesToWeight, MatchesRuncsConversion) {
  EXPECT_EQ(SharesToWeight(2), 1);
  EXPECT_EQ(SharesToWeight(1024), 39);  // 1 + (1022 * 9999) / 262142
  EXPECT_EQ(SharesToWeight(262144), 10000);
}

}  // namespace
}  // namespace tarn::runtime
