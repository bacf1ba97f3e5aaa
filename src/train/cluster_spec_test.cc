#include "train/cluster_spec.h"

#include <gtest/gtest.h>

namespace tarn::train {
namespace {

TEST(ClusterSpecTest, ReadsTfConfigAsTensorFlowWritesIt) {
  auto c = ParseTfConfig(R"({"cluster": {"ps": ["ps-0.f.a.tarn:2222", "ps-1.f.a.tarn:2222"],
      "worker": ["worker-0.f.a.tarn:2222", "worker-1.f.a.tarn:2222"]},
      "task": {"type": "worker", "index": 1}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Job("ps").size(), 2u);
  EXPECT_EQ(c->TrainerCount(), 2);
  EXPECT_EQ(c->TrainerRank(), 1);
  EXPECT_FALSE(c->IsChief());
  EXPECT_EQ(c->Address(), "worker-1.f.a.tarn:2222");
  c = ParseTfConfig(R"({"cluster": {"ps": ["p:1"], "chief": ["c:1"], "worker": ["w:1"]},
      "task": {"type": "worker", "index": 0}})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->TrainerRank(), 1);
  EXPECT_FALSE(c->IsChief()) << "with a chief job, worker 0 is not the chief";
  EXPECT_TRUE(ParseTfConfig("")->jobs.empty());
  EXPECT_TRUE(ParseTfConfig("{}")->jobs.empty());
}

TEST(ClusterSpecTest, FlagsWorkLikeTf1) {
  auto c = ClusterFromFlags("worker", 0, "a:1,b:2", "c:3");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->IsChief());
  EXPECT_EQ(c->Job("ps"), (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_TRUE(ClusterFromFlags("", 0, "", "")->jobs.empty());
}

TEST(ClusterSpecTest, BadClustersNameWhatIsWrong) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (
      const Case& k : {
          Case{"[1]", "TF_CONFIG: not a JSON object"},
          Case{R"({"cluster": {"ps": "a:1"}})", "TF_CONFIG: cluster.ps is not a list"},
          Case{R"({"cluster": {"ps": ["a:1"], "worker": ["b:1"]}})",
               "TF_CONFIG: task needs a string type and an integer index"},
          Case{R"({"cluster": {"worker": ["b:1"]}, "task": {"type": "worker", "index": 0}})",
               "TF_CONFIG: the cluster has no ps: tarn-train trains with parameter servers, not "
               "by collective all-reduce (TensorFlow's reading of a cluster without ps); name "
               "the ps job, or give no TF_CONFIG to train alone"},
          Case{
              R"({"cluster": {"ps": [], "chief": ["c:1"]}, "task": {"type": "chief", "index": 0}})",
              "TF_CONFIG: the cluster has no ps: tarn-train trains with parameter servers, not "
              "by collective all-reduce (TensorFlow's reading of a cluster without ps); name "
              "the ps job, or give no TF_CONFIG to train alone"},
          Case{R"({"cluster": {"ps": ["a:1"], "worker": ["b:1"]},
                "task": {"type": "worker", "index": 1}})",
               "TF_CONFIG: task index 1 is outside worker's 1 tasks"},
          Case{R"({"cluster": {"ps": ["a"], "worker": ["b:1"]},
                "task": {"type": "ps", "index": 0}})",
               "TF_CONFIG: ps address \"a\" is not HOST:PORT"},
          Case{R"({"cluster": {"ps": ["a:1"], "worker": ["b:1"]},
                "task": {"type": "evaluator", "index": 0}})",
               "TF_CONFIG: task type \"evaluator\" is not a job of the cluster"},
      }) {
    auto c = ParseTfConfig(k.text);
    ASSERT_FALSE(c.ok()) << k.text;
    EXPECT_EQ(c.status().message(), k.error);
  }
}

}  // namespace
}  // namespace tarn::train
