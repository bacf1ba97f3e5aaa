// Training clusters of tarn-train processes (parameter servers and workers over loopback):
// training, refusals, checkpoints and recovery, and the synchronous step's arithmetic.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "common/subprocess.h"
#include "common/temp_dir.h"
#include "common/test_process.h"
#include "common/workload_process.h"
#include "train/checkpoint.h"
#include "train/flat_optimizer.h"
#include "train/idx.h"
#include "train/image_batches.h"
#include "train/local_trainer.h"
#include "train/model_export.h"
#include "train/model_zoo.h"
#include "train/parameter_server.h"
#include "train/ps_client.h"
#include "train/train_test_util.h"

namespace tarn::train {
namespace {

using namespace std::chrono_literals;

TEST_F(TrainTest, AnAsynchronousClusterOfProcessesTrains) { TrainACluster(dir_, false); }
TEST_F(TrainTest, ASynchronousClusterOfProcessesTrains) { TrainACluster(dir_, true); }

// The bar, CI-sized: 2 ps + 2 workers, the CNN, one epoch of the whole training set,
// at least 0.85 on the test set as Python's torch.jit.load measures the exported version.
// With a constant learning rate (1e-3) the model the chief exports at the epoch's end is
// wherever Adam's last steps left it: 9 runs here gave 0.864 to 0.875, and one in CI 0.8394.
// A learning rate halved every quarter epoch (2e-3 down to 1.25e-4) ends the epoch on small
// steps: 10 runs gave 0.8630 to 0.8684, 6 of them with three clusters at once on 2 cores
// (2026-12-03), so the bar no longer lies in the spread.
TEST_F(TrainTest, TwoPsAndTwoWorkersTrainTheCnnToEightyFivePercent) {
  if (kSanitized) GTEST_SKIP() << "release build only: its time is libtorch's arithmetic";
  const std::string version = TrainACluster(
      dir_, false, "cnn", 60000, 0.85,
      {"--learning_rate", "0.002", "--lr_decay_steps", "234", "--lr_decay_rate", "0.5"});
  ASSERT_FALSE(version.empty());
  const double python = PythonAccuracy(version + "/model.pt");
  const auto meta = nlohmann::json::parse(ReadFileToString(version + "/meta.json").value_or("{}"));
  EXPECT_GE(python, 0.85);
  ExpectSameAccuracy(python, meta.value("accuracy", 0.0), version + "/model.pt");
}

TEST_F(TrainTest, ABadClusterIsRefusedWithTheReason) {
  auto r = RunCommand({"/usr/bin/env",
                       "TF_CONFIG={\"cluster\": {\"worker\": [\"w:1\"]}, "
                       "\"task\": {\"type\": \"worker\", \"index\": 0}}",
                       TARN_TRAIN_BINARY},
                      60s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_NE(r->err.find("tarn-train: TF_CONFIG: the cluster has no ps"), std::string::npos)
      << r->err;
  r = RunCommand({TARN_TRAIN_BINARY, "--optimizer", "lamb"}, 60s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_NE(r->err.find("--optimizer"), std::string::npos) << r->err;
  // A GPU asked for where there is none is refused before anything starts. (Debian's
  // libtorch has no CUDA; on a CUDA build without a visible GPU the reason differs.)
  if (!torch::cuda::is_available()) {
    r = RunCommand({"/usr/bin/env", "CUDA_VISIBLE_DEVICES=", TARN_TRAIN_BINARY, "--device", "cuda",
                    "--model", "mlp", "--train_limit", "640"},
                   60s);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->exit_code, 2) << r->out << r->err;
    EXPECT_NE(r->err.find("tarn-train: --device cuda: "), std::string::npos) << r->err;
    EXPECT_EQ(r->out.find("epoch"), std::string::npos) << r->out;
  }
}

// The chief checkpoints; a cluster whose ps lost everything comes back from the newest
// checkpoint (parameters, optimiser state, step, and the chief's place in its data).
TEST_F(TrainTest, ARestartedClusterResumesFromTheChiefsCheckpoint) {
  const std::vector<std::string> common = OnePsOneWorkerFlags(
      "mlp", {"--train_limit", "6400", "--checkpoint_dir", dir_ + "/ckpt",
              "--checkpoint_every_steps", "20", "--export_base", dir_ + "/models"});
  auto run = [&](int max_steps, const std::string& log) {
    BackgroundProcess server(TaskArgs("ps", 0, common), log);
    auto r =
        RunCommand(TaskArgs("worker", 0, common, {"--max_steps", std::to_string(max_steps)}), 300s);
    EXPECT_EQ(server.Stop(), 0);
    return r;
  };
  auto first = run(50, dir_ + "/ps-1.log");
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->exit_code, 0) << first->out << first->err;
  EXPECT_NE(first->out.find("checkpoint of step 20 (epoch 1, batch 20)"), std::string::npos)
      << first->out;
  auto saved = ReadLatestCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->step, 50);
  EXPECT_EQ(saved->position, 50);
  EXPECT_EQ(saved->arrays.size(), 3u);  // parameters and Adam's moments

  auto second = run(80, dir_ + "/ps-2.log");  // a fresh ps: it has nothing
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->exit_code, 0) << second->out << second->err;
  EXPECT_NE(second->out.find("restored the parameter servers from the checkpoint of step 50"),
            std::string::npos)
      << second->out;
  EXPECT_EQ(second->out.find("initialised the parameter servers"), std::string::npos);
  EXPECT_EQ(ReadLatestCheckpoint(dir_ + "/ckpt")->step, 80);
  EXPECT_EQ(ReadLatestCheckpoint(dir_ + "/ckpt")->position, 80);
  auto meta =
      nlohmann::json::parse(ReadFileToString(dir_ + "/models/fmnist/2/meta.json").value_or("{}"));
  EXPECT_EQ(meta.value("step", 0), 80) << meta.dump();
  EXPECT_GE(meta.value("accuracy", 0.0), 0.65) << meta.dump();

  // A checkpoint of another model is not silently used.
  std::vector<std::string> cnn = common;
  cnn[1] = "cnn";  // --model cnn
  BackgroundProcess server(TaskArgs("ps", 0, cnn), dir_ + "/ps-3.log");
  auto refused = RunCommand(TaskArgs("worker", 0, cnn), 120s);
  ASSERT_TRUE(refused.ok());
  ExpectRefusesTheMlpCheckpoint(*refused);
}

// Single-process mode trains as a cluster of one: the same batches, optimiser, evaluations
// and checkpoints. A run stopped at step 13 and resumed from its checkpoint ends where an
// uninterrupted run ends, and both end where 1 ps + 1 worker (processes) end.
TEST_F(TrainTest, ASingleProcessRunResumesAndTrainsAsAClusterOfOne) {
  LocalTrainingOptions o;
  o.model = "mlp";
  o.data_dir = kData;
  o.train_limit = 1280;  // 20 batches an epoch
  o.epochs = 2;
  o.threads = 1;
  o.checkpoint_every_secs = 0;
  o.checkpoint_every_steps = 5;
  o.export_every_secs = 0;
  o.export_every_steps = 8;
  o.augment = {/*flip=*/true, /*shift=*/2};  // resumed and clustered, augmented alike
  std::string out;
  o.log = [&](const std::string& l) { out += l + "\n"; };

  o.checkpoint_dir = dir_ + "/whole";
  auto whole = RunLocalTraining(o);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->steps, 40);
  // Every 8 steps since the last evaluation, and at each epoch's end.
  for (const std::string line :
       {"step 8: test accuracy", "step 16: test accuracy", "epoch 1 done: step 20 ",
        "step 28: test accuracy", "step 36: test accuracy", "epoch 2 done: step 40 ",
        "checkpoint of step 15 (epoch 1, batch 15)", "checkpoint of step 25 (epoch 2, batch 5)"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  EXPECT_EQ(out.find("step 24: test accuracy"), std::string::npos) << out;

  o.checkpoint_dir = dir_ + "/parts";
  o.max_steps = 13;
  auto first = RunLocalTraining(o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto stopped = ReadLatestCheckpoint(o.checkpoint_dir);
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_EQ(stopped->step, 13);
  EXPECT_EQ(stopped->epoch, 1);
  EXPECT_EQ(stopped->position, 13);
  o.max_steps = 0;
  out.clear();
  auto second = RunLocalTraining(o);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->steps, 27);
  EXPECT_NE(out.find("resuming from the checkpoint of step 13 at epoch 1, batch 13"),
            std::string::npos)
      << out;
  auto a = ReadLatestCheckpoint(dir_ + "/whole");
  auto b = ReadLatestCheckpoint(dir_ + "/parts");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->step, 40);
  EXPECT_EQ(b->step, 40);
  // Bit-identical by construction: the same code on the same values in the same order.
  EXPECT_EQ(CheckpointDistance(*a, *b), 0.0f);
  EXPECT_NEAR(second->accuracy, whole->accuracy, 1e-3);

  // The same run as 1 ps + 1 worker.
  const std::vector<std::string> common = OnePsOneWorkerFlags(
      "mlp", {"--train_limit", "1280", "--epochs", "2", "--export_every_secs", "0",
              "--checkpoint_dir", dir_ + "/cluster", "--augment_flip", "--augment_shift", "2"});
  BackgroundProcess server(TaskArgs("ps", 0, common), dir_ + "/ps.log");
  auto r = RunCommand(TaskArgs("worker", 0, common), 300s);
  EXPECT_EQ(server.Stop(), 0);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
  auto c = ReadLatestCheckpoint(dir_ + "/cluster");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->step, 40);
  // Bit-identical by construction too: the worker's forward and backward and the ps's
  // optimiser are the code above, on the same values in the same order, and this process
  // runs under tarn-train's rule for BLAS threads (main, below), which its children inherit.
  // (With 2 OpenBLAS threads here and 1 in tarn-train, the two differed by 1e-6 to 2.5e-6
  // depending on the CPU's BLAS kernel.)
  EXPECT_EQ(CheckpointDistance(*a, *c), 0.0f);

  // The single-process binary refuses a checkpoint of another model, and cluster-only flags.
  auto refused = RunCommand({TARN_TRAIN_BINARY, "--model", "cnn", "--train_limit", "640",
                             "--checkpoint_dir", dir_ + "/whole"},
                            120s);
  ASSERT_TRUE(refused.ok());
  ExpectRefusesTheMlpCheckpoint(*refused);
  refused = RunCommand({TARN_TRAIN_BINARY, "--sync_replicas"}, 60s);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->exit_code, 2);
  EXPECT_NE(refused->err.find("--sync_replicas and --backup_workers need a cluster"),
            std::string::npos)
      << refused->err;
}

// kill -9 of the ps mid-run: the chief gives the restarted, empty ps its share of the newest
// checkpoint, training goes on from that step, and the run ends normally. The MLP: what is
// tested is the ps's recovery, which is the same code for every model, and under ASan the
// CNN's worker took 12x as long (125 against 10.7 s), 54 s of it in the kernel, faulting in
// the pages ASan's allocator maps afresh for libtorch's large convolution buffers.
TEST_F(TrainTest, AKilledPsComesBackFromTheCheckpoint) {
  const std::vector<std::string> common = OnePsOneWorkerFlags(
      "mlp",
      {"--checkpoint_dir", dir_ + "/ckpt", "--checkpoint_every_steps", "40", "--max_steps", "200"});
  const std::vector<std::string> ps_args = TaskArgs("ps", 0, common);
  auto server = std::make_unique<BackgroundProcess>(ps_args, dir_ + "/ps-1.log");
  auto worker = std::async(std::launch::async, [args = TaskArgs("worker", 0, common)] {
    return RunCommand(args, 300s);
  });
  // Wait for the first checkpoint, then kill the ps the hard way.
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!ReadLatestCheckpoint(dir_ + "/ckpt").ok() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  auto first = ReadLatestCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  server->Kill();
  server = std::make_unique<BackgroundProcess>(ps_args, dir_ + "/ps-2.log");
  auto r = worker.get();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
  const std::string restored = "gave the restarted parameter server the checkpoint of step ";
  const size_t at = r->out.find(restored);
  ASSERT_NE(at, std::string::npos) << r->out;
  const int64_t from = std::stoll(r->out.substr(at + restored.size()));
  EXPECT_GE(from, first->step);
  EXPECT_EQ(from % 40, 0) << "a checkpoint's step";
  server->Stop();
  const std::string ps_log = ReadFileToString(dir_ + "/ps-2.log").value_or("");
  EXPECT_NE(ps_log.find("restored step " + std::to_string(from) + " from worker 0"),
            std::string::npos)
      << ps_log;
  EXPECT_EQ(ReadLatestCheckpoint(dir_ + "/ckpt")->step, 200);
}

// One synchronous step of two workers, each on half a batch, is one single-process step on
// the whole batch: the ps averages the two mean gradients, which is the mean over both
// halves, and applies the same update.
TEST_F(TrainTest, ASyncStepOfTwoWorkersEqualsOneStepOnTheCombinedBatch) {
  auto test = ReadImageSet(kData, "t10k");
  ASSERT_TRUE(test.ok());
  std::vector<int64_t> all(64);
  std::iota(all.begin(), all.end(), 0);
  const std::vector<int64_t> half0(all.begin(), all.begin() + 32),
      half1(all.begin() + 32, all.end());
  auto gradients = [&](torch::jit::Module& m, const std::vector<int64_t>& rows) {
    for (auto& [name, p] : NamedParameters(m)) {
      if (p.mutable_grad().defined()) p.mutable_grad().zero_();
    }
    torch::Tensor loss = torch::nn::functional::cross_entropy(
        m.forward({ImageBatch(*test, rows, 0, rows.size())}).toTensor(),
        LabelBatch(*test, rows, 0, rows.size()));
    loss.backward();
    return GradientData(m);
  };
  // SGD with momentum: Adam's first step, g / (|g| + eps), turns the last bits of a
  // near-zero gradient into a whole learning rate, so it cannot show equality to 1e-5.
  OptimizerOptions sgd;
  sgd.kind = "sgd";
  sgd.learning_rate = 0.1;

  // The reference: one process, the whole batch, the same optimiser on the flat parameters.
  auto reference = MakeZooModel("cnn", 11);
  ASSERT_TRUE(reference.ok());
  const std::vector<int64_t> sizes = [&] {
    std::vector<int64_t> v;
    for (auto& [name, p] : NamedParameters(*reference)) v.push_back(p.numel());
    return v;
  }();
  std::vector<float> flat_params, flat_grads;
  {
    std::vector<float*> g = gradients(*reference, all);
    std::vector<float*> p = ParameterData(*reference);
    for (size_t i = 0; i < sizes.size(); ++i) {
      flat_params.insert(flat_params.end(), p[i], p[i] + sizes[i]);
      flat_grads.insert(flat_grads.end(), g[i], g[i] + sizes[i]);
    }
  }
  auto opt = FlatOptimizer::Create(sgd, flat_params.size());
  ASSERT_TRUE(opt.ok());
  opt->Apply(flat_params.data(), flat_grads.data());

  // The cluster: 2 synchronous servers, 2 workers with a model each (same seed).
  const ShardPlan plan = PlanShards(sizes, 2);
  std::vector<std::unique_ptr<ParameterServer>> servers;
  std::vector<std::string> addresses;
  for (int i = 0; i < 2; ++i) {
    ParameterServer::Options o;
    o.host = "127.0.0.1";
    o.elements = plan.elements[static_cast<size_t>(i)];
    o.optimizer = sgd;
    o.sync = true;
    auto s = ParameterServer::Create(o);
    ASSERT_TRUE(s.ok() && (*s)->Start().ok());
    addresses.push_back("127.0.0.1:" + std::to_string((*s)->port()));
    servers.push_back(std::move(*s));
  }
  std::vector<torch::jit::Module> models;
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < 2; ++w) {
    models.push_back(*MakeZooModel("cnn", 11));
    PsClient::Options co;
    co.servers = addresses;
    co.worker = w;
    co.plan = plan;
    auto c = PsClient::Connect(co);
    ASSERT_TRUE(c.ok());
    clients.push_back(std::move(*c));
  }
  ASSERT_TRUE(clients[0]->Init(ParameterData(models[0])).ok());
  std::vector<std::future<StatusOr<int64_t>>> pushes;
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(clients[w]->Pull(ParameterData(models[w])).ok());
    std::vector<float*> g = gradients(models[w], w == 0 ? half0 : half1);
    pushes.push_back(std::async(std::launch::async, [&, w, g] { return clients[w]->Push(g); }));
  }
  for (auto& p : pushes) ASSERT_EQ(*p.get(), 1);
  ASSERT_TRUE(clients[0]->Pull(ParameterData(models[0])).ok());
  std::vector<float*> got = ParameterData(models[0]);
  size_t at = 0;
  float worst = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int64_t k = 0; k < sizes[i]; ++k, ++at) {
      worst = std::max(worst, std::abs(got[i][k] - flat_params[at]));
    }
  }
  // The two differ only in how float32 sums are split and ordered. A gradient element sums
  // at most 64 x 26 x 26 = 43,264 products (the first convolution's weights, over the batch
  // and the positions); two orders of such a sum differ by at most 2 * 43,264 * 2^-24 = 0.52%
  // of the sum of the terms' magnitudes, taken here as the largest gradient. A wrong average
  // (a sum, one worker's half, a stale gradient) moves parameters by a sizeable part of
  // lr * |g| instead.
  float largest = 0;
  for (float g : flat_grads) largest = std::max(largest, std::abs(g));
  const double tolerance = 2 * 43264 * 0x1p-24 * sgd.learning_rate * largest;
  EXPECT_LE(worst, tolerance) << "largest gradient " << largest;
}

}  // namespace
}  // namespace tarn::train
