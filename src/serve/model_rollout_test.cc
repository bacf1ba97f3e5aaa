// The canary rollout of ModelRepository (model_rollout.cc, canary.h) with fake models: the
// split's exact share, labels that follow it, a failing canary rolled back with its reason,
// a less accurate version never loaded, a good one promoted, and replicas and restarts that
// follow the decisions written beside the versions.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>

#include "common/temp_dir.h"
#include "serve/canary.h"
#include "serve/model_repository.h"

namespace tarn::serve {
namespace {

namespace fs = std::filesystem;

// Answers with its factor (model.pt's number); a model.pt holding "broken" loads (its
// warm-up passes) and fails every request after.
class FactorServable : public Servable {
 public:
  explicit FactorServable(float factor) : factor_(factor) {}
  StatusOr<Tensor> Run(const Tensor& input) override {
    if (factor_ < 0) return InvalidArgumentError("the model failed on input: broken");
    Tensor out = input;
    for (float& v : out.data) v = factor_;
    return out;
  }

 private:
  float factor_;
};

class RolloutTest : public ::testing::Test {
 protected:
  // Version `v` with `content` ("<factor>" or "broken") exported at `accuracy`.
  void Export(int64_t v, const std::string& content, double accuracy) {
    const std::string tmp = dir_.path() + "/.tmp-" + std::to_string(v);
    fs::create_directories(tmp);
    std::ofstream(tmp + "/model.pt") << content;
    std::ofstream(tmp + "/meta.json") << R"({"input_shape": [2], "accuracy": )" << accuracy << "}";
    fs::rename(tmp, dir_.path() + "/" + std::to_string(v));
  }

  std::unique_ptr<ModelRepository> Make(CanaryPolicy policy) {
    ModelRepository::Options o;
    ModelConfig m;
    m.name = "m";
    m.base_path = dir_.path();
    m.canary = policy;
    o.models.push_back(m);
    o.loader = [this](const std::string& dir,
                      const ModelMeta&) -> StatusOr<std::unique_ptr<Servable>> {
      std::ifstream in(dir + "/model.pt");
      std::string content;
      in >> content;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++loads_[fs::path(dir).filename().string()];
      }
      return std::unique_ptr<Servable>(
          new FactorServable(content == "broken" ? -1 : std::stof(content)));
    };
    o.poll_interval = std::chrono::milliseconds(0);
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      log_ += line + "\n";
    };
    auto r = ModelRepository::Create(std::move(o));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return std::move(*r);
  }

  // An unlabelled predict, as the REST API makes it: the factor that answered, or -1 for a
  // failure (recorded against the version, as the API records it).
  float Ask(ModelRepository& r, const std::string& label = "") {
    auto v = r.Route("m", std::nullopt, label);
    if (!v.ok()) return -2;
    std::promise<float> answer;
    Tensor in;
    in.shape = {1, 2};
    in.data = {1, 1};
    (*v)->Predict(in, [&](StatusOr<Tensor> out, auto) {
      r.Record(**v, !out.ok());
      answer.set_value(out.ok() ? out->data[0] : -1);
    });
    return answer.get_future().get();
  }

  VersionStatus StatusOf(ModelRepository& r, int64_t v) {
    auto s = r.Status("m", v, "");
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? s->front() : VersionStatus{};
  }

  int Loads(int64_t v) {
    std::lock_guard<std::mutex> lock(mu_);
    return loads_[std::to_string(v)];
  }

  TempDir dir_{"rollout-test"};
  std::mutex mu_;
  std::map<std::string, int> loads_;
  std::string log_;
};

TEST(CanaryTest, TheSplitIsExactOverAnyNumberOfRequests) {
  for (int64_t percent : {1, 7, 20, 50, 99}) {
    CanaryPolicy p;
    p.traffic_percent = percent;
    Canary c(p, 2, std::chrono::steady_clock::now());
    int64_t to_canary = 0;
    for (int64_t n = 1; n <= 1000; ++n) {
      to_canary += c.TakeNext();
      // floor(n * p / 100) exactly: within one request of the share at every point.
      ASSERT_EQ(to_canary, n * percent / 100) << percent << "% after " << n;
    }
  }
}

TEST(CanaryTest, TheVerdictComparesErrorRatesOnceEnoughHaveBeenAnswered) {
  CanaryPolicy p;
  p.promote_after_requests = 4;
  const auto t0 = std::chrono::steady_clock::now();
  Canary c(p, 2, t0);
  for (int i = 0; i < 3; ++i) c.Record(true, false);
  EXPECT_EQ(c.Decide(t0), Canary::Verdict::kWait);
  c.Record(true, true);                                // 1 of 4 failed: 25%
  for (int i = 0; i < 8; ++i) c.Record(false, i < 2);  // 2 of 8: 25%, no better
  EXPECT_EQ(c.Decide(t0), Canary::Verdict::kPromote) << c.Describe();
  c.Record(false, false);  // stable 2 of 9 now: the canary is worse
  EXPECT_EQ(c.Decide(t0), Canary::Verdict::kRollBack) << c.Describe();
  EXPECT_EQ(c.Describe(),
            "canary version 2 at 10%: 1 of 4 failed (25.00%); stable: 2 of 9 failed (22.22%)");

  // By time: only once it has answered something.
  p.promote_after_requests = 1000;
  p.promote_after_seconds = 60;
  Canary timed(p, 3, t0);
  EXPECT_EQ(timed.Decide(t0 + std::chrono::seconds(61)), Canary::Verdict::kWait);
  timed.Record(true, false);
  EXPECT_EQ(timed.Decide(t0 + std::chrono::seconds(59)), Canary::Verdict::kWait);
  EXPECT_EQ(timed.Decide(t0 + std::chrono::seconds(60)), Canary::Verdict::kPromote);
}

TEST(CanaryTest, TheAccuracyGateAllowsTheMarginAndNothingMore) {
  CanaryPolicy p;
  p.max_accuracy_drop = 0.01;
  ModelMeta stable, candidate;
  stable.accuracy = 0.85;
  candidate.accuracy = 0.84;  // exactly the margin, though 0.85 - 0.01 is not 0.84 in binary
  EXPECT_FALSE(AccuracyRefusal(p, 2, candidate, 1, stable));
  candidate.accuracy = 0.8399;
  auto refusal = AccuracyRefusal(p, 2, candidate, 1, stable);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(*refusal,
            "refused: its accuracy 0.8399 is below stable version 1's 0.8500 by more than "
            "max_accuracy_drop 0.0100 (version 2 never served)");
  candidate.accuracy.reset();  // nothing to compare: the traffic decides
  EXPECT_FALSE(AccuracyRefusal(p, 2, candidate, 1, stable));
}

TEST_F(RolloutTest, ACanaryGetsItsShareExactlyAndTheLabelsFollowTheRollout) {
  Export(1, "1", 0.85);
  CanaryPolicy p;
  p.traffic_percent = 20;
  p.promote_after_requests = 100000;
  auto r = Make(p);
  EXPECT_EQ(Ask(*r), 1) << log_;
  EXPECT_EQ(Ask(*r, "stable"), 1);
  EXPECT_EQ(Ask(*r, "canary"), -2) << "no canary yet";
  Export(2, "2", 0.86);
  r->PollOnce();
  std::map<float, int> answered;
  for (int i = 0; i < 1000; ++i) ++answered[Ask(*r)];
  EXPECT_EQ(answered[2], 200) << log_;
  EXPECT_EQ(answered[1], 800);
  EXPECT_EQ(Ask(*r, "canary"), 2);
  EXPECT_EQ(Ask(*r, "stable"), 1);
  auto found = r->Find("m", std::nullopt, "");  // metadata and health: stable
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->version(), 1);
  auto rollout = r->RolloutOf("m");
  ASSERT_TRUE(rollout);
  EXPECT_EQ(rollout->stable, 1);
  EXPECT_EQ(rollout->canary, 2);
  EXPECT_EQ(rollout->canary_requests, 201);  // and the labelled one
  EXPECT_EQ(rollout->stable_requests, 801);
  EXPECT_NE(log_.find("version 2: canary for 20% of unlabelled requests, against stable 1"),
            std::string::npos)
      << log_;
}

TEST_F(RolloutTest, ACanaryThatFailsIsRolledBackWithItsReasonAndNeverServedAgain) {
  Export(1, "1", 0.85);
  CanaryPolicy p;
  p.traffic_percent = 20;
  p.promote_after_requests = 20;
  auto r = Make(p);
  Export(2, "broken", 0.90);  // its accuracy passes the gate; its requests fail
  r->PollOnce();
  int failed = 0;
  for (int i = 0; i < 100; ++i) failed += Ask(*r) == -1;
  EXPECT_EQ(failed, 20);
  r->PollOnce();
  const VersionStatus s = StatusOf(*r, 2);
  EXPECT_EQ(s.state, VersionState::kEnd);
  EXPECT_EQ(s.status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.status.message(),
            "rolled back: canary version 2 at 20%: 20 of 20 failed (100.00%); stable: 0 of 80 "
            "failed (0.00%) (worse than stable)");
  for (int i = 0; i < 50; ++i) ASSERT_EQ(Ask(*r), 1);
  auto rollout = r->RolloutOf("m");
  ASSERT_TRUE(rollout);
  EXPECT_EQ(rollout->rolled_back, 1);
  EXPECT_EQ(rollout->canary, 0);
  EXPECT_NE(rollout->last_decision.find("version 2 rolled back"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_.path() + "/2/tarn-rejected"));
  r->PollOnce();
  EXPECT_EQ(Loads(2), 1) << "never loaded again";

  // A replica that starts later (or this one restarted) follows the decision.
  r.reset();
  auto again = Make(p);
  EXPECT_EQ(Ask(*again), 1);
  EXPECT_EQ(Loads(2), 1);
  EXPECT_EQ(StatusOf(*again, 1).state, VersionState::kAvailable);
}

TEST_F(RolloutTest, AVersionLessAccurateThanStableIsNeverLoaded) {
  Export(1, "1", 0.85);
  CanaryPolicy p;
  p.traffic_percent = 50;
  p.max_accuracy_drop = 0.01;
  auto r = Make(p);
  Export(2, "2", 0.80);
  r->PollOnce();
  EXPECT_EQ(Loads(2), 0);
  const VersionStatus s = StatusOf(*r, 2);
  EXPECT_EQ(s.state, VersionState::kEnd);
  EXPECT_NE(s.status.message().find("refused: its accuracy 0.8000 is below stable version 1's "
                                    "0.8500 by more than max_accuracy_drop 0.0100"),
            std::string::npos)
      << s.status.message();
  for (int i = 0; i < 20; ++i) ASSERT_EQ(Ask(*r), 1);
  EXPECT_EQ(r->RolloutOf("m")->refused, 1);
  // A better one after it is the next canary.
  Export(3, "3", 0.845);
  r->PollOnce();
  EXPECT_EQ(Loads(2), 0);
  EXPECT_EQ(Ask(*r, "canary"), 3);
}

TEST_F(RolloutTest, AGoodCanaryIsPromotedAndTheOldStableUnloaded) {
  Export(1, "1", 0.85);
  CanaryPolicy p;
  p.traffic_percent = 20;
  p.promote_after_requests = 10;
  auto r = Make(p);
  Export(2, "2", 0.86);
  r->PollOnce();
  for (int i = 0; i < 49; ++i) Ask(*r);
  r->PollOnce();
  EXPECT_EQ(r->RolloutOf("m")->canary, 2) << "9 canary requests: not yet";
  Ask(*r);
  r->PollOnce();
  auto rollout = r->RolloutOf("m");
  EXPECT_EQ(rollout->stable, 2);
  EXPECT_EQ(rollout->canary, 0);
  EXPECT_EQ(rollout->promoted, 1);
  EXPECT_EQ(rollout->last_decision,
            "version 2 promoted: canary version 2 at 20%: 0 of 10 failed (0.00%); stable: 0 of "
            "40 failed (0.00%)");
  EXPECT_EQ(StatusOf(*r, 1).state, VersionState::kEnd);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(Ask(*r), 2);
  EXPECT_TRUE(fs::exists(dir_.path() + "/2/tarn-promoted"));

  // A restart starts from the newest promoted version, and takes a newer one as canary,
  // never as stable.
  r.reset();
  Export(3, "3", 0.87);
  auto again = Make(p);
  EXPECT_EQ(again->RolloutOf("m")->stable, 2);
  EXPECT_EQ(again->RolloutOf("m")->canary, 3);
  EXPECT_EQ(Loads(1), 1);
}

}  // namespace
}  // namespace tarn::serve
