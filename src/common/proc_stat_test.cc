#include "common/proc_stat.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace tarn {
namespace {

TEST(ReadProcStat, SelfRunsAndAZombieIsSeen) {
  auto self = ReadProcStat(::getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->state, 'R');
  EXPECT_FALSE(self->start_time.empty());
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  // Not reaped yet: a zombie, with the start time it had while alive.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
  auto zombie = ReadProcStat(child);
  ASSERT_TRUE(zombie.has_value());
  EXPECT_EQ(zombie->state, 'Z');
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(ReadProcStat(child).has_value());
}

}  // namespace
}  // namespace tarn
