// Servable: one loaded model version that turns a batch of examples into outputs. The
// TorchScript implementation (torch_servable.h) is the real one; tests of everything around
// it use fakes, so that the repository, the batcher and the HTTP layer build without torch.
//
// Run is called from several batch threads at once and must be thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "serve/model_meta.h"
#include "serve/tensor.h"

namespace tarn::serve {

class Servable {
 public:
  virtual ~Servable() = default;
  // input: [N, ...example shape]; returns [N, ...].
  virtual StatusOr<Tensor> Run(const Tensor& input) = 0;
};

// Loads <version_dir>/model.pt; `meta` is the version's meta.json, already read.
using ServableLoader = std::function<StatusOr<std::unique_ptr<Servable>>(
    const std::string& version_dir, const ModelMeta& meta)>;

}  // namespace tarn::serve
