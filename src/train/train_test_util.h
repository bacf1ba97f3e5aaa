// What the files of the train_test binary share: the dataset, whether this is a sanitizer
// build, the TrainTest fixture, and helpers that train a cluster of tarn-train processes,
// score an exported model with Python's torch.jit.load, or bound how far two evaluations of
// one model may differ.
#pragma once

#include <gtest/gtest.h>
#include <torch/script.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "common/temp_dir.h"
#include "train/checkpoint.h"

namespace tarn::train {

inline constexpr const char* kData = "/usr/share/datasets/fashion-mnist";

// Training a network to an accuracy bar spends its time in libtorch's arithmetic, which ASan
// does not instrument; the shorter tests run tarn's same code under ASan, and the release
// build runs the long one (README: "Which tests run where").
#ifdef TARN_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

int64_t CountParameters(const torch::jit::Module& m);

// The test set's images whose predicted class another order of float32 sums could change
// (AmbiguousPrediction), by `model_pt` evaluated here.
int AmbiguousTestImages(const std::string& model_pt);

// Two evaluations of one exported model on the test set's 10,000 images that differ only in
// the order of their sums (chunks, processes, Python) agree but for its ambiguous images.
void ExpectSameAccuracy(double a, double b, const std::string& model_pt);

class TrainTest : public ::testing::Test {
 protected:
  TempDir temp_{"tarn-train"};
  const std::string dir_ = temp_.path();
};

// tarn-train's command line as task `index` of `job` ("ps" or "worker") with `flags`, then
// `more`.
std::vector<std::string> TaskArgs(const std::string& job, int index,
                                  const std::vector<std::string>& flags,
                                  const std::vector<std::string>& more = {});

// The flags of a cluster of 1 ps (on a free loopback port) and 1 worker training `model` on
// one thread, then `more`; the model's name is element 1.
std::vector<std::string> OnePsOneWorkerFlags(const std::string& model,
                                             const std::vector<std::string>& more);

// Two parameter servers and two workers as separate processes over loopback: the model
// trains, the chief (worker 0) exports, and the exported version scores what it says.
// Returns the exported version's directory ("" on failure).
std::string TrainACluster(const std::string& dir, bool sync, const std::string& model = "mlp",
                          int64_t train_limit = 12000, double min_accuracy = 0.72,
                          const std::vector<std::string>& extra = {});

// Test-set accuracy of a TorchScript file by Python's torch.jit.load: the independent
// reference. -1 when Python fails.
double PythonAccuracy(const std::string& model_pt);

// Largest difference between two checkpoints' arrays (parameters and moments) and buffers.
float CheckpointDistance(const Checkpoint& a, const Checkpoint& b);

// tarn-train, asked for the CNN where the newest checkpoint is of the MLP, said so.
void ExpectRefusesTheMlpCheckpoint(const CommandResult& r);

}  // namespace tarn::train
