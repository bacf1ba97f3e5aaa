// Batches of an ImageSet as tensors, and evaluation: what the local trainer and the
// distributed worker share. Inputs are float32 [n, 1, rows, cols] in [0, 1] (DESIGN.md's
// contract); labels int64 [n]. Thread-compatible.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <vector>

#include "train/idx.h"

namespace tarn::train {

torch::Tensor ImageBatch(const ImageSet& set, const std::vector<int64_t>& order, size_t begin,
                         size_t end);
torch::Tensor LabelBatch(const ImageSet& set, const std::vector<int64_t>& order, size_t begin,
                         size_t end);

// Top-1 accuracy of `model` on all of `set`, in batches of 1,000, without gradients.
double Evaluate(torch::jit::Module& model, const ImageSet& set);

// The parameters' float32 storage, in registration order, for PsClient (and their
// gradients, zero-filled where a parameter got none).
std::vector<float*> ParameterData(const torch::jit::Module& model);
std::vector<float*> GradientData(const torch::jit::Module& model);

}  // namespace tarn::train
