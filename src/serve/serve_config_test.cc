#include "serve/serve_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"

namespace tarn::serve {
namespace {

TEST(ModelConfigTest, ReadsTfServingFieldNamesAndTheirJsonForms) {
  auto models = ParseModelConfigList(R"({"model_config_list": {"config": [
      {"name": "fmnist", "base_path": "/m/fmnist", "model_platform": "pytorch",
       "model_version_policy": {"latest": {"num_versions": 2}},
       "version_labels": {"stable": 3, "canary": "4"}},
      {"name": "b", "basePath": "/m/b", "modelVersionPolicy": {"specific": {"versions": ["7", 5, 7]}}},
      {"name": "c", "base_path": "/m/c", "model_version_policy": {"all": {}}}]}})",
                                     "models.json");
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ASSERT_EQ(models->size(), 3u);
  const ModelConfig& a = (*models)[0];
  EXPECT_EQ(a.name, "fmnist");
  EXPECT_EQ(a.base_path, "/m/fmnist");
  EXPECT_EQ(a.policy.kind, VersionPolicy::Kind::kLatest);
  EXPECT_EQ(a.policy.num_versions, 2);
  EXPECT_EQ(a.labels.at("stable"), 3);
  EXPECT_EQ(a.labels.at("canary"), 4);
  EXPECT_EQ((*models)[1].base_path, "/m/b");
  EXPECT_EQ((*models)[1].policy.kind, VersionPolicy::Kind::kSpecific);
  EXPECT_EQ((*models)[1].policy.versions, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ((*models)[2].policy.kind, VersionPolicy::Kind::kAll);
}

TEST(ModelConfigTest, ErrorsNameTheFileAndTheField) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"{", "models.json: not valid JSON"},
      {R"({"model_config_list": {"config": []}})", "config: must be a non-empty list"},
      {R"({"model_config_list": {"config": [{"base_path": "/x"}]}})", "config[0].name: missing"},
      {R"({"model_config_list": {"config": [{"name": "a/b", "base_path": "/x"}]}})",
       "config[0].name: \"a/b\" is not a name"},
      {R"({"model_config_list": {"config": [{"name": "a"}]}})", "config[0].base_path: missing"},
      {R"({"model_config_list": {"config": [{"name": "a", "base_path": "/x", "bse": 1}]}})",
       "config[0]: unknown field \"bse\""},
      {R"({"model_config_list": {"config": [{"name": "a", "base_path": "/x",
          "model_version_policy": {"newest": {}}}]}})",
       "unknown policy \"newest\""},
      {R"({"model_config_list": {"config": [{"name": "a", "base_path": "/x",
          "model_version_policy": {"latest": {"num_versions": 0}}}]}})",
       "latest.num_versions: 0 is not in [1, 1000]"},
      {R"({"model_config_list": {"config": [{"name": "a", "base_path": "/x",
          "model_platform": "tensorflow"}]}})",
       "model_platform: \"tensorflow\" is not served here"},
      {R"({"model_config_list": {"config": [{"name": "a", "base_path": "/x"},
          {"name": "a", "base_path": "/y"}]}})",
       "config[1].name: \"a\" is configured twice"},
      {R"({"model_config_list": {"config": [{"name": "a", "base_path": "/x",
          "canary": {"traffic_percent": 100}}]}})",
       "config[0].canary.traffic_percent: 100 is not in [1, 99]"},
      {R"({"model_config_list": {"config": [{"name": "a", "base_path": "/x",
          "canary": {"traffic": 10}}]}})",
       "config[0].canary: unknown field \"traffic\""},
      {R"({"model_config_list": {"config": [{"name": "a", "base_path": "/x",
          "canary": {"max_accuracy_drop": "0.01"}}]}})",
       "canary.max_accuracy_drop: \"0.01\" is not an accuracy difference in [0, 1]"},
      {R"({"model_config_list": {"config": [{"name": "a", "base_path": "/x",
          "model_version_policy": {"all": {}}, "canary": {}}]}})",
       "config[0].canary: the rollout chooses the versions"},
      {R"({"model_config_list": {"config": [{"name": "a", "base_path": "/x",
          "version_labels": {"stable": 1}, "canary": {}}]}})",
       "version_labels.stable: set by the canary rollout, not by hand"},
  };
  for (const Case& c : cases) {
    auto r = ParseModelConfigList(c.text, "models.json");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << r.status().message() << " lacks " << c.message;
  }
}

TEST(ModelConfigTest, ReadsACanaryPolicy) {
  auto models = ParseModelConfigList(R"({"model_config_list": {"config": [
      {"name": "a", "base_path": "/x", "canary": {"traffic_percent": 20, "max_accuracy_drop": 0.01,
       "promoteAfterRequests": "500", "promote_after_seconds": {"value": 600}}},
      {"name": "b", "base_path": "/y"}]}})",
                                     "models.json");
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ASSERT_TRUE((*models)[0].canary);
  EXPECT_EQ((*models)[0].canary->traffic_percent, 20);
  EXPECT_DOUBLE_EQ((*models)[0].canary->max_accuracy_drop, 0.01);
  EXPECT_EQ((*models)[0].canary->promote_after_requests, 500);
  EXPECT_EQ((*models)[0].canary->promote_after_seconds, 600);
  EXPECT_FALSE((*models)[1].canary);
}

TEST(BatchingParametersTest, ReadsPlainAndWrappedNumbersAndChecksRanges) {
  auto b = ParseBatchingParameters(R"({"max_batch_size": {"value": 64},
      "batch_timeout_micros": 500, "num_batch_threads": "2", "max_enqueued_batches": 10,
      "pad_variable_length_inputs": true, "allowed_batch_sizes": [8, 64]})",
                                   "batching.json");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->max_batch_size, 64);
  EXPECT_EQ(b->batch_timeout_micros, 500);
  EXPECT_EQ(b->num_batch_threads, 2);
  EXPECT_EQ(b->max_enqueued_batches, 10);
  auto bad = ParseBatchingParameters(R"({"max_batch_size": 0})", "batching.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "batching.json: max_batch_size: 0 is not in [1, 4096]");
  auto typo = ParseBatchingParameters(R"({"max_batch": 8})", "batching.json");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("unknown field \"max_batch\""), std::string::npos);
}

TEST(VersionPolicyTest, ChoosesAsTfServing) {
  const std::vector<int64_t> on_disk = {3, 1, 7, 5};
  VersionPolicy latest;
  EXPECT_EQ(VersionsToServe(latest, on_disk), (std::vector<int64_t>{7}));
  latest.num_versions = 2;
  EXPECT_EQ(VersionsToServe(latest, on_disk), (std::vector<int64_t>{5, 7}));
  latest.num_versions = 10;
  EXPECT_EQ(VersionsToServe(latest, on_disk), (std::vector<int64_t>{1, 3, 5, 7}));
  VersionPolicy all{VersionPolicy::Kind::kAll, 1, {}};
  EXPECT_EQ(VersionsToServe(all, on_disk), (std::vector<int64_t>{1, 3, 5, 7}));
  VersionPolicy specific{VersionPolicy::Kind::kSpecific, 1, {3, 4}};
  EXPECT_EQ(VersionsToServe(specific, on_disk), (std::vector<int64_t>{3}));
  EXPECT_TRUE(VersionsToServe(latest, {}).empty());
}

TEST(ListVersionsTest, ListsNumberedDirectoriesWithAModelOnly) {
  TempDir dir("serve-config-test");
  namespace fs = std::filesystem;
  for (const char* v : {"1", "12", "3", ".4.tmp", "abc", "5"}) {
    fs::create_directories(dir.path() + "/" + v);
    if (std::string(v) != "5") std::ofstream(dir.path() + "/" + v + "/model.pt") << "x";
  }
  auto versions = ListVersions(dir.path());
  ASSERT_TRUE(versions.ok());
  EXPECT_EQ(*versions, (std::vector<int64_t>{1, 3, 12}));
  auto missing = ListVersions(dir.path() + "/nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tarn::serve
