// The zoo's batch-norm model (cnn_bn): its modes, and its running statistics through
// training, checkpoints (single-process and a cluster's chief), resumption and export.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "common/test_process.h"
#include "common/workload_process.h"
#include "train/checkpoint.h"
#include "train/idx.h"
#include "train/image_batches.h"
#include "train/local_trainer.h"
#include "train/model_zoo.h"
#include "train/train_test_util.h"

namespace tarn::train {
namespace {

using namespace std::chrono_literals;

std::vector<float> ValuesOf(const std::vector<std::pair<std::string, torch::Tensor>>& named,
                            const std::string& name) {
  for (const auto& [n, t] : named) {
    if (n == name) {
      const torch::Tensor c = t.contiguous();
      return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
  }
  ADD_FAILURE() << "no " << name;
  return {};
}

TEST_F(TrainTest, CnnBnNormalisesByTheBatchInTrainingAndByItsStatisticsInEval) {
  auto m = MakeZooModel("cnn_bn", 7);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(CountParameters(*m), 216250);
  EXPECT_EQ(BufferElements(*m), 160u);
  const auto buffers = NamedBuffers(*m);
  ASSERT_EQ(buffers.size(), 6u);
  EXPECT_EQ(buffers[0].first, "bn1_running_mean");
  EXPECT_EQ(buffers[1].first, "bn1_running_var");
  const std::vector<float> initial = BufferValues(*m);
  torch::manual_seed(3);
  const torch::Tensor x = torch::rand({8, 1, 28, 28});
  torch::NoGradGuard no_grad;

  // Eval: each image's logits are its own, whatever else is in the batch; nothing changes.
  m->eval();
  const torch::Tensor whole = m->forward({x}).toTensor();
  EXPECT_EQ(whole.sizes(), (std::vector<int64_t>{8, 10}));
  const torch::Tensor first = m->forward({x.slice(0, 0, 2)}).toTensor();
  EXPECT_TRUE(torch::allclose(first, whole.slice(0, 0, 2), 1e-5, 1e-6));
  EXPECT_EQ(BufferValues(*m), initial);

  // Training: batch statistics, so an image's logits depend on its batch, and the running
  // statistics move 10% of the way to the batch's (momentum 0.1).
  m->train();
  const torch::Tensor in_eight = m->forward({x}).toTensor();
  const torch::Tensor in_two = m->forward({x.slice(0, 0, 2)}).toTensor();
  EXPECT_FALSE(torch::allclose(in_two, in_eight.slice(0, 0, 2), 1e-3, 1e-3));
  EXPECT_NE(BufferValues(*m), initial);

  // The first batch norm's running mean after one batch, by hand: 0.9 * 0 + 0.1 * the mean
  // over the batch and positions of the first convolution's output, per channel.
  auto fresh = MakeZooModel("cnn_bn", 7);
  ASSERT_TRUE(fresh.ok());
  fresh->train();
  fresh->forward({x});
  const torch::Tensor conv1 =
      torch::conv2d((x - 0.2860) / 0.3530, NamedParameters(*fresh)[0].second, {}, 1, 1);
  const torch::Tensor want = 0.1 * conv1.mean({0, 2, 3});
  const std::vector<float> got = ValuesOf(NamedBuffers(*fresh), "bn1_running_mean");
  ASSERT_EQ(got.size(), 16u);
  for (int64_t c = 0; c < 16; ++c) {
    EXPECT_NEAR(got[c], want[c].item<float>(), 1e-5 * (1 + std::abs(want[c].item<float>())));
  }

  // Values out and back in; a wrong count is refused.
  std::vector<float> values = BufferValues(*m);
  values[0] = 42;
  ASSERT_TRUE(SetBufferValues(*fresh, values).ok());
  EXPECT_EQ(BufferValues(*fresh), values);
  values.pop_back();
  const Status refused = SetBufferValues(*fresh, values);
  EXPECT_EQ(refused.message(), "the model has 160 buffer values, not 159");
}

// 60 steps, so that the running statistics' start (0 and 1) weighs 0.9^60 = 0.2% in them.
// The exported model is in eval mode and holds the statistics of the checkpoint written at
// the same step; the first batch norm's running mean is the mean of the first convolution's
// output over the training images under the exported weights, within what an average of
// 64-image batches taken over the last few dozen steps allows.
TEST_F(TrainTest, TheExportedBatchNormStatisticsAreTheTrainedOnes) {
  LocalTrainingOptions o;
  o.model = "cnn_bn";
  o.data_dir = kData;
  o.export_base = dir_ + "/models";
  o.checkpoint_dir = dir_ + "/ckpt";
  o.train_limit = 3840;
  o.threads = 2;
  auto r = RunLocalTraining(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->steps, 60);
  auto ck = ReadLatestCheckpoint(o.checkpoint_dir);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->step, 60);
  ASSERT_EQ(ck->buffers.size(), 160u);

  torch::jit::Module exported = torch::jit::load(o.export_base + "/fmnist/1/model.pt");
  EXPECT_FALSE(exported.is_training()) << "exported in eval mode";
  EXPECT_EQ(BufferValues(exported), ck->buffers);

  auto train = ReadImageSet(kData, "train");
  ASSERT_TRUE(train.ok());
  std::vector<int64_t> first(3840);
  std::iota(first.begin(), first.end(), 0);
  torch::NoGradGuard no_grad;
  const torch::Tensor conv1 =
      torch::conv2d((ImageBatch(*train, first, 0, first.size()) - 0.2860) / 0.3530,
                    NamedParameters(exported)[0].second, {}, 1, 1);
  const torch::Tensor mean = conv1.mean({0, 2, 3}), sd = conv1.std({0, 2, 3}).contiguous();
  const std::vector<float> running = ValuesOf(NamedBuffers(exported), "bn1_running_mean");
  ASSERT_EQ(running.size(), 16u);
  for (int64_t c = 0; c < 16; ++c) {
    // The batches' means scatter by about sd / 8 (64 images); the average of the last ~20
    // narrows that, and the weights moved a little over those steps: 0.1 sd covers both,
    // where the initial 0 or the statistics of an untrained layer miss by far more.
    EXPECT_NEAR(running[c], mean[c].item<float>(), 0.1 * sd[c].item<float>()) << "channel " << c;
  }
}

// The chief keeps the statistics: a 1 ps + 1 worker run stopped at step 10 and resumed (a
// new ps, restored from the checkpoint) ends at step 20 with the parameters, moments and
// statistics of an uninterrupted single-process run, bit for bit.
TEST_F(TrainTest, AClusterChiefCheckpointsAndResumesTheBatchNormStatistics) {
  LocalTrainingOptions o;
  o.model = "cnn_bn";
  o.data_dir = kData;
  o.train_limit = 1280;
  o.max_steps = 20;
  o.threads = 1;
  o.export_every_secs = 0;
  o.checkpoint_dir = dir_ + "/whole";
  auto whole = RunLocalTraining(o);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto a = ReadLatestCheckpoint(dir_ + "/whole");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->step, 20);

  const std::vector<std::string> common = OnePsOneWorkerFlags(
      "cnn_bn", {"--train_limit", "1280", "--export_every_secs", "0", "--checkpoint_dir",
                 dir_ + "/cluster", "--export_base", dir_ + "/models"});
  std::string worker_out;
  for (const char* max_steps : {"10", "20"}) {
    BackgroundProcess server(TaskArgs("ps", 0, common), dir_ + "/ps-" + max_steps + ".log");
    auto r = RunCommand(TaskArgs("worker", 0, common, {"--max_steps", max_steps}), 300s);
    EXPECT_EQ(server.Stop(), 0);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
    worker_out = r->out;
  }
  EXPECT_NE(worker_out.find("resuming from the checkpoint of step 10"), std::string::npos)
      << worker_out;
  auto c = ReadLatestCheckpoint(dir_ + "/cluster");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->step, 20);
  ASSERT_EQ(c->buffers.size(), 160u);
  EXPECT_EQ(CheckpointDistance(*a, *c), 0.0f);
  EXPECT_NE(c->buffers, BufferValues(*MakeZooModel("cnn_bn", 1))) << "the statistics moved";
  // The chief's export at step 20 holds those statistics.
  torch::jit::Module exported = torch::jit::load(dir_ + "/models/fmnist/2/model.pt");
  EXPECT_EQ(BufferValues(exported), c->buffers);

  // A checkpoint of another model's buffers is refused, naming them.
  Checkpoint odd = *c;
  odd.step = 21;
  odd.buffers.pop_back();
  ASSERT_TRUE(WriteCheckpoint(dir_ + "/cluster", odd).ok());
  auto refused =
      ReadResumableCheckpoint(dir_ + "/cluster", "cnn_bn", "adam", c->arrays[0].size(), 160);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("holds 159 buffer values (batch norm's statistics), "
                                            "model cnn_bn has 160"),
            std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace tarn::train
