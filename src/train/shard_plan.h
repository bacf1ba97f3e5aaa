// ShardPlan: which parameter server holds which part of which parameter. Every process of a
// training cluster computes the same plan from the model's parameter sizes and the number
// of parameter servers, so nothing about the layout ever travels: a pull or push carries
// only the floats, in plan order.
//
// Balanced by bytes: each parameter is cut into pieces of at most `max_piece` elements
// (large tensors are split), and the pieces go, largest first, to the server holding the
// fewest elements so far (ties: the lowest index). Each server's slices are then sorted by
// (parameter, offset). Pure and deterministic; thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

namespace tarn::train {

struct ParamSlice {
  int param = 0;       // index into the model's parameters, in registration order
  int64_t offset = 0;  // first element of the flattened parameter
  int64_t count = 0;   // elements
  friend bool operator==(const ParamSlice&, const ParamSlice&) = default;
};

struct ShardPlan {
  std::vector<std::vector<ParamSlice>> slices;  // per server, sorted by (param, offset)
  std::vector<int64_t> elements;                // per server: the sum of its slices' counts

  int servers() const { return static_cast<int>(slices.size()); }
};

// `param_elements`: each parameter's element count. `max_piece` <= 0 picks
// ceil(total / (4 * servers)), so that no server holds more than about a quarter of a
// fair share above it.
ShardPlan PlanShards(const std::vector<int64_t>& param_elements, int servers,
                     int64_t max_piece = 0);

}  // namespace tarn::train
