// Batches of an ImageSet as tensors, and evaluation: what the local trainer and the
// distributed worker share. Inputs are float32 [n, 1, rows, cols] in [0, 1] (DESIGN.md's
// contract); labels int64 [n]. Thread-compatible.
#pragma once

#include <torch/script.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "train/augmentation.h"
#include "train/idx.h"

namespace tarn::train {

torch::Tensor ImageBatch(const ImageSet& set, const std::vector<int64_t>& order, size_t begin,
                         size_t end);
torch::Tensor LabelBatch(const ImageSet& set, const std::vector<int64_t>& order, size_t begin,
                         size_t end);

// `shard` (indices into a set) in the order of one epoch: shuffled by a generator seeded
// from the run's seed, the trainer's rank and the epoch, so that every run with that seed
// (a resumed one too) goes through an epoch's batches in the same order.
std::vector<int64_t> EpochOrder(std::vector<int64_t> shard, uint64_t seed, int64_t rank,
                                int64_t epoch);

// Augments a batch [n, 1, rows, cols] in place; each image's flip and shift come from `rng`
// (three draws an image, whatever is applied, so that the sequence depends on n alone).
void Augment(const Augmentation& a, std::mt19937_64& rng, torch::Tensor* images);

// The generator of batch `batch` of an epoch: seeded from the run's seed, the trainer's rank,
// the epoch and the batch, so that a resumed run augments each batch as the first run did.
std::mt19937_64 AugmentationRng(uint64_t seed, int64_t rank, int64_t epoch, size_t batch);

// One forward and backward pass of `model` on a batch (moved to the model's `device`):
// the gradients are zeroed first and left in the parameters' grad(); returns the mean
// cross-entropy loss.
torch::Tensor ForwardBackward(torch::jit::Module& model, const torch::Device& device,
                              const torch::Tensor& images, const torch::Tensor& labels);

// Top-1 accuracy of `model` on all of `set`, in batches of 256, without gradients, on the
// device the model's parameters are on.
double Evaluate(torch::jit::Module& model, const ImageSet& set);

// BatchLoader: makes the batches of one pass over `order` on its own thread, up to `depth`
// ahead of the trainer, so that building the next batch overlaps the current step; with
// `augment`, each batch augmented by AugmentationRng(seed, rank, epoch, its index).
// REQUIRES: `set` outlives the loader. Next() from one thread; the destructor stops and
// joins the loader thread.
struct AugmentedBy {
  Augmentation augment;
  uint64_t seed = 0;
  int64_t rank = 0, epoch = 0;
};
class BatchLoader {
 public:
  BatchLoader(const ImageSet& set, std::vector<int64_t> order, size_t first_batch, int batch_size,
              AugmentedBy augment = {}, int depth = 2);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // The next batch (images, labels); false after the last.
  bool Next(torch::Tensor* images, torch::Tensor* labels);

 private:
  void Run(size_t first_batch);

  const ImageSet& set_;
  const std::vector<int64_t> order_;
  const size_t batch_size_;
  const AugmentedBy augment_;
  const size_t depth_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::pair<torch::Tensor, torch::Tensor>> ready_;  // guarded by mu_
  bool finished_ = false;                                      // guarded by mu_
  bool stopping_ = false;                                      // guarded by mu_
  std::thread thread_;
};

// The parameters' float32 storage, in registration order, for PsClient (and their
// gradients, zero-filled where a parameter got none). CPU models only.
std::vector<float*> ParameterData(const torch::jit::Module& model);
std::vector<float*> GradientData(const torch::jit::Module& model);

// HostParameters: the host memory a worker's PsClient pulls parameters into and pushes
// gradients from, in registration order. For a model on the CPU that is the tensors' own
// storage (no copy: the wire reads into them and writes from them). For a model on a GPU,
// pinned host tensors: ToModel() copies a pull to the device, Gradients() copies the
// gradients back. REQUIRES: the model outlives this and is not moved to another device.
class HostParameters {
 public:
  explicit HostParameters(const torch::jit::Module& model);
  // Where Pull writes (then ToModel) and Init reads (after FromModel).
  const std::vector<float*>& params() const { return param_data_; }
  void FromModel();  // the model's values into params(); nothing on the CPU
  void ToModel();    // params() into the model; nothing on the CPU
  // The model's gradients (zero where a parameter got none), on the host.
  std::vector<float*> Gradients();

 private:
  const torch::jit::Module& model_;
  bool on_host_ = true;
  std::vector<torch::Tensor> device_params_;
  std::vector<torch::Tensor> host_params_, host_grads_;  // GPU models only
  std::vector<float*> param_data_;
};

}  // namespace tarn::train
