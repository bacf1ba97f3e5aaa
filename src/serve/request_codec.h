// The bodies of prediction requests and responses, in the two protocols tarn-serve speaks:
//
//  - TF Serving's REST predict API: {"instances": [...]} (row format, answered with
//    "predictions") or {"inputs": ...} (columnar, answered with "outputs"); an example may
//    be a nested list of numbers or {"b64": "<base64 PNG or JPEG>"}, and a row may name its
//    one input ({"x": [...]}). tarn's extension: "top_k": K adds, per example, the K most
//    probable classes with their labels from meta.json.
//  - KServe's v2 inference protocol: {"inputs": [{"name", "shape", "datatype", "data"}]}
//    with FP32, INT64 or UINT8 data, flat or nested; integer data are pixel values
//    0-255 and are scaled to [0, 1] as the models expect.
//
// One example must have the model's input shape ([C, H, W] from meta.json), or [H, W] when
// C is 1. Everything here parses outside input: errors are InvalidArgument Statuses that
// name the field ("instances[3]: ..."), never crashes. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "serve/model_meta.h"
#include "serve/tensor.h"

namespace tarn::serve {

struct PredictRequest {
  Tensor input;           // [N, ...example shape]
  bool columnar = false;  // TF Serving "inputs": answered with "outputs"
  int top_k = 0;          // tarn's extension; 0: none
  std::string id;         // KServe's request id, echoed
};

StatusOr<PredictRequest> ParsePredictRequest(std::string_view body, const ModelMeta& meta);
std::string FormatPredictResponse(const Tensor& output, const PredictRequest& request,
                                  const ModelMeta& meta);

StatusOr<PredictRequest> ParseInferRequest(std::string_view body, const ModelMeta& meta);
std::string FormatInferResponse(const Tensor& output, const PredictRequest& request,
                                const std::string& model, int64_t version);

// Appends `v` in the shortest form that reads back as the same float (null for NaN/inf,
// which JSON cannot carry).
void AppendJsonFloat(std::string& out, float v);

}  // namespace tarn::serve
