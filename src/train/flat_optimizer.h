// FlatOptimizer: the optimiser a parameter server applies to its share of the parameters,
// one flat float32 array, element by element: SGD with momentum (PyTorch's form:
// v = momentum * v + g; p -= lr * v) or Adam (with bias correction, as torch.optim.Adam),
// and an exponentially decaying learning rate, lr * decay_rate ^ (step / decay_steps).
// Its state (moments, step) is part of a checkpoint. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::train {

struct OptimizerOptions {
  std::string kind = "adam";  // "adam" or "sgd"
  double learning_rate = 1e-3;
  double momentum = 0.9;                              // sgd
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;  // adam
  int64_t decay_steps = 0;                            // 0: a constant learning rate
  double decay_rate = 1.0;
};

class FlatOptimizer {
 public:
  // INVALID_ARGUMENT for an unknown kind or a learning rate that is not positive.
  static StatusOr<FlatOptimizer> Create(const OptimizerOptions& options, size_t elements);

  // One update of `params` with `gradient` (both `elements` long); counts a step.
  void Apply(float* params, const float* gradient);

  double LearningRate() const;  // for the step about to be applied
  int64_t steps() const { return steps_; }

  // Checkpoint state: the steps taken and the moment arrays (SGD: the momentum buffer;
  // Adam: the first and second moments), each as long as the parameters.
  int moment_arrays() const { return v_.empty() ? 1 : 2; }
  float* moment(int i) { return i == 0 ? m_.data() : v_.data(); }
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  FlatOptimizer(OptimizerOptions options, size_t elements);
  OptimizerOptions options_;
  std::vector<float> m_, v_;  // sgd: m_ is the momentum buffer; v_ unused
  int64_t steps_ = 0;
};

}  // namespace tarn::train
