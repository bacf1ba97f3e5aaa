#include "auth/audit_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"

namespace tarn::auth {
namespace {

class AuditLogTest : public ::testing::Test {
 protected:
  std::unique_ptr<AuditLog> Open(int64_t max_bytes, int keep) {
    auto log = AuditLog::Open({(dir_ / "audit.log").string(), max_bytes, keep, &clock_});
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(*log) : nullptr;
  }
  TempDir tmp_{"audit-log-test"};
  const std::filesystem::path dir_ = tmp_.path();
  FakeClock clock_;
};

TEST_F(AuditLogTest, LinesAreJsonWithTheTimeFirstAndTheFileIs0600) {
  auto log = Open(1 << 20, 2);
  log->Record({{"method", "POST"}, {"status", 202}});
  std::ifstream in(dir_ / "audit.log");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line.rfind("{\"time\":\"2023-11-14T22:13:21.000Z\",\"time_ms\":1700000001000,", 0),
            0u)
      << line;
  auto e = nlohmann::json::parse(line);
  EXPECT_EQ(e["method"], "POST");
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "audit.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(AuditLogTest, RotatesBySizeKeepingTheNewestAndReadsAcrossFiles) {
  auto log = Open(400, 2);
  for (int i = 0; i < 40; ++i) {
    log->Record({{"n", i}, {"pad", std::string(60, 'x')}});
    clock_.Advance(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(std::filesystem::exists(dir_ / "audit.log.1"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "audit.log.2"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "audit.log.3"));
  for (const char* f : {"audit.log", "audit.log.1", "audit.log.2"}) {
    EXPECT_LE(std::filesystem::file_size(dir_ / f), 400u) << f;
  }
  std::vector<nlohmann::json> all = log->Read(0, 1000);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back()["n"], 39);  // oldest first, the newest kept
  for (size_t i = 1; i < all.size(); ++i) EXPECT_EQ(all[i]["n"], all[i - 1]["n"].get<int>() + 1);
  // since and limit
  const int64_t since = all[all.size() - 3]["time_ms"];
  auto recent = log->Read(since, 1000);
  ASSERT_EQ(recent.size(), 3u);
  EXPECT_EQ(recent[0]["n"], 37);
  auto last = log->Read(0, 2);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[1]["n"], 39);
}

TEST(ParseTimeTest, Rfc3339AndMilliseconds) {
  EXPECT_EQ(*ParseTime("1700000001000"), 1700000001000);
  EXPECT_EQ(*ParseTime("2023-11-14T22:13:21Z"), 1700000001000);
  EXPECT_EQ(*ParseTime("2023-11-14T22:13:21.5Z"), 1700000001500);
  EXPECT_EQ(*ParseTime("2023-11-15T00:13:21.000+02:00"), 1700000001000);
  EXPECT_EQ(Rfc3339Millis(1700000001234), "2023-11-14T22:13:21.234Z");
  for (const char* bad : {"", "yesterday", "2023-13-01T00:00:00Z", "2023-11-14T22:13:21",
                          "2023-11-14 22:13:21Z", "-5"}) {
    auto t = ParseTime(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.status().message().find("is not a time"), std::string::npos);
  }
}

}  // namespace
}  // namespace tarn::auth
