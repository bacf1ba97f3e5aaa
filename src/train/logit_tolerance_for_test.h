// Test-only: how far two computations of a zoo network's outputs may lie apart when they
// differ only in the order of their float32 sums (another batch size or chunking, another
// BLAS kernel or thread count, another process), and which predictions that can change.
// Tests compare logits and accuracies with these, never with the digits one CPU gives.
// Header-only.
#pragma once

#include <cmath>
#include <cstddef>

namespace tarn::train {

// Every output of the zoo networks comes through at most kLayers sums of at most kFanIn
// products (the CNN's first dense layer has 64 x 5 x 5 = 1,600 inputs). A float32 sum of n
// terms lies within n*u of the exact sum, relative to the sum of the terms' magnitudes
// (u = 2^-24), so two orders of summation differ by at most 2*n*u of it per layer. The scale
// taken here is the output's own magnitude plus 1 (an output near 0 is a sum of larger
// terms): 2 * 1,600 * 2^-24 * 4 = 7.6e-4 of (1 + |logit|).
inline double LogitTolerance(double logit) {
  constexpr double kUnitRoundoff = 0x1p-24;
  constexpr double kFanIn = 1600, kLayers = 4;
  return 2 * kFanIn * kUnitRoundoff * kLayers * (1 + std::abs(logit));
}

// Whether another order of summation could change the predicted class of these logits: the
// two largest are closer than their tolerances together.
inline bool AmbiguousPrediction(const float* logits, size_t classes) {
  size_t first = 0;
  for (size_t k = 1; k < classes; ++k) {
    if (logits[k] > logits[first]) first = k;
  }
  for (size_t k = 0; k < classes; ++k) {
    if (k != first &&
        logits[first] - logits[k] <= LogitTolerance(logits[first]) + LogitTolerance(logits[k])) {
      return true;
    }
  }
  return false;
}

}  // namespace tarn::train
