// LocalTrainer: tarn-train's single-process mode (no TF_CONFIG cluster and no --job_name):
// one process loads or builds the model, trains it on the training split with shuffled
// mini-batches, evaluates it on the test split and exports each evaluated model as a new
// version for the serving cluster. It trains as a cluster of one would (distributed.h):
// the same optimiser (FlatOptimizer, here one per parameter, on the parameters' own
// memory), the same order of batches for a seed, the same evaluations and exports, and the
// same checkpoints, so a checkpoint of either resumes in the other.
//
// This header is free of libtorch so that tarn-train's main and the CLI stay quick to
// compile. RunLocalTraining is synchronous; it uses `threads` intra-op threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "train/augmentation.h"
#include "train/flat_optimizer.h"
#include "train/progress.h"

namespace tarn::train {

struct LocalTrainingOptions {
  std::string model = "cnn";  // a zoo name (model_zoo.h) or a TorchScript file
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string export_base;  // "": no export
  std::string model_name = "fmnist";
  int epochs = 1;
  int64_t max_steps = 0;    // > 0: stop after this many steps, even mid-epoch
  int64_t train_limit = 0;  // > 0: only the first N training images (CI-sized runs)
  int batch_size = 64;
  OptimizerOptions optimizer;  // kind, learning rate, momentum, decay (flat_optimizer.h)
  int threads = 1;  // intra-op threads (at::set_num_threads)
  // TorchScript's profiling graph executor (autodiff subgraphs, fusion). Off by default: on
  // the CPU it made the CNN's backward pass slower (see SetUpTorch).
  bool jit_optimize = false;
  std::string device = "auto";  // ChooseDevice: auto, cpu or cuda
  uint64_t seed = 1;
  Augmentation augment;   // of the training batches (augmentation.h); none by default
  int keep_versions = 5;  // exported versions kept (0: all)
  // Evaluation and export (in a cluster, the chief's): at the end of each epoch, every
  // export_every_secs (0: not by time), every export_every_steps steps since the last
  // evaluation (0: not by steps), and at the end.
  double export_every_secs = 60;
  int64_t export_every_steps = 0;
  // Checkpoints (in a cluster, the chief's): every checkpoint_every_secs and, when > 0,
  // every checkpoint_every_steps steps, and at the end; a restart resumes from the newest.
  std::string checkpoint_dir;  // "": no checkpoints
  double checkpoint_every_secs = 60;
  int64_t checkpoint_every_steps = 0;
  // Event lines ("exported ...") and, every log_every_secs, a JSON progress line; may be
  // empty. `progress` (optional, not owned) is kept current for the metrics endpoint.
  std::function<void(const std::string&)> log;
  double log_every_secs = 10;
  Progress* progress = nullptr;
};

struct LocalTrainingResult {
  int64_t steps = 0;
  double last_loss = 0;          // mean loss of the last 100 steps
  double accuracy = 0;           // on the test split, after the last epoch
  int64_t exported_version = 0;  // 0: no export
  double samples_per_second = 0;
};

// Whether --device `want` can be honoured in this process: ChooseDevice's verdict
// (model_zoo.h), for callers that include no libtorch header.
Status CheckDevice(const std::string& want);

StatusOr<LocalTrainingResult> RunLocalTraining(const LocalTrainingOptions& options);

}  // namespace tarn::train
