// The model zoo, export and single-process training, on the real Fashion-MNIST files.
#include "train/model_zoo.h"

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
#include "train/logit_tolerance_for_test.h"
#include "train/model_export.h"
#include "train/parameter_server.h"
#include "train/ps_client.h"

namespace tarn::train {
namespace {

using namespace std::chrono_literals;

constexpr const char* kData = "/usr/share/datasets/fashion-mnist";

// Training a network to an accuracy bar spends its time in libtorch's arithmetic, which ASan
// does not instrument; the shorter tests run tarn's same code under ASan, and the release
// build runs the long one (README: "Which tests run where").
#ifdef TARN_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

int64_t CountParameters(const torch::jit::Module& m) {
  int64_t n = 0;
  for (const auto& [name, p] : NamedParameters(m)) n += p.numel();
  return n;
}

// The test set's images whose predicted class another order of float32 sums could change
// (AmbiguousPrediction), by `model_pt` evaluated here.
int AmbiguousTestImages(const std::string& model_pt) {
  auto test = ReadImageSet(kData, "t10k");
  EXPECT_TRUE(test.ok());
  if (!test.ok()) return 0;
  torch::jit::Module m = torch::jit::load(model_pt);
  m.eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::from_blob(test->pixels.data(), {test->count, 1, 28, 28}, torch::kUInt8)
                        .to(torch::kFloat32) /
                    255.0;
  int ambiguous = 0;
  for (const torch::Tensor& chunk : x.split(256)) {  // as tarn-train evaluates (Evaluate)
    torch::Tensor logits = m.forward({chunk}).toTensor().contiguous();
    for (int64_t i = 0; i < logits.size(0); ++i) {
      ambiguous += AmbiguousPrediction(logits[i].data_ptr<float>(), 10);
    }
  }
  return ambiguous;
}

// Two evaluations of one exported model on the test set's 10,000 images that differ only in
// the order of their sums (chunks, processes, Python) agree but for its ambiguous images.
void ExpectSameAccuracy(double a, double b, const std::string& model_pt) {
  const int ambiguous = AmbiguousTestImages(model_pt);
  EXPECT_LE(std::abs(a - b) * 10000, ambiguous + 1e-6)
      << a << " vs " << b << ": " << ambiguous << " ambiguous images of " << model_pt;
}

class TrainTest : public ::testing::Test {
 protected:
  TempDir temp_{"tarn-train"};
  const std::string dir_ = temp_.path();
};

TEST_F(TrainTest, ZooModelsHaveTheirShapesAndAreDeterministic) {
  auto cnn = MakeZooModel("cnn", 7);
  ASSERT_TRUE(cnn.ok()) << cnn.status().ToString();
  EXPECT_EQ(CountParameters(*cnn), 225034);
  auto mlp = MakeZooModel("mlp", 7);
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(CountParameters(*mlp), 101770);
  torch::Tensor x = torch::rand({4, 1, 28, 28});
  for (torch::jit::Module* m : {&*cnn, &*mlp}) {
    torch::Tensor y = m->forward({x}).toTensor();
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{4, 10}));
  }
  auto again = MakeZooModel("cnn", 7);
  auto other = MakeZooModel("cnn", 8);
  const auto a = NamedParameters(*cnn), b = NamedParameters(*again), c = NamedParameters(*other);
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(a[0].first, "conv1_weight");
  EXPECT_TRUE(torch::equal(a[0].second, b[0].second));
  EXPECT_FALSE(torch::equal(a[0].second, c[0].second));
  // PyTorch's default bound for conv1: 1/sqrt(9).
  EXPECT_LE(a[0].second.abs().max().item<float>(), 1.0f / 3.0f);

  auto unknown = MakeZooModel("resnet", 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "unknown model \"resnet\" (the zoo has mlp, cnn; or give the path of a TorchScript "
            "file)");
}

TEST_F(TrainTest, ASavedModelLoadsBackAndComputesTheSame) {
  auto cnn = MakeZooModel("cnn", 3);
  ASSERT_TRUE(cnn.ok());
  cnn->save(dir_ + "/cnn.pt");
  auto loaded = LoadModel(dir_ + "/cnn.pt", 0);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  torch::Tensor x = torch::rand({2, 1, 28, 28});
  EXPECT_TRUE(torch::allclose(cnn->forward({x}).toTensor(), loaded->forward({x}).toTensor()));
  EXPECT_TRUE(NamedParameters(*loaded)[0].second.requires_grad());

  std::ofstream(dir_ + "/junk.pt") << "not a model";
  auto junk = LoadModel(dir_ + "/junk.pt", 0);
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().message().rfind(dir_ + "/junk.pt: not a loadable TorchScript model", 0),
            0u)
      << junk.status().message();
}

TEST_F(TrainTest, TrainsExportsVersionsThatServeTheSameAccuracy) {
  LocalTrainingOptions o;
  o.model = "mlp";
  o.data_dir = kData;
  o.export_base = dir_ + "/models";
  o.train_limit = 6000;
  o.epochs = 2;
  o.threads = 2;
  std::vector<std::string> lines;
  o.log = [&](const std::string& l) { lines.push_back(l); };
  auto r = RunLocalTraining(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->steps, 2 * ((6000 + 63) / 64));
  EXPECT_GE(r->accuracy, 0.72) << "an MLP on 6,000 images for 2 epochs";
  EXPECT_LT(r->last_loss, 1.0);
  EXPECT_EQ(r->exported_version, 2);
  EXPECT_EQ(LatestVersion(o.export_base, "fmnist"), 2);

  // The exported version, loaded as a server would, scores what training measured.
  const std::string v2 = o.export_base + "/fmnist/2";
  auto meta = nlohmann::json::parse(ReadFileToString(v2 + "/meta.json").value_or("{}"));
  EXPECT_EQ(meta["version"], 2);
  EXPECT_EQ(meta["step"], r->steps);
  EXPECT_EQ(meta["input_shape"], nlohmann::json({1, 28, 28}));
  EXPECT_EQ(meta["labels"][7], "Sneaker");
  EXPECT_DOUBLE_EQ(meta["accuracy"].get<double>(), r->accuracy);
  torch::jit::Module served = torch::jit::load(v2 + "/model.pt");
  served.eval();
  auto test = ReadImageSet(kData, "t10k");
  ASSERT_TRUE(test.ok());
  torch::Tensor x = torch::from_blob(test->pixels.data(), {test->count, 1, 28, 28}, torch::kUInt8)
                        .to(torch::kFloat32) /
                    255.0;
  torch::Tensor y =
      torch::from_blob(test->labels.data(), {test->count}, torch::kUInt8).to(torch::kInt64);
  torch::NoGradGuard no_grad;
  const double accuracy =
      served.forward({x}).toTensor().argmax(1).eq(y).sum().item<double>() / test->count;
  ExpectSameAccuracy(accuracy, r->accuracy, v2 + "/model.pt");
  // Nothing half-written is left beside the versions.
  for (const auto& e : std::filesystem::directory_iterator(o.export_base + "/fmnist")) {
    EXPECT_TRUE(e.path().filename() == "1" || e.path().filename() == "2") << e.path();
  }
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("exported " + v2), std::string::npos) << lines.back();
}

TEST_F(TrainTest, TheBinaryTrainsAloneAndNamesAMissingDataDir) {
  auto r = RunCommand({TARN_TRAIN_BINARY, "--model", "mlp", "--train_limit", "640", "--threads",
                       "1", "--export_base", dir_ + "/models"},
                      120s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_NE(r->out.find("exported version 1"), std::string::npos) << r->out;

  r = RunCommand({TARN_TRAIN_BINARY, "--data_dir", dir_ + "/nothing"}, 60s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_NE(r->err.find("tarn-train: " + dir_ + "/nothing/train-images-idx3-ubyte.gz: "),
            std::string::npos)
      << r->err;
}

// The parameter server's optimisers against torch.optim's on the same gradients.
TEST_F(TrainTest, FlatOptimizersMatchTorchOptim) {
  for (const std::string kind : {"adam", "sgd"}) {
    torch::manual_seed(5);
    torch::Tensor p = torch::randn({1000}).set_requires_grad(true);
    std::vector<float> flat(p.data_ptr<float>(), p.data_ptr<float>() + 1000);
    OptimizerOptions o;
    o.kind = kind;
    o.learning_rate = 0.01;
    auto mine = FlatOptimizer::Create(o, 1000);
    ASSERT_TRUE(mine.ok());
    std::unique_ptr<torch::optim::Optimizer> theirs;
    if (kind == "adam") {
      theirs = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{p},
                                                    torch::optim::AdamOptions(0.01));
    } else {
      theirs = std::make_unique<torch::optim::SGD>(std::vector<torch::Tensor>{p},
                                                   torch::optim::SGDOptions(0.01).momentum(0.9));
    }
    for (int step = 0; step < 20; ++step) {
      torch::Tensor g = torch::randn({1000});
      p.mutable_grad() = g.clone();
      theirs->step();
      mine->Apply(flat.data(), g.data_ptr<float>());
    }
    torch::Tensor ours = torch::from_blob(flat.data(), {1000});
    EXPECT_TRUE(torch::allclose(ours, p.detach(), 1e-4, 1e-5))
        << kind << ": max difference " << (ours - p.detach()).abs().max().item<float>();
  }
}

// Two parameter servers and two workers as separate processes over loopback: the model
// trains, the chief (worker 0) exports, and the exported version scores what it says.
// Returns the exported version's directory ("" on failure).
std::string TrainACluster(const std::string& dir, bool sync, const std::string& model = "mlp",
                          int64_t train_limit = 12000, double min_accuracy = 0.72,
                          const std::vector<std::string>& extra = {}) {
  const std::string ps_hosts =
      "127.0.0.1:" + std::to_string(FreeLoopbackPort()) + ",127.0.0.1:" + std::to_string(FreeLoopbackPort());
  const std::string worker_hosts = "127.0.0.1:1,127.0.0.1:2";  // workers listen on nothing
  std::vector<std::string> common = {
      "--model",        model,        "--ps_hosts",    ps_hosts,
      "--worker_hosts", worker_hosts, "--train_limit", std::to_string(train_limit),
      "--threads",      "1",          "--export_base", dir + "/models"};
  if (sync) common.push_back("--sync_replicas");
  common.insert(common.end(), extra.begin(), extra.end());
  std::vector<std::unique_ptr<BackgroundProcess>> servers;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> args = {TARN_TRAIN_BINARY, "--job_name", "ps", "--task_index",
                                     std::to_string(i)};
    args.insert(args.end(), common.begin(), common.end());
    servers.push_back(
        std::make_unique<BackgroundProcess>(args, dir + "/ps-" + std::to_string(i) + ".log"));
  }
  std::vector<std::future<StatusOr<CommandResult>>> workers;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> args = {TARN_TRAIN_BINARY, "--job_name", "worker", "--task_index",
                                     std::to_string(i)};
    args.insert(args.end(), common.begin(), common.end());
    workers.push_back(std::async(std::launch::async, [args] { return RunCommand(args, 300s); }));
  }
  std::string chief_out;
  int64_t last_global_step = 0;  // the larger of the workers' "global step" at their ends
  for (int i = 0; i < 2; ++i) {
    auto r = workers[static_cast<size_t>(i)].get();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return "";
    EXPECT_EQ(r->exit_code, 0) << "worker " << i << ":\n" << r->out << r->err;
    if (i == 0) chief_out = r->out;
    if (const size_t at = r->out.find("global step "); at != std::string::npos) {
      last_global_step = std::max<int64_t>(last_global_step, std::atoll(r->out.c_str() + at + 12));
    }
  }
  for (auto& s : servers) EXPECT_EQ(s->Stop(), 0);
  EXPECT_NE(chief_out.find("worker 0: initialised the parameter servers"), std::string::npos)
      << chief_out;
  EXPECT_NE(chief_out.find(sync ? "synchronous" : "asynchronous"), std::string::npos);
  const int64_t version = LatestVersion(dir + "/models", "fmnist");
  EXPECT_GE(version, 1) << chief_out;
  if (version < 1) return "";
  // The end of the epoch is the end of training: the chief evaluates (and exports) that
  // model once, not a second time as it stops. Earlier evaluations by --export_every_secs
  // are of earlier steps.
  std::set<std::string> evaluated;
  for (size_t at = chief_out.find(": test accuracy"); at != std::string::npos;
       at = chief_out.find(": test accuracy", at + 1)) {
    const size_t line = chief_out.rfind('\n', at) + 1;  // npos + 1 == 0: the first line
    EXPECT_TRUE(evaluated.insert(chief_out.substr(line, at - line)).second)
        << "evaluated twice: " << chief_out.substr(line, at - line) << "\n" << chief_out;
  }
  auto meta = nlohmann::json::parse(
      ReadFileToString(dir + "/models/fmnist/" + std::to_string(version) + "/meta.json")
          .value_or("{}"));
  // N images split between two workers, one epoch: N/128 batches each. Async: every push is
  // a step, so the chief exports after at least its own, and the worker that ends last saw
  // both workers' pushes (the chief's export may come before any of the other's: a worker
  // started late on a busy machine is no fault). Sync: a step averages one push of each.
  const int64_t batches = (train_limit / 2 + 63) / 64;
  if (sync) {
    EXPECT_GE(meta.value("step", 0), batches - 4) << meta.dump();
  } else {
    EXPECT_GE(meta.value("step", 0), batches) << meta.dump();
    EXPECT_GT(last_global_step, batches) << "no worker saw the other's pushes\n" << chief_out;
  }
  EXPECT_GE(meta.value("accuracy", 0.0), min_accuracy) << meta.dump() << chief_out;
  const std::string ps_log = ReadFileToString(dir + "/ps-0.log").value_or("");
  EXPECT_NE(ps_log.find("worker 1 joined"), std::string::npos) << ps_log;
  return dir + "/models/fmnist/" + std::to_string(version);
}

// Test-set accuracy of a TorchScript file by Python's torch.jit.load: the independent
// reference. -1 when Python fails.
double PythonAccuracy(const std::string& model_pt) {
  const std::string script = R"(
import gzip, sys, numpy as np, torch
def idx(p):
    d = gzip.open(p).read()
    n = d[3]
    dims = [int.from_bytes(d[4 + 4 * i:8 + 4 * i], "big") for i in range(n)]
    return np.frombuffer(d, np.uint8, offset=4 + 4 * n).reshape(dims)
m = torch.jit.load(sys.argv[1])
x = torch.from_numpy(idx(sys.argv[2] + "/t10k-images-idx3-ubyte.gz").copy()).float().div(255).unsqueeze(1)
y = torch.from_numpy(idx(sys.argv[2] + "/t10k-labels-idx1-ubyte.gz").copy()).long()
# In chunks of 256, as tarn-train evaluates: 9.6 s here, against 16.6 s for one batch of 10,000.
with torch.no_grad():
    print(sum(int((m(a).argmax(1) == b).sum()) for a, b in zip(x.split(256), y.split(256))))
)";
  auto py = RunCommand({"/usr/bin/python3", "-c", script, model_pt, kData}, 120s);
  EXPECT_TRUE(py.ok());
  if (!py.ok()) return -1;
  EXPECT_EQ(py->exit_code, 0) << py->err;
  if (py->exit_code != 0) return -1;
  return std::stoi(py->out) / 10000.0;
}

TEST_F(TrainTest, AnAsynchronousClusterOfProcessesTrains) { TrainACluster(dir_, false); }
TEST_F(TrainTest, ASynchronousClusterOfProcessesTrains) { TrainACluster(dir_, true); }

// The issue's bar, CI-sized: 2 ps + 2 workers, the CNN, one epoch of the whole training set,
// at least 0.85 on the test set as Python's torch.jit.load measures the exported version.
// With a constant learning rate (1e-3) the model the chief exports at the epoch's end is
// wherever Adam's last steps left it: 9 runs here gave 0.864 to 0.875, and one in CI 0.8394.
// A learning rate halved every quarter epoch (2e-3 down to 1.25e-4) ends the epoch on small
// steps: 10 runs gave 0.8630 to 0.8684, 6 of them with three clusters at once on 2 cores
// (2026-12-03), so the bar no longer lies in the spread.
TEST_F(TrainTest, TwoPsAndTwoWorkersTrainTheCnnToEightyFivePercent) {
  if (kSanitized) GTEST_SKIP() << "release build only: its time is libtorch's arithmetic";
  const std::string version =
      TrainACluster(dir_, false, "cnn", 60000, 0.85,
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

// tarn-train, asked for the CNN where the newest checkpoint is of the MLP, said so.
void ExpectRefusesTheMlpCheckpoint(const CommandResult& r) {
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is of model mlp with adam, not cnn with adam; use another "
                       "--checkpoint_dir"),
            std::string::npos)
      << r.err;
}

// The chief checkpoints; a cluster whose ps lost everything comes back from the newest
// checkpoint (parameters, optimiser state, step, and the chief's place in its data).
TEST_F(TrainTest, ARestartedClusterResumesFromTheChiefsCheckpoint) {
  const std::string ps = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  const std::vector<std::string> common = {"--model",
                                           "mlp",
                                           "--ps_hosts",
                                           ps,
                                           "--worker_hosts",
                                           "127.0.0.1:1",
                                           "--train_limit",
                                           "6400",
                                           "--threads",
                                           "1",
                                           "--checkpoint_dir",
                                           dir_ + "/ckpt",
                                           "--checkpoint_every_steps",
                                           "20",
                                           "--export_base",
                                           dir_ + "/models"};
  auto run = [&](int max_steps, const std::string& log) {
    std::vector<std::string> ps_args = {TARN_TRAIN_BINARY, "--job_name", "ps", "--task_index", "0"};
    ps_args.insert(ps_args.end(), common.begin(), common.end());
    BackgroundProcess server(ps_args, log);
    std::vector<std::string> args = {TARN_TRAIN_BINARY,        "--job_name", "worker",
                                     "--task_index",           "0",          "--max_steps",
                                     std::to_string(max_steps)};
    args.insert(args.end(), common.begin(), common.end());
    auto r = RunCommand(args, 300s);
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
  std::vector<std::string> args = {TARN_TRAIN_BINARY, "--job_name", "worker", "--task_index", "0"};
  args.insert(args.end(), common.begin(), common.end());
  args[6] = "cnn";  // --model cnn
  std::vector<std::string> ps_args = {TARN_TRAIN_BINARY, "--job_name", "ps", "--task_index", "0"};
  ps_args.insert(ps_args.end(), common.begin(), common.end());
  ps_args[6] = "cnn";
  BackgroundProcess server(ps_args, dir_ + "/ps-3.log");
  auto refused = RunCommand(args, 120s);
  ASSERT_TRUE(refused.ok());
  ExpectRefusesTheMlpCheckpoint(*refused);
}

// Largest difference between two checkpoints' arrays (parameters and moments).
float CheckpointDistance(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.arrays.size(), b.arrays.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(a.arrays.size(), b.arrays.size()); ++i) {
    EXPECT_EQ(a.arrays[i].size(), b.arrays[i].size());
    for (size_t k = 0; k < std::min(a.arrays[i].size(), b.arrays[i].size()); ++k) {
      worst = std::max(worst, std::abs(a.arrays[i][k] - b.arrays[i][k]));
    }
  }
  return worst;
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
  const std::string ps = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  std::vector<std::string> common = {"--model",       "mlp",    "--ps_hosts",    ps,
                                     "--worker_hosts", "127.0.0.1:1", "--train_limit", "1280",
                                     "--epochs",       "2",      "--threads",     "1",
                                     "--export_every_secs", "0", "--checkpoint_dir",
                                     dir_ + "/cluster"};
  std::vector<std::string> ps_args = {TARN_TRAIN_BINARY, "--job_name", "ps", "--task_index", "0"};
  ps_args.insert(ps_args.end(), common.begin(), common.end());
  BackgroundProcess server(ps_args, dir_ + "/ps.log");
  std::vector<std::string> args = {TARN_TRAIN_BINARY, "--job_name", "worker", "--task_index", "0"};
  args.insert(args.end(), common.begin(), common.end());
  auto r = RunCommand(args, 300s);
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

TEST_F(TrainTest, TheBatchLoaderYieldsEveryBatchInOrderFromWhereItStarts) {
  ImageSet set;
  set.count = 10;
  set.rows = set.cols = 2;
  for (int i = 0; i < 10; ++i) {
    set.labels.push_back(static_cast<uint8_t>(i));
    for (int p = 0; p < 4; ++p) set.pixels.push_back(static_cast<uint8_t>(25 * i));
  }
  std::vector<int64_t> order = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  BatchLoader loader(set, order, /*first_batch=*/1, /*batch_size=*/3);
  torch::Tensor images, labels;
  std::vector<int64_t> seen;
  while (loader.Next(&images, &labels)) {
    ASSERT_EQ(images.size(0), labels.size(0));
    EXPECT_EQ(images.sizes(), (std::vector<int64_t>{labels.size(0), 1, 2, 2}));
    for (int64_t i = 0; i < labels.size(0); ++i) {
      seen.push_back(labels[i].item<int64_t>());
      EXPECT_FLOAT_EQ(images[i][0][1][1].item<float>(), 25.0f * seen.back() / 255.0f);
    }
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{6, 5, 4, 3, 2, 1, 0}));
  BatchLoader abandoned(set, order, 0, 1, 1);  // destroyed with batches still to make
}

// The independent reference: Python's torch.jit.load runs the exported version and scores
// exactly what tarn-train measured, for both zoo models.
TEST_F(TrainTest, PythonsTorchJitLoadRunsTheExportedModels) {
  if (kSanitized) GTEST_SKIP() << "release build only: its time is libtorch's and Python's";
  for (const std::string model : {"mlp", "cnn"}) {
    LocalTrainingOptions o;
    o.model = model;
    o.data_dir = kData;
    o.export_base = dir_ + "/" + model;
    o.train_limit = 1280;
    o.threads = 2;
    auto r = RunLocalTraining(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    SCOPED_TRACE(model);
    const std::string version = o.export_base + "/fmnist/1/model.pt";
    ExpectSameAccuracy(PythonAccuracy(version), r->accuracy, version);
  }
}

TEST_F(TrainTest, OnlyTheNewestVersionsAreKept) {
  auto mlp = MakeZooModel("mlp", 1);
  ASSERT_TRUE(mlp.ok());
  for (int i = 1; i <= 4; ++i) {
    auto v = ExportVersion(*mlp, dir_, "m", {{"step", i}}, /*keep=*/2);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, i);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/m/1"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/m/2"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/m/3/model.pt"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/m/4/meta.json"));
}

// A poller of the model directory (tarn-serve's) never sees part of a version: versions
// appear by a rename, and old ones leave by a rename (out of sight) before they are deleted.
TEST_F(TrainTest, APollerNeverSeesPartOfAVersionWhileOldOnesAreRemoved) {
  auto mlp = MakeZooModel("mlp", 1);
  ASSERT_TRUE(mlp.ok());
  const std::string base = dir_ + "/m";
  std::atomic<bool> done{false};
  std::atomic<int> looks{0};
  std::vector<std::string> partial;
  std::thread poller([&] {
    while (!done) {
      std::error_code ec;
      for (std::filesystem::directory_iterator it(base, ec), end; !ec && it != end;
           it.increment(ec)) {
        const std::string name = it->path().filename();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        // What the version holds, read through one open directory; counted only if the name
        // still leads to that directory afterwards (a version renamed away meanwhile was
        // out of sight, which is the point).
        const int fd = ::open(it->path().c_str(), O_RDONLY | O_DIRECTORY);
        if (fd < 0) continue;
        std::set<std::string> files;
        if (DIR* d = ::fdopendir(::dup(fd))) {
          while (dirent* e = ::readdir(d)) files.insert(e->d_name);
          ::closedir(d);
        }
        struct stat held {
        }, named{};
        const bool same = ::fstat(fd, &held) == 0 && ::stat(it->path().c_str(), &named) == 0 &&
                          held.st_ino == named.st_ino;
        ::close(fd);
        ++looks;
        if (same && (!files.count("model.pt") || !files.count("meta.json"))) {
          partial.push_back(name + ": " + std::to_string(files.size() - 2) + " entries");
        }
      }
    }
  });
  for (int i = 1; i <= 30; ++i) {
    auto v = ExportVersion(*mlp, dir_, "m", {{"step", i}}, /*keep=*/2);
    ASSERT_TRUE(v.ok());
  }
  done = true;
  poller.join();
  EXPECT_GT(looks.load(), 30);
  EXPECT_TRUE(partial.empty()) << partial.size() << " partial versions seen, e.g. "
                               << (partial.empty() ? "" : partial[0]);
  std::set<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(base)) left.insert(e.path().filename());
  EXPECT_EQ(left, (std::set<std::string>{"29", "30"}));  // nothing hidden is left behind
}

// kill -9 of the ps mid-run: the chief gives the restarted, empty ps its share of the newest
// checkpoint, training goes on from that step, and the run ends normally. The MLP: what is
// tested is the ps's recovery, which is the same code for every model, and under ASan the
// CNN's worker took 12x as long (125 against 10.7 s), 54 s of it in the kernel, faulting in
// the pages ASan's allocator maps afresh for libtorch's large convolution buffers.
TEST_F(TrainTest, AKilledPsComesBackFromTheCheckpoint) {
  const std::string ps = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  const std::vector<std::string> common = {"--model",
                                           "mlp",
                                           "--ps_hosts",
                                           ps,
                                           "--worker_hosts",
                                           "127.0.0.1:1",
                                           "--threads",
                                           "1",
                                           "--checkpoint_dir",
                                           dir_ + "/ckpt",
                                           "--checkpoint_every_steps",
                                           "40",
                                           "--max_steps",
                                           "200"};
  std::vector<std::string> ps_args = {TARN_TRAIN_BINARY, "--job_name", "ps", "--task_index", "0"};
  ps_args.insert(ps_args.end(), common.begin(), common.end());
  auto server = std::make_unique<BackgroundProcess>(ps_args, dir_ + "/ps-1.log");
  std::vector<std::string> args = {TARN_TRAIN_BINARY, "--job_name", "worker", "--task_index", "0"};
  args.insert(args.end(), common.begin(), common.end());
  auto worker = std::async(std::launch::async, [args] { return RunCommand(args, 300s); });
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

// The tests compare training in this process with training in tarn-train processes bit for
// bit, so this process sets its BLAS threads as tarn-train does, before OpenBLAS loads.
int main(int argc, char** argv) {
  tarn::PinBlasThreads(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
