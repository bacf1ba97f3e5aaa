#include "train/shard_plan.h"

#include <algorithm>
#include <numeric>

namespace tarn::train {

ShardPlan PlanShards(const std::vector<int64_t>& param_elements, int servers, int64_t max_piece) {
  ShardPlan plan;
  servers = std::max(1, servers);
  plan.slices.resize(static_cast<size_t>(servers));
  plan.elements.assign(static_cast<size_t>(servers), 0);
  const int64_t total = std::accumulate(param_elements.begin(), param_elements.end(), int64_t{0});
  if (max_piece <= 0) max_piece = std::max<int64_t>(1, (total + 4 * servers - 1) / (4 * servers));
  std::vector<ParamSlice> pieces;
  for (size_t p = 0; p < param_elements.size(); ++p) {
    for (int64_t offset = 0; offset < param_elements[p]; offset += max_piece) {
      pieces.push_back(
          {static_cast<int>(p), offset, std::min(max_piece, param_elements[p] - offset)});
    }
  }
  // Largest first; equal sizes in model order, so the result depends on nothing else.
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const ParamSlice& a, const ParamSlice& b) { return a.count > b.count; });
  for (const ParamSlice& piece : pieces) {
    const auto least = std::min_element(plan.elements.begin(), plan.elements.end());
    const size_t s = static_cast<size_t>(least - plan.elements.begin());
    plan.slices[s].push_back(piece);
    plan.elements[s] += piece.count;
  }
  for (auto& list : plan.slices) {
    std::sort(list.begin(), list.end(), [](const ParamSlice& a, const ParamSlice& b) {
      return a.param != b.param ? a.param < b.param : a.offset < b.offset;
    });
  }
  return plan;
}

}  // namespace tarn::train
