#include "serve/model_repository.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "common/temp_dir.h"

namespace tarn::serve {
namespace {

namespace fs = std::filesystem;

// Multiplies the input by its version, read from model.pt; a model.pt holding "corrupt"
// fails to load.
class FakeServable : public Servable {
 public:
  explicit FakeServable(float factor) : factor_(factor) {}
  StatusOr<Tensor> Run(const Tensor& input) override {
    Tensor out = input;
    for (float& v : out.data) v *= factor_;
    return out;
  }

 private:
  float factor_;
};

StatusOr<std::unique_ptr<Servable>> FakeLoader(const std::string& dir, const ModelMeta&) {
  std::ifstream in(dir + "/model.pt");
  std::string content;
  in >> content;
  if (content == "corrupt") return InvalidArgumentError(dir + "/model.pt: not a model");
  return std::unique_ptr<Servable>(new FakeServable(std::stof(content)));
}

class ModelRepositoryTest : public ::testing::Test {
 protected:
  void Export(int64_t version, const std::string& content) {
    // As the exporter does: written aside, renamed into place.
    const std::string tmp = dir_.path() + "/.tmp-" + std::to_string(version);
    fs::create_directories(tmp);
    std::ofstream(tmp + "/model.pt") << content;
    std::ofstream(tmp + "/meta.json") << R"({"input_shape": [2], "labels": ["a", "b"]})";
    fs::rename(tmp, dir_.path() + "/" + std::to_string(version));
  }

  std::unique_ptr<ModelRepository> Make(VersionPolicy policy = {},
                                        std::map<std::string, int64_t> labels = {},
                                        std::chrono::milliseconds poll_interval = {},
                                        bool watch = true) {
    ModelRepository::Options o;
    o.models.push_back(ModelConfig{"m", dir_.path(), policy, labels, std::nullopt});
    o.loader = FakeLoader;
    o.poll_interval = poll_interval;
    o.watch_base_paths = watch;
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back(line);
    };
    auto r = ModelRepository::Create(std::move(o));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return std::move(*r);
  }

  // The version's answer to [1, 1]: its factor.
  float Ask(ModelRepository& r, std::optional<int64_t> version = std::nullopt,
            const std::string& label = "") {
    auto v = r.Find("m", version, label);
    if (!v.ok()) return -1;
    std::promise<float> answer;
    Tensor in;
    in.shape = {1, 2};
    in.data = {1, 1};
    (*v)->Predict(in, [&](StatusOr<Tensor> out, auto) {
      answer.set_value(out.ok() ? out->data[0] : -2);
    });
    return answer.get_future().get();
  }

  size_t LogIndex(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < log_.size(); ++i) {
      if (log_[i] == line) return i;
    }
    return SIZE_MAX;
  }

  TempDir dir_{"model-repository-test"};
  std::mutex mu_;
  std::vector<std::string> log_;
};

// With an hour's poll interval, a version renamed into place is served at once (inotify),
// and one removed is unloaded; without the watch only the poll would find either.
TEST_F(ModelRepositoryTest, AVersionRenamedIntoPlaceIsServedWithoutWaitingForThePoll) {
  using namespace std::chrono_literals;
  Export(1, "1");
  auto r = Make({}, {}, std::chrono::hours(1));
  EXPECT_EQ(Ask(*r), 1);
  Export(2, "2");
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (Ask(*r) != 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(Ask(*r), 2) << "version 2 was not loaded within 30 s of its rename";
  // A deletion wakes the poll too: version 1 is gone, 2 stays.
  Export(3, "3");
  while (Ask(*r) != 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  fs::remove_all(dir_.path() + "/3");
  while (Ask(*r) != 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(Ask(*r), 2) << "version 3's removal was not seen within 30 s";
}

TEST_F(ModelRepositoryTest, WithoutTheWatchOnlyThePollFindsANewVersion) {
  using namespace std::chrono_literals;
  Export(1, "1");
  auto r = Make({}, {}, std::chrono::hours(1), /*watch=*/false);
  Export(2, "2");
  std::this_thread::sleep_for(300ms);  // were it watched, it would be served by now
  EXPECT_EQ(Ask(*r), 1);
  r->PollOnce();
  EXPECT_EQ(Ask(*r), 2);
}

TEST_F(ModelRepositoryTest, ANewerVersionIsAvailableBeforeTheOldOneUnloads) {
  Export(1, "1");
  auto r = Make();
  EXPECT_TRUE(r->Ready());
  EXPECT_EQ(Ask(*r), 1);
  Export(2, "2");
  r->PollOnce();
  EXPECT_EQ(Ask(*r), 2);
  const size_t available = LogIndex("model m version 2: AVAILABLE");
  const size_t unloading = LogIndex("model m version 1: UNLOADING");
  ASSERT_NE(available, SIZE_MAX);
  ASSERT_NE(unloading, SIZE_MAX);
  EXPECT_LT(available, unloading);
  auto status = r->Status("m", std::nullopt, "");
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->size(), 2u);
  EXPECT_EQ((*status)[0].version, 2);
  EXPECT_EQ((*status)[0].state, VersionState::kAvailable);
  EXPECT_EQ((*status)[1].state, VersionState::kEnd);
  EXPECT_TRUE((*status)[1].status.ok());
  EXPECT_EQ(r->Find("m", 1, "").status().code(), StatusCode::kNotFound);
}

TEST_F(ModelRepositoryTest, ACorruptVersionIsReportedAndTheOldOneKeepsServing) {
  Export(1, "1");
  auto r = Make();
  Export(2, "corrupt");
  r->PollOnce();
  EXPECT_EQ(Ask(*r), 1);
  auto status = r->Status("m", 2, "");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((*status)[0].state, VersionState::kEnd);
  EXPECT_EQ((*status)[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE((*status)[0].status.message().find("not a model"), std::string::npos);
  // Not retried while unchanged; loaded once it is fixed.
  log_.clear();
  r->PollOnce();
  EXPECT_EQ(LogIndex("model m version 2: LOADING"), SIZE_MAX);
  fs::remove_all(dir_.path() + "/2");
  Export(2, "2");
  r->PollOnce();
  EXPECT_EQ(Ask(*r), 2);
}

TEST_F(ModelRepositoryTest, PoliciesAndLabelsChooseVersions) {
  Export(1, "1");
  Export(2, "2");
  Export(3, "3");
  auto r = Make(VersionPolicy{VersionPolicy::Kind::kSpecific, 1, {1, 3}}, {{"stable", 1}});
  EXPECT_EQ(Ask(*r, 1), 1);
  EXPECT_EQ(Ask(*r, 3), 3);
  EXPECT_EQ(Ask(*r, 2), -1);
  EXPECT_EQ(Ask(*r), 3);
  EXPECT_EQ(Ask(*r, std::nullopt, "stable"), 1);
  auto none = r->Find("m", std::nullopt, "canary");
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("no label \"canary\""), std::string::npos);
  EXPECT_EQ(r->Find("other", std::nullopt, "").status().code(), StatusCode::kNotFound);
}

TEST_F(ModelRepositoryTest, AModelWithoutVersionsIsNotReadyUntilOneAppears) {
  auto r = Make();
  EXPECT_FALSE(r->Ready());
  auto missing = r->Find("m", std::nullopt, "");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no version of \"m\" is available yet"),
            std::string::npos);
  Export(4, "4");
  r->PollOnce();
  EXPECT_TRUE(r->Ready());
  EXPECT_EQ(Ask(*r), 4);
}

TEST_F(ModelRepositoryTest, UnloadingWaitsForRequestsThatHoldTheVersion) {
  Export(1, "1");
  auto r = Make();
  auto held = r->Find("m", std::nullopt, "");
  ASSERT_TRUE(held.ok());
  Export(2, "2");
  auto poll = std::async(std::launch::async, [&] { r->PollOnce(); });
  // Version 2 serves while 1 waits for its holder.
  while (Ask(*r) != 2) std::this_thread::yield();
  EXPECT_EQ(poll.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  auto status = r->Status("m", 1, "");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((*status)[0].state, VersionState::kUnloading);
  held->reset();
  poll.get();
  EXPECT_EQ(r->Status("m", 1, "")->at(0).state, VersionState::kEnd);
}

}  // namespace
}  // namespace tarn::serve
