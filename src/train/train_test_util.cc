// The helpers of train_test_util.h, and the binary's main.
#include "train/train_test_util.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "common/file.h"
#include "common/test_process.h"
#include "common/workload_process.h"
#include "train/idx.h"
#include "train/logit_tolerance_for_test.h"
#include "train/model_export.h"
#include "train/model_zoo.h"

namespace tarn::train {

using namespace std::chrono_literals;

int64_t CountParameters(const torch::jit::Module& m) {
  int64_t n = 0;
  for (const auto& [name, p] : NamedParameters(m)) n += p.numel();
  return n;
}

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

void ExpectSameAccuracy(double a, double b, const std::string& model_pt) {
  const int ambiguous = AmbiguousTestImages(model_pt);
  EXPECT_LE(std::abs(a - b) * 10000, ambiguous + 1e-6)
      << a << " vs " << b << ": " << ambiguous << " ambiguous images of " << model_pt;
}

std::vector<std::string> TaskArgs(const std::string& job, int index,
                                  const std::vector<std::string>& flags,
                                  const std::vector<std::string>& more) {
  std::vector<std::string> args = {TARN_TRAIN_BINARY, "--job_name", job, "--task_index",
                                   std::to_string(index)};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::vector<std::string> OnePsOneWorkerFlags(const std::string& model,
                                             const std::vector<std::string>& more) {
  std::vector<std::string> flags = {
      "--model",        model, "--ps_hosts", "127.0.0.1:" + std::to_string(FreeLoopbackPort()),
      "--worker_hosts",
      "127.0.0.1:1",  // the worker listens on nothing
      "--threads",      "1"};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

std::string TrainACluster(const std::string& dir, bool sync, const std::string& model,
                          int64_t train_limit, double min_accuracy,
                          const std::vector<std::string>& extra) {
  const std::string ps_hosts = "127.0.0.1:" + std::to_string(FreeLoopbackPort()) +
                               ",127.0.0.1:" + std::to_string(FreeLoopbackPort());
  const std::string worker_hosts = "127.0.0.1:1,127.0.0.1:2";  // workers listen on nothing
  std::vector<std::string> common = {
      "--model",        model,        "--ps_hosts",    ps_hosts,
      "--worker_hosts", worker_hosts, "--train_limit", std::to_string(train_limit),
      "--threads",      "1",          "--export_base", dir + "/models"};
  if (sync) common.push_back("--sync_replicas");
  common.insert(common.end(), extra.begin(), extra.end());
  std::vector<std::unique_ptr<BackgroundProcess>> servers;
  for (int i = 0; i < 2; ++i) {
    servers.push_back(std::make_unique<BackgroundProcess>(
        TaskArgs("ps", i, common), dir + "/ps-" + std::to_string(i) + ".log"));
  }
  std::vector<std::future<StatusOr<CommandResult>>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(std::async(std::launch::async, [args = TaskArgs("worker", i, common)] {
      return RunCommand(args, 300s);
    }));
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
        << "evaluated twice: " << chief_out.substr(line, at - line) << "\n"
        << chief_out;
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

double PythonAccuracy(const std::string& model_pt) {
  auto py = RunCommand(
      {"/usr/bin/python3", TARN_SOURCE_DIR "/src/train/score_model.py", model_pt, kData}, 120s);
  EXPECT_TRUE(py.ok());
  if (!py.ok()) return -1;
  EXPECT_EQ(py->exit_code, 0) << py->err;
  if (py->exit_code != 0) return -1;
  return std::stoi(py->out) / 10000.0;
}

void ExpectRefusesTheMlpCheckpoint(const CommandResult& r) {
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is of model mlp with adam, not cnn with adam; use another "
                       "--checkpoint_dir"),
            std::string::npos)
      << r.err;
}

float CheckpointDistance(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.arrays.size(), b.arrays.size());
  EXPECT_EQ(a.buffers.size(), b.buffers.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(a.arrays.size(), b.arrays.size()); ++i) {
    EXPECT_EQ(a.arrays[i].size(), b.arrays[i].size());
    for (size_t k = 0; k < std::min(a.arrays[i].size(), b.arrays[i].size()); ++k) {
      worst = std::max(worst, std::abs(a.arrays[i][k] - b.arrays[i][k]));
    }
  }
  for (size_t k = 0; k < std::min(a.buffers.size(), b.buffers.size()); ++k) {
    worst = std::max(worst, std::abs(a.buffers[k] - b.buffers[k]));
  }
  return worst;
}

}  // namespace tarn::train

// The tests compare training in this process with training in tarn-train processes bit for
// bit, so this process sets its BLAS threads as tarn-train does, before OpenBLAS loads.
int main(int argc, char** argv) {
  tarn::PinBlasThreads(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
