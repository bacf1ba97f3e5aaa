// Exported model versions, as tarn-serve (and TF Serving) read them:
// <base>/<model_name>/<version>/model.pt (TorchScript) and meta.json. A version appears
// whole or not at all: it is written into a hidden temporary directory beside it, fsync'ed,
// and renamed into place; the parent is fsync'ed after the rename. Versions are the
// integers 1, 2, ... (the next is one above the highest present). Thread-compatible; one
// exporting process per model.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "train/local_trainer.h"

namespace tarn::train {

// The highest version under <base>/<model_name>, 0 when there is none.
int64_t LatestVersion(const std::string& base, const std::string& model_name);

// Saves `module` and `meta` (written as meta.json, with "version" added) as the next
// version and returns it; then removes all but the newest `keep` versions (keep <= 0: none
// removed), as TF's exporters keep their last few.
StatusOr<int64_t> ExportVersion(torch::jit::Module& module, const std::string& base,
                                const std::string& model_name, nlohmann::json meta, int keep = 5);

// Exports a model trained as `o` says (export_base, model_name, keep_versions) on images of
// rows x cols, with its meta.json (model, input shape, dtype, labels, accuracy, step and,
// when > 0, epoch), logs "exported <path>" through o.log and returns the version.
StatusOr<int64_t> ExportTrainedModel(torch::jit::Module& model, const LocalTrainingOptions& o,
                                     int64_t rows, int64_t cols, double accuracy, int64_t step,
                                     int64_t epoch = 0);

}  // namespace tarn::train
