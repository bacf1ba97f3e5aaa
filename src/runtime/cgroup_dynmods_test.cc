#include "runtime/cgroup_dynmods.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace tarn::runtime {
namespace {

// A Debian 12 machine in systemd's hybrid mode: every controller on v1, cgroup2 (no
// controllers) at /sys/fs/cgroup/unified.
constexpr char kHybrid[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 "
    "cgroup2 rw,nsdelegate\n"
    "42 23 0:40 / /proc rw,nosuid - proc proc rw\n";

// systemd's unified mode, as its mount-setup mounts it.
constexpr char kUnified[] =
    "26 23 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

TEST(CgroupDynmodsTest, ReadsTheCgroupMountsOfAMountinfo) {
  std::vector<CgroupMount> mounts = CgroupMounts(kHybrid);
  ASSERT_EQ(mounts.size(), 4u);
  EXPECT_EQ(mounts[0].mount_point, "/sys/fs/cgroup/cpu");
  EXPECT_EQ(mounts[0].fs_type, "cgroup");
  EXPECT_EQ(mounts[0].super_options, (std::vector<std::string>{"rw", "cpu"}));
  EXPECT_EQ(mounts[3].fs_type, "cgroup2");
  EXPECT_EQ(mounts[3].super_options, (std::vector<std::string>{"rw", "nsdelegate"}));
  // Escaped mount points, and lines that are not mountinfo's, are read as the kernel means.
  mounts = CgroupMounts(
      "50 31 0:50 / /mnt/my\\040cgroups rw - cgroup2 none rw\ngarbage\n51 x - cgroup\n");
  ASSERT_EQ(mounts.size(), 1u);
  EXPECT_EQ(mounts[0].mount_point, "/mnt/my cgroups");
}

TEST(CgroupDynmodsTest, ReconfiguresTheCgroup2MountKeepingItsFlags) {
  auto hybrid = PlanFavorDynmods(CgroupMounts(kHybrid));
  ASSERT_TRUE(hybrid.ok()) << hybrid.status().ToString();
  EXPECT_EQ(hybrid->mount_point, "/sys/fs/cgroup/unified");
  EXPECT_EQ(hybrid->flags, (std::vector<std::string>{"nsdelegate", "favordynmods"}));
  auto unified = PlanFavorDynmods(CgroupMounts(kUnified));
  ASSERT_TRUE(unified.ok()) << unified.status().ToString();
  EXPECT_EQ(unified->mount_point, "/sys/fs/cgroup");
  // A reconfiguration clears the flags it is not given: nsdelegate and memory_recursiveprot
  // must be given again.
  EXPECT_EQ(unified->flags,
            (std::vector<std::string>{"nsdelegate", "memory_recursiveprot", "favordynmods"}));
}

TEST(CgroupDynmodsTest, SaysWhatToDoWhenNoCgroup2IsMounted) {
  const std::string v1_only =
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n";
  EXPECT_FALSE(FavorsDynmods(CgroupMounts(v1_only)));
  auto plan = PlanFavorDynmods(CgroupMounts(v1_only));
  ASSERT_EQ(plan.status().code(), StatusCode::kNotFound);
  EXPECT_NE(plan.status().message().find("boot with cgroup_favordynmods=true"), std::string::npos)
      << plan.status().message();
}

// Once a hierarchy shows the flag (as every one does on a kernel built or booted with it),
// there is nothing to do, and nothing is reconfigured.
TEST(CgroupDynmodsTest, AMountThatShowsItMeansItIsOnAlready) {
  const std::string on =
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu,favordynmods\n";
  EXPECT_TRUE(FavorsDynmods(CgroupMounts(on)));
  EXPECT_FALSE(FavorsDynmods(CgroupMounts(kHybrid)));
  char path[] = "/tmp/tarn-mountinfo-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << on;
  auto done = FavorDynmods(path);
  ::unlink(path);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, "cgroup favordynmods already on");
  auto missing = FavorDynmods("/nonexistent/mountinfo");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/mountinfo"), std::string::npos);
}

}  // namespace
}  // namespace tarn::runtime
