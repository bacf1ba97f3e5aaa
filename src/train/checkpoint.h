// Checkpoints of a training cluster, written by its chief: <dir>/ckpt-<step>/ with
// state.bin (the parameters, then the optimiser's moment arrays: raw float32 in model order,
// one array after another, then the chief's model buffers, batch norm's running statistics)
// and meta.json (step, arrays, elements, buffers, the model and optimiser names, the chief's
// data position, and a CRC-32 of state.bin). A checkpoint is written to
// a hidden temporary directory, fsync'ed and renamed into place, so it exists whole or not
// at all; the newest is the one with the highest step. The newest `keep` are kept.
//
// Reading checks everything: a checkpoint whose meta.json is unreadable, whose state.bin
// has the wrong size or checksum, or that belongs to another model is an error naming it,
// never silently used. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::train {

struct Checkpoint {
  int64_t step = 0;
  std::string model;      // the --model it was trained as
  std::string optimizer;  // "adam" or "sgd": how many moment arrays follow the parameters
  int64_t epoch = 1;      // the chief's data position: the epoch it is in,
  int64_t position = 0;   // and the batches of it already done
  std::vector<std::vector<float>> arrays;  // [0] parameters, then the moments
  // The model's buffers (BufferValues in model_zoo.h): what the parameter servers do not
  // hold. Empty for models without any, and in checkpoints written before buffers were.
  std::vector<float> buffers;
};

Status WriteCheckpoint(const std::string& dir, const Checkpoint& checkpoint, int keep = 3);

// The newest checkpoint under `dir`; NOT_FOUND when there is none.
StatusOr<Checkpoint> ReadLatestCheckpoint(const std::string& dir);

// The newest checkpoint under `dir` if it is one of `model` trained with `optimizer`
// ("adam" or "sgd"), `elements` parameters and `buffer_elements` buffer values; NOT_FOUND
// when there is none (or `dir` is ""), FAILED_PRECONDITION naming what differs when the
// newest is of something else.
StatusOr<Checkpoint> ReadResumableCheckpoint(const std::string& dir, const std::string& model,
                                             const std::string& optimizer, size_t elements,
                                             size_t buffer_elements);

}  // namespace tarn::train
