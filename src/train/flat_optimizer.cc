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
  const size_t n = m_.size();
  if (options_.kind == "sgd") {
    const float mu = static_cast<float>(options_.momentum);
    for (size_t i = 0; i < n; ++i) {
      m_[i] = mu * m_[i] + g[i];
      params[i] -= lr * m_[i];
    }
    return;
  }
  const float b1 = static_cast<float>(options_.beta1), b2 = static_cast<float>(options_.beta2);
  const float eps = static_cast<float>(options_.epsilon);
  const double t = static_cast<double>(steps_);
  const float correction1 = static_cast<float>(1.0 - std::pow(options_.beta1, t));
  const float correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(options_.beta2, t)));
  const float step_size = lr / correction1;
  for (size_t i = 0; i < n; ++i) {
    m_[i] = b1 * m_[i] + (1 - b1) * g[i];
    v_[i] = b2 * v_[i] + (1 - b2) * g[i] * g[i];
    params[i] -= step_size * m_[i] / (std::sqrt(v_[i]) / correction2_sqrt + eps);
  }
}

}  // namespace tarn::train
