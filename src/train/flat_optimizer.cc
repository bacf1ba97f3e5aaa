#include "train/flat_optimizer.h"

#include <cmath>

namespace tarn::train {

StatusOr<FlatOptimizer> FlatOptimizer::Create(const OptimizerOptions& o, size_t elements) {
  if (o.kind != "adam" && o.kind != "sgd") {
    return InvalidArgumentError("optimizer \"" + o.kind + "\": expected adam or sgd");
  }
  if (!(o.learning_rate > 0)) {
    return InvalidArgumentError("learning rate " + std::to_string(o.learning_rate) +
                                " is not positive");
  }
  if (o.decay_steps < 0 || !(o.decay_rate > 0)) {
    return InvalidArgumentError("learning-rate decay needs decay_steps >= 0 and a positive rate");
  }
  return FlatOptimizer(o, elements);
}

FlatOptimizer::FlatOptimizer(OptimizerOptions options, size_t elements)
    : options_(std::move(options)),
      m_(elements, 0.0f),
      v_(options_.kind == "adam" ? elements : 0, 0.0f) {}

double FlatOptimizer::LearningRate() const {
  if (options_.decay_steps <= 0) return options_.learning_rate;
  return options_.learning_rate *
         std::pow(options_.decay_rate,
                  static_cast<double>(steps_) / static_cast<double>(options_.decay_steps));
}

void FlatOptimizer::Apply(float* params, const float* g) {
  const float lr = static_cast<float>(LearningRate());
  ++steps_;
  // Local restrict pointers, so that the compiler needs no aliasing checks and vectorises
  // both loops (with -fno-math-errno for the sqrt, see CMakeLists.txt): the ps runs this
  // on every push, between a worker's push and its next pull.
  const size_t n = m_.size();
  float* __restrict p = params;
  const float* __restrict grad = g;
  float* __restrict m = m_.data();
  if (options_.kind == "sgd") {
    const float mu = static_cast<float>(options_.momentum);
    for (size_t i = 0; i < n; ++i) {
      m[i] = mu * m[i] + grad[i];
      p[i] -= lr * m[i];
    }
    return;
  }
  const float b1 = static_cast<float>(options_.beta1), b2 = static_cast<float>(options_.beta2);
  const float eps = static_cast<float>(options_.epsilon);
  const double t = static_cast<double>(steps_);
  const float correction1 = static_cast<float>(1.0 - std::pow(options_.beta1, t));
  const float correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(options_.beta2, t)));
  const float step_size = lr / correction1;
  float* __restrict v = v_.data();
  for (size_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1 - b1) * grad[i];
    v[i] = b2 * v[i] + (1 - b2) * grad[i] * grad[i];
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / correction2_sqrt + eps);
  }
}

}  // namespace tarn::train
