// The models tarn-train knows by name, built in C++ as TorchScript modules (parameters
// registered on a torch::jit::Module, forward define()d), so they train here, save() as
// TorchScript, and load anywhere TorchScript loads (tarn-serve, Python's torch.jit.load)
// without Python having made them. Inputs are float32 [N, 1, 28, 28] pixels in [0, 1]; the
// normalisation lives inside the model (DESIGN.md's contract); outputs are logits [N, 10].
//
//   "mlp": 784-128-10, ReLU (101,770 parameters)
//   "cnn": conv3x3x32-maxpool2-conv3x3x64-maxpool2-fc128-fc10, ReLU (225,034 parameters)
//   "cnn_bn": conv3x3x16-bn-maxpool2-conv3x3x32-bn-maxpool2-conv3x3x32-bn-fc128-fc10, ReLU,
//          convolutions padded to keep the size (216,250 parameters; 160 buffer values, each
//          batch norm's running mean and variance). In training mode batch norm normalises
//          by the batch's statistics and updates the running ones; in eval mode (what is
//          exported and served) it uses the running ones. In a parameter-server cluster the
//          servers hold the parameters only: the running statistics are the chief's own
//          (from its shard, a uniform sample of the training set), checkpointed and
//          exported with the model; the other workers' are never used.
//
// Initialisation follows PyTorch's defaults for Linear and Conv2d (uniform in
// +-1/sqrt(fan_in)) from `seed`, so every process that builds the model with one seed
// holds the same parameters. Torch errors are caught here and returned as Status.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::train {

// The zoo's names, for help texts and errors.
const std::vector<std::string>& ZooModelNames();

StatusOr<torch::jit::Module> MakeZooModel(const std::string& name, uint64_t seed);

// `spec` is a zoo name or the path of a TorchScript file (torch.jit.save / Module::save).
StatusOr<torch::jit::Module> LoadModel(const std::string& spec, uint64_t seed);

// Sets the process's intra-op threads and whether TorchScript's graph executor optimises
// (profiles, differentiates symbolically, fuses). Measured on the CPU with the zoo's CNN
// (bench/run train): with it off, backward took 6.4 ms a step instead of 8.4, with the same
// losses; the optimiser pays off where fusion does (GPUs), hence --jit_optimize.
void SetUpTorch(int threads, bool jit_optimize);

// The device to train on: "cpu"; "cuda" (the first GPU the process sees, that is the first of
// CUDA_VISIBLE_DEVICES, which tarn sets to the instance's GPUs), an error when libtorch was
// built without CUDA or no GPU is visible; "auto": cuda when there is one, else cpu.
StatusOr<torch::Device> ChooseDevice(const std::string& want);

// The module's parameters, in registration order (the order optimisers and parameter
// servers rely on), with their names.
std::vector<std::pair<std::string, torch::Tensor>> NamedParameters(const torch::jit::Module& m);

// The module's buffers (state that is not trained by gradients: batch norm's running
// statistics), in registration order.
std::vector<std::pair<std::string, torch::Tensor>> NamedBuffers(const torch::jit::Module& m);
// All the buffers' values, one after another, as float32 on the host (integer buffers, such
// as a Python BatchNorm's num_batches_tracked, are exact up to 2^24), and back into the
// module (INVALID_ARGUMENT when the count differs). What a checkpoint keeps of them.
std::vector<float> BufferValues(const torch::jit::Module& m);
size_t BufferElements(const torch::jit::Module& m);
Status SetBufferValues(const torch::jit::Module& m, const std::vector<float>& values);

}  // namespace tarn::train
