#include "train/metrics_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "train/progress.h"
#include "train/ps_wire.h"

namespace tarn::train {
namespace {

std::string Get(int port, const std::string& request) {
  auto c = Connection::Dial("127.0.0.1", port, std::chrono::seconds(5));
  EXPECT_TRUE(c.ok());
  if (!c.ok()) return "";
  ::send(c->fd(), request.data(), request.size(), MSG_NOSIGNAL);
  std::string reply;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(c->fd(), buffer, sizeof buffer, 0)) > 0) reply.append(buffer, n);
  return reply;
}

TEST(MetricsServerTest, ServesTheRenderedTextAndNothingElse) {
  Progress progress;
  progress.steps = 12;
  progress.accuracy = 0.875;
  MetricsServer server("127.0.0.1", 0, [&] { return progress.PrometheusText(); });
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);
  const std::string ok = Get(server.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("\ntarn_train_steps_total 12.000000\n"), std::string::npos) << ok;
  EXPECT_NE(ok.find("\ntarn_train_test_accuracy 0.875000\n"), std::string::npos) << ok;
  EXPECT_EQ(Get(server.port(), "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Get(server.port(), "GET /metrics HTTP/1.1\r\n" + std::string(9000, 'x'))
                .rfind("HTTP/1.1 431", 0),
            0u);
  server.Stop();
}

// The step and time of the last checkpoint and export, for the dashboard's timeline.
TEST(ProgressTest, CheckpointsAndExportsCarryTheirTime) {
  Progress progress;
  auto value = [&](const std::string& name) {
    const std::string text = progress.PrometheusText();
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + name.size() + 2);
  };
  EXPECT_EQ(value("tarn_train_checkpoint_step"), -1);
  EXPECT_EQ(value("tarn_train_checkpoint_timestamp_seconds"), 0);
  EXPECT_EQ(value("tarn_train_export_timestamp_seconds"), 0);
  const auto now = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const double before = now();
  progress.Checkpointed(40);
  progress.Exported(3);
  const double after = now();
  EXPECT_EQ(value("tarn_train_checkpoint_step"), 40);
  EXPECT_EQ(value("tarn_train_exported_version"), 3);
  for (const char* t : {"tarn_train_checkpoint_timestamp_seconds",
                        "tarn_train_export_timestamp_seconds"}) {
    // Printed with 6 decimals: within a microsecond of the clock's readings around it.
    EXPECT_GE(value(t), before - 1e-6) << t;
    EXPECT_LE(value(t), after + 1e-6) << t;
  }
}

TEST(ProgressTest, AJsonLineEveryIntervalWithLossAndStaleness) {
  std::vector<std::string> lines;
  Progress progress;
  StepReporter reporter(&progress, "worker 1", 0.0,
                        [&](const std::string& l) { lines.push_back(l); });
  reporter.Step(5, 64, 1.0, 2);
  reporter.Step(6, 64, 0.5, 0);
  ASSERT_EQ(lines.size(), 2u);
  const auto j = nlohmann::json::parse(lines.back());
  EXPECT_EQ(j["task"], "worker 1");
  EXPECT_EQ(j["step"], 6);
  EXPECT_EQ(j["own_steps"], 2);
  EXPECT_DOUBLE_EQ(j["loss"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["staleness"].get<double>(), 1.0);
  EXPECT_FALSE(j.contains("accuracy"));
  EXPECT_EQ(progress.samples, 128);
}

}  // namespace
}  // namespace tarn::train
