// TorchServable: a TorchScript model version (model.pt) as a Servable. The only part of
// tarn-serve that includes torch. Loading runs the model once on a zero batch of the
// meta.json input shape, so that a version whose forward fails is reported at load, not at
// the first request, and the first request does not pay for warm-up.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "serve/servable.h"

namespace tarn::serve {

StatusOr<std::unique_ptr<Servable>> LoadTorchServable(const std::string& version_dir,
                                                      const ModelMeta& meta);

// at::set_num_threads: the intra-op threads each batch uses.
void SetTorchThreads(int threads);

}  // namespace tarn::serve
