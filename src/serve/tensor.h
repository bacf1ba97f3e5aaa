// Tensor: the dense float32 array tarn-serve moves between the HTTP layer, the batcher and
// the model. Row-major; shape[0] is the batch dimension wherever a batch is meant. A plain
// value type: no torch here, so everything but the model itself compiles and tests fast.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tarn::serve {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  // The product of shape (1 for a scalar).
  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // Elements per row: the product of shape[1:].
  int64_t RowElements() const {
    int64_t n = 1;
    for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
    return n;
  }
};

// "[1, 28, 28]"
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace tarn::serve
