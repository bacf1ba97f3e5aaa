#include "metrics/collector.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "http/server.h"

namespace tarn::metrics {
namespace {

using namespace std::chrono_literals;

TEST(MetricsPortTest, MetricsElseHttpElseNone) {
  EXPECT_EQ(MetricsPort({{"grpc", 2222}, {"metrics", 9090}, {"http", 8501}}), 9090);
  EXPECT_EQ(MetricsPort({{"grpc", 2222}, {"http", 8501}}), 8501);
  EXPECT_EQ(MetricsPort({{"grpc", 2222}}), 0);
}

// A real HTTP server answering GET /metrics with what the test sets.
class CollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    http::Server::Options o;
    o.listen.host = "127.0.0.1";
    auto s = http::Server::Create(o, [this](http::Request req, http::Responder respond) {
      ++requests_;
      std::lock_guard<std::mutex> lock(mu_);
      if (req.target != "/metrics") return respond({404, "text/plain", "no\n"});
      respond({200, "text/plain; version=0.0.4", text_});
    });
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    server_->Start();
  }
  void Serve(std::string text) {
    std::lock_guard<std::mutex> lock(mu_);
    text_ = std::move(text);
  }
  Collector::Options Options() {
    Collector::Options o;
    o.clock = &clock_;
    o.interval = 0ms;
    o.timeout = 300ms;
    o.targets = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return targets_;
    };
    return o;
  }
  void SetTargets(std::vector<Target> t) {
    std::lock_guard<std::mutex> lock(mu_);
    targets_ = std::move(t);
  }

  FakeClock clock_;
  std::unique_ptr<http::Server> server_;
  std::mutex mu_;
  std::string text_;
  std::vector<Target> targets_;
  std::atomic<int> requests_{0};
};

TEST_F(CollectorTest, ScrapesEachInstanceAndKeepsItsSeriesUntilItLeaves) {
  Collector c(Options());
  SetTargets({{"alice/fm/worker-0", "127.0.0.1", server_->port()},
              {"alice/fm/worker-1", "", 0}});  // known, nothing to scrape now
  Serve("# TYPE tarn_train_loss gauge\ntarn_train_loss 2.3\n");
  c.RunOnce();
  clock_.Advance(5s);
  Serve("# TYPE tarn_train_loss gauge\ntarn_train_loss 0.7\n");
  c.RunOnce();
  auto q = c.store().Query("alice/fm/worker-0", {"tarn_train_loss"}, 0, 100);
  ASSERT_EQ(q.series.size(), 1u);
  ASSERT_EQ(q.series[0].points.size(), 2u);
  EXPECT_EQ(q.series[0].points[0].v, 2.3);
  EXPECT_EQ(q.series[0].points[1].v, 0.7);
  EXPECT_EQ(q.series[0].points[1].t_ms - q.series[0].points[0].t_ms, 5000);
  auto st = c.State("alice/fm/worker-0");
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->error, "");
  EXPECT_EQ(st->endpoint, "http://127.0.0.1:" + std::to_string(server_->port()) + "/metrics");
  EXPECT_FALSE(c.State("alice/fm/worker-1").has_value()) << "never scraped";
  EXPECT_EQ(requests_.load(), 2);

  // The run ended (no address now): the series stay. The instance left: they go.
  SetTargets({{"alice/fm/worker-0", "", 0}});
  c.RunOnce();
  EXPECT_TRUE(c.store().Query("alice/fm/worker-0", {}, 0, 100).known);
  SetTargets({});
  c.RunOnce();
  EXPECT_FALSE(c.store().Query("alice/fm/worker-0", {}, 0, 100).known);
  EXPECT_FALSE(c.State("alice/fm/worker-0").has_value());
}

TEST_F(CollectorTest, AFailedScrapeSaysWhyAndCostsOnlyItsTimeout) {
  // Accepts connections (the kernel does) but never answers.
  const int silent = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(silent, 8), 0);
  socklen_t len = sizeof a;
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&a), &len);
  const int silent_port = ntohs(a.sin_port);
  // Nothing listens here (bound, never listening).
  const int closed = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in b{};
  b.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &b.sin_addr);
  ASSERT_EQ(::bind(closed, reinterpret_cast<sockaddr*>(&b), sizeof b), 0);
  len = sizeof b;
  ::getsockname(closed, reinterpret_cast<sockaddr*>(&b), &len);

  Collector::Options o = Options();
  o.max_body_bytes = 64;
  Collector c(o);
  SetTargets({{"a/x/silent", "127.0.0.1", silent_port},
              {"a/x/closed", "127.0.0.1", ntohs(b.sin_port)},
              {"a/x/big", "127.0.0.1", server_->port()}});
  Serve("g 1\n" + std::string(100, '#') + "\n");
  const auto start = std::chrono::steady_clock::now();
  c.RunOnce();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(c.State("a/x/silent")->error.find("no whole answer within 300 ms"), std::string::npos)
      << c.State("a/x/silent")->error;
  EXPECT_NE(c.State("a/x/closed")->error.find("Connection refused"), std::string::npos)
      << c.State("a/x/closed")->error;
  EXPECT_NE(c.State("a/x/big")->error.find("the answer is over 64 bytes"), std::string::npos)
      << c.State("a/x/big")->error << " " << c.store().Query("a/x/big", {}, 0, 10).series.size()
      << c.State("a/x/big")->error;
  EXPECT_EQ(c.failures(), 3u);

  // Not the format: named, with its line; nothing recorded.
  Collector c2(Options());
  SetTargets({{"a/x/bad", "127.0.0.1", server_->port()}});
  Serve("g 1\nthis is not it\n");
  c2.RunOnce();
  EXPECT_NE(c2.State("a/x/bad")->error.find("not the Prometheus text format: line 2"),
            std::string::npos)
      << c2.State("a/x/bad")->error;
  EXPECT_FALSE(c2.store().Query("a/x/bad", {}, 0, 10).known);
  ::close(silent);
  ::close(closed);
}

TEST_F(CollectorTest, StartRunsRoundsUntilStopped) {
  Collector::Options o = Options();
  o.interval = 20ms;
  SetTargets({{"a/x/w-0", "127.0.0.1", server_->port()}});
  Serve("g 1\n");
  Collector c(o);
  c.Start();
  for (int i = 0; i < 500 && requests_.load() < 3; ++i) std::this_thread::sleep_for(10ms);
  c.Stop();
  EXPECT_GE(requests_.load(), 3);
  const int after = requests_.load();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(requests_.load(), after) << "no round after Stop";
}

}  // namespace
}  // namespace tarn::metrics
