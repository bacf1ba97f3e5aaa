#include "common/subprocess.h"

#include <gtest/gtest.h>

namespace tarn {
namespace {

using namespace std::chrono_literals;

TEST(RunCommand, CapturesBothStreamsAndTheExitCode) {
  auto r = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 4"}, 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_FALSE(r->success());
  EXPECT_EQ(r->FirstErrorLine(), "err");
}

TEST(RunCommand, ReportsASignal) {
  auto r = RunCommand({"/bin/sh", "-c", "kill -9 $$"}, 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->signal, 9);
  EXPECT_EQ(r->exit_code, -1);
}

TEST(RunCommand, MissingProgramExits127WithAMessage) {
  auto r = RunCommand({"no-such-program-tarn"}, 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
  EXPECT_EQ(r->FirstErrorLine(), "cannot run no-such-program-tarn: No such file or directory");
}

TEST(RunCommand, TimeoutKillsTheCommand) {
  auto r = RunCommand({"/bin/sleep", "30"}, 100ms);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
}

TEST(RunCommand, OutputIsCapped) {
  auto r = RunCommand({"/bin/sh", "-c", "head -c 100000 /dev/zero"}, 10s, 1000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out.size(), 1000u);
}

}  // namespace
}  // namespace tarn
