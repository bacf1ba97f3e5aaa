#include "serve/request_codec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "common/base64.h"
#include "serve/image_decode.h"
#include "serve/json_reader.h"

namespace tarn::serve {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 8;
constexpr int64_t kMaxElements = 64 << 20;

StatusOr<JsonDocument> ParseBody(std::string_view body) {
  auto d = ParseJson(body);
  if (!d.ok()) return InvalidArgumentError("request body: " + d.status().message());
  if (!d->root().is_object()) return InvalidArgumentError("request body: not a JSON object");
  return d;
}

// Scales integer pixels (0-255) to [0, 1].
enum class Scale { kNone, kPixels };

// Appends the number `v` at `depth` of a nested list to `out`, or says why it is none.
Status AppendNumber(const Json& v, int depth, Scale scale, const std::vector<int64_t>& shape,
                    std::vector<float>& out, const std::string& where) {
  if (static_cast<size_t>(depth) != shape.size()) {
    return InvalidArgumentError(where + ": not rectangular (a number where a list belongs)");
  }
  if (!v.is_number()) {
    return InvalidArgumentError(where + ": " + v.dump().substr(0, 40) + " is not a number");
  }
  if (static_cast<int64_t>(out.size()) >= kMaxElements) {
    return InvalidArgumentError(where + ": more than " + std::to_string(kMaxElements) +
                                " numbers");
  }
  if (scale == Scale::kPixels) {
    if (!v.is_number_integer() || v.integer() < 0 || v.integer() > 255) {
      return InvalidArgumentError(where + ": " + v.dump().substr(0, 40) +
                                  " is not a pixel value 0-255");
    }
    out.push_back(static_cast<float>(v.integer()) / 255.0f);
  } else {
    out.push_back(static_cast<float>(v.number()));
  }
  return OkStatus();
}

// FlattenList's work at `depth`; `first`: where this list's numbers begin in `out`.
Status FlattenAt(const Json& v, int depth, Scale scale, std::vector<int64_t>& shape,
                 std::vector<float>& out, size_t first, const std::string& where) {
  if (!v.is_array()) return AppendNumber(v, depth, scale, shape, out, where);
  if (depth >= kMaxDepth) return InvalidArgumentError(where + ": nested too deeply");
  if (static_cast<size_t>(depth) == shape.size()) {
    // A new innermost dimension, after numbers one level up ([1, [2]]): not rectangular.
    if (out.size() != first) {
      return InvalidArgumentError(where + ": not rectangular (a list where a number belongs)");
    }
    shape.push_back(static_cast<int64_t>(v.size()));
  } else if (shape[depth] != static_cast<int64_t>(v.size())) {
    return InvalidArgumentError(where + ": not rectangular (a list of " + std::to_string(v.size()) +
                                " where others have " + std::to_string(shape[depth]) + ")");
  }
  // The innermost lists' numbers, most of a body, without a call each: a float where the
  // shape has its innermost dimension here, anything else through the checks above.
  for (const Json e : v.elements()) {
    // (Asked each time: a list met before a number here makes the shape deeper.)
    const bool innermost = static_cast<size_t>(depth) + 1 == shape.size();
    if (innermost && scale == Scale::kNone && e.is_number() &&
        static_cast<int64_t>(out.size()) < kMaxElements) {
      out.push_back(static_cast<float>(e.number()));
      continue;
    }
    RETURN_IF_ERROR(FlattenAt(e, depth + 1, scale, shape, out, first, where));
  }
  return OkStatus();
}

// Appends the numbers of a nested list to `out`, checking that it is rectangular; `shape`
// (empty) receives the dimensions found.
Status Flatten(const Json& v, Scale scale, std::vector<int64_t>& shape, std::vector<float>& out,
               const std::string& where) {
  return FlattenAt(v, 0, scale, shape, out, out.size(), where);
}

bool SameShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b, size_t skip_a) {
  return a.size() == b.size() + skip_a && std::equal(b.begin(), b.end(), a.begin() + skip_a);
}

// Whether `example` (without the batch dimension) fits the model's input; [H, W] fits
// [1, H, W].
bool FitsInput(const std::vector<int64_t>& example, const ModelMeta& meta) {
  if (meta.input_shape.empty()) return true;
  if (example == meta.input_shape) return true;
  return meta.input_shape.size() == 3 && meta.input_shape[0] == 1 &&
         SameShape(example, {meta.input_shape[1], meta.input_shape[2]}, 0);
}

std::string InputShapeText(const ModelMeta& meta) {
  std::string s = ShapeString(meta.input_shape);
  if (meta.input_shape.size() == 3 && meta.input_shape[0] == 1) {
    s += " (or " + ShapeString({meta.input_shape[1], meta.input_shape[2]}) + ")";
  }
  return s;
}

bool IsBinary(const Json& v) { return v.is_object() && v.size() == 1 && v.contains("b64"); }

// A {"b64": ...} value: a PNG or JPEG fitted to the model's [C, H, W].
Status DecodeBinary(const Json& v, const ModelMeta& meta, std::vector<float>& out,
                    const std::string& where) {
  const Json text = *v.find("b64");
  if (!text.is_string()) return InvalidArgumentError(where + ".b64: not a string");
  if (meta.input_shape.size() != 3 ||
      (meta.input_shape[0] != 1 && meta.input_shape[0] != 3)) {
    return InvalidArgumentError(where +
                                ": binary (b64) inputs need a model whose meta.json gives an "
                                "image input_shape [1 or 3, H, W]");
  }
  auto bytes = Base64Decode(text.str());
  if (!bytes.ok()) return InvalidArgumentError(where + ".b64: " + bytes.status().message());
  auto pixels = DecodeImage(*bytes, static_cast<int>(meta.input_shape[0]),
                            static_cast<int>(meta.input_shape[1]),
                            static_cast<int>(meta.input_shape[2]));
  if (!pixels.ok()) return InvalidArgumentError(where + ": " + pixels.status().message());
  out.insert(out.end(), pixels->begin(), pixels->end());
  return OkStatus();
}

// One example (row format): numbers or an image, appended to `batch`.
Status AddExample(const Json& v, const ModelMeta& meta, Tensor& batch, const std::string& where) {
  if (IsBinary(v)) {
    RETURN_IF_ERROR(DecodeBinary(v, meta, batch.data, where));
    if (batch.shape.empty()) batch.shape = {0, meta.input_shape[0], meta.input_shape[1],
                                            meta.input_shape[2]};
    if (!SameShape(batch.shape, meta.input_shape, 1)) {
      return InvalidArgumentError(where + ": an image among examples of shape " +
                                  ShapeString({batch.shape.begin() + 1, batch.shape.end()}));
    }
    ++batch.shape[0];
    return OkStatus();
  }
  std::vector<int64_t> shape;
  const size_t before = batch.data.size();
  RETURN_IF_ERROR(Flatten(v, Scale::kNone, shape, batch.data, where));
  if (!FitsInput(shape, meta)) {
    return InvalidArgumentError(where + ": shape " + ShapeString(shape) +
                                " does not match the model's input " + InputShapeText(meta));
  }
  if (batch.data.size() == before) {
    return InvalidArgumentError(where + ": an example without values");
  }
  // Examples are stored in the model's own shape, so [H, W] rows become [1, H, W].
  const std::vector<int64_t> example = meta.input_shape.empty() ? shape : meta.input_shape;
  if (batch.shape.empty()) {
    batch.shape.push_back(0);
    batch.shape.insert(batch.shape.end(), example.begin(), example.end());
  } else if (!SameShape(batch.shape, example, 1)) {
    return InvalidArgumentError(where + ": shape " + ShapeString(shape) +
                                " differs from the first example's " +
                                ShapeString({batch.shape.begin() + 1, batch.shape.end()}));
  }
  ++batch.shape[0];
  return OkStatus();
}

// A row's value: the example itself, or {"name": example} for a model's one named input.
StatusOr<Json> Unname(const Json& v, const std::string& where) {
  if (!v.is_object() || IsBinary(v)) return v;
  if (v.size() != 1) {
    return InvalidArgumentError(where + ": names " + std::to_string(v.size()) +
                                " inputs; the model takes one");
  }
  return (*v.members().begin()).second;
}

StatusOr<int> ParseTopK(const Json& j, const ModelMeta& meta) {
  const std::optional<Json> k = j.find("top_k");
  if (!k) return 0;
  if (!k->is_number_integer() || k->integer() < 0 || k->integer() > 1000) {
    return InvalidArgumentError("top_k: " + k->dump().substr(0, 40) +
                                " is not an integer in [0, 1000]");
  }
  if (meta.labels.empty() && k->integer() > 0) {
    return InvalidArgumentError("top_k: the model's meta.json has no labels");
  }
  return static_cast<int>(k->integer());
}

void AppendRow(std::string& out, const float* row, int64_t n) {
  out.push_back('[');
  for (int64_t i = 0; i < n; ++i) {
    if (i) out.push_back(',');
    AppendJsonFloat(out, row[i]);
  }
  out.push_back(']');
}

// Nested JSON lists for `t`'s dimensions from `dim` on.
void AppendNested(std::string& out, const Tensor& t, size_t dim, int64_t& offset) {
  if (dim + 1 >= t.shape.size()) {
    const int64_t n = t.shape.empty() ? 1 : t.shape.back();
    AppendRow(out, t.data.data() + offset, n);
    offset += n;
    return;
  }
  out.push_back('[');
  for (int64_t i = 0; i < t.shape[dim]; ++i) {
    if (i) out.push_back(',');
    AppendNested(out, t, dim + 1, offset);
  }
  out.push_back(']');
}

void AppendTopK(std::string& out, const Tensor& output, int k, const ModelMeta& meta) {
  const int64_t rows = output.shape.empty() ? 0 : output.shape[0];
  const int64_t n = output.RowElements();
  out += ",\"top_k\":[";
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = output.data.data() + r * n;
    // Softmax probabilities, computed stably.
    const float peak = n > 0 ? *std::max_element(row, row + n) : 0.0f;
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += std::exp(static_cast<double>(row[i] - peak));
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const int64_t take = std::min<int64_t>(k, n);
    std::partial_sort(order.begin(), order.begin() + take, order.end(),
                      [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    out += r ? ",[" : "[";
    for (int64_t i = 0; i < take; ++i) {
      const int64_t c = order[static_cast<size_t>(i)];
      out += i ? ",{\"class\":" : "{\"class\":";
      out += std::to_string(c);
      out += ",\"label\":";
      out += json(c < static_cast<int64_t>(meta.labels.size()) ? meta.labels[c] : "").dump();
      out += ",\"probability\":";
      AppendJsonFloat(out,
                      static_cast<float>(std::exp(static_cast<double>(row[c] - peak)) / total));
      out.push_back('}');
    }
    out.push_back(']');
  }
  out.push_back(']');
}

}  // namespace

void AppendJsonFloat(std::string& out, float v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, ec == std::errc() ? end : buf);
}

StatusOr<PredictRequest> ParsePredictRequest(std::string_view body, const ModelMeta& meta) {
  ASSIGN_OR_RETURN(const JsonDocument doc, ParseBody(body));
  const Json j = doc.root();
  PredictRequest r;
  ASSIGN_OR_RETURN(r.top_k, ParseTopK(j, meta));
  if (const std::optional<Json> s = j.find("signature_name")) {
    if (!s->is_string() || (s->str() != "serving_default" && !s->str().empty())) {
      return InvalidArgumentError("signature_name: " + s->dump().substr(0, 80) +
                                  " is not a signature of this model (it has serving_default)");
    }
  }
  const bool has_instances = j.contains("instances");
  const bool has_inputs = j.contains("inputs");
  if (has_instances == has_inputs) {
    return InvalidArgumentError(
        "request body: needs exactly one of \"instances\" (row format) or \"inputs\" "
        "(columnar format)");
  }
  if (has_instances) {
    const Json instances = *j.find("instances");
    if (!instances.is_array() || instances.empty()) {
      return InvalidArgumentError("instances: must be a non-empty list of examples");
    }
    size_t i = 0;
    for (const Json instance : instances.elements()) {
      const std::string where = "instances[" + std::to_string(i++) + "]";
      ASSIGN_OR_RETURN(const Json example, Unname(instance, where));
      RETURN_IF_ERROR(AddExample(example, meta, r.input, where));
      if (i == 1) {  // room for the others, now that an example's size is known
        r.input.data.reserve(std::min<size_t>(instances.size() * r.input.data.size(),
                                              static_cast<size_t>(kMaxElements)));
      }
    }
    return r;
  }
  r.columnar = true;
  ASSIGN_OR_RETURN(const Json inputs, Unname(*j.find("inputs"), "inputs"));
  if (!inputs.is_array() || inputs.empty()) {
    return InvalidArgumentError("inputs: must be a non-empty list (the batch) of examples");
  }
  size_t i = 0;
  for (const Json example : inputs.elements()) {
    RETURN_IF_ERROR(AddExample(example, meta, r.input, "inputs[" + std::to_string(i++) + "]"));
  }
  return r;
}

std::string FormatPredictResponse(const Tensor& output, const PredictRequest& request,
                                  const ModelMeta& meta) {
  std::string out = request.columnar ? "{\"outputs\":" : "{\"predictions\":";
  out.reserve(output.data.size() * 12 + 64);
  int64_t offset = 0;
  if (output.shape.size() <= 1) {
    AppendRow(out, output.data.data(), static_cast<int64_t>(output.data.size()));
  } else {
    AppendNested(out, output, 0, offset);
  }
  if (request.top_k > 0) AppendTopK(out, output, request.top_k, meta);
  out.push_back('}');
  return out;
}

StatusOr<PredictRequest> ParseInferRequest(std::string_view body, const ModelMeta& meta) {
  ASSIGN_OR_RETURN(const JsonDocument doc, ParseBody(body));
  const Json j = doc.root();
  PredictRequest r;
  if (const std::optional<Json> id = j.find("id")) {
    if (!id->is_string()) return InvalidArgumentError("id: not a string");
    r.id = std::string(id->str());
  }
  const std::optional<Json> inputs = j.find("inputs");
  if (!inputs || !inputs->is_array() || inputs->size() != 1) {
    return InvalidArgumentError("inputs: must be a list of one tensor (the model has one input)");
  }
  const Json in = *inputs->elements().begin();
  if (!in.is_object()) return InvalidArgumentError("inputs[0]: not an object");
  for (const char* field : {"name", "shape", "datatype", "data"}) {
    if (!in.contains(field)) {
      return InvalidArgumentError(std::string("inputs[0].") + field + ": missing");
    }
  }
  if (!in.find("name")->is_string()) return InvalidArgumentError("inputs[0].name: not a string");
  const Json shape = *in.find("shape");
  if (!shape.is_array() || shape.size() < 2 || shape.size() > 5) {
    return InvalidArgumentError("inputs[0].shape: must list the batch size and the example's "
                                "dimensions, e.g. [1, 1, 28, 28]");
  }
  std::vector<int64_t> dims;
  int64_t elements = 1;
  for (const Json d : shape.elements()) {
    if (!d.is_number_integer() || d.integer() < 0 || d.integer() > kMaxElements) {
      return InvalidArgumentError("inputs[0].shape: " + d.dump().substr(0, 40) + " is not a size");
    }
    dims.push_back(d.integer());
    elements *= dims.back();
    if (elements > kMaxElements) return InvalidArgumentError("inputs[0].shape: too large");
  }
  const std::vector<int64_t> example(dims.begin() + 1, dims.end());
  if (!FitsInput(example, meta)) {
    return InvalidArgumentError("inputs[0].shape: " + ShapeString(dims) +
                                " does not match the model's input [N] + " + InputShapeText(meta));
  }
  if (dims[0] == 0) return InvalidArgumentError("inputs[0].shape: the batch is empty");
  const Json datatype = *in.find("datatype");
  const std::string type(datatype.str());
  Scale scale;
  if (type == "FP32") {
    scale = Scale::kNone;
  } else if (type == "UINT8" || type == "INT64") {
    scale = Scale::kPixels;
  } else {
    return InvalidArgumentError("inputs[0].datatype: " + datatype.dump().substr(0, 40) +
                                " is not supported (FP32, or UINT8/INT64 pixel values 0-255)");
  }
  std::vector<int64_t> data_shape;
  RETURN_IF_ERROR(Flatten(*in.find("data"), scale, data_shape, r.input.data, "inputs[0].data"));
  if (static_cast<int64_t>(r.input.data.size()) != elements) {
    return InvalidArgumentError("inputs[0].data: " + std::to_string(r.input.data.size()) +
                                " values for shape " + ShapeString(dims) + " (" +
                                std::to_string(elements) + " values)");
  }
  r.input.shape = {dims[0]};
  const std::vector<int64_t>& model_example = meta.input_shape.empty() ? example : meta.input_shape;
  r.input.shape.insert(r.input.shape.end(), model_example.begin(), model_example.end());
  return r;
}

std::string FormatInferResponse(const Tensor& output, const PredictRequest& request,
                                const std::string& model, int64_t version) {
  std::string out = "{\"model_name\":" + json(model).dump() + ",\"model_version\":\"" +
                    std::to_string(version) + "\"";
  if (!request.id.empty()) out += ",\"id\":" + json(request.id).dump();
  out += ",\"outputs\":[{\"name\":\"logits\",\"datatype\":\"FP32\",\"shape\":[";
  for (size_t i = 0; i < output.shape.size(); ++i) {
    if (i) out.push_back(',');
    out += std::to_string(output.shape[i]);
  }
  out += "],\"data\":";
  out.reserve(out.size() + output.data.size() * 12 + 8);
  AppendRow(out, output.data.data(), static_cast<int64_t>(output.data.size()));
  out += "}]}";
  return out;
}

}  // namespace tarn::serve
