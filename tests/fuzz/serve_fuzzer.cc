// libFuzzer target for the parsers of tarn-serve that take outside input: the bodies of
// TF Serving predict and KServe infer requests, PNG/JPEG images, and the model config,
// batching and meta.json files. The first byte chooses the parser; the rest is its input.
// Beyond "no crash, no sanitizer report" it checks the parsers' contracts: tarn-serve's JSON
// reader agrees with nlohmann::json; a parsed request's tensor holds exactly shape's product
// of values, in the model's example shape; a response built from it is valid JSON; a decoded
// image has C x H x W values in [0, 1].
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string_view>

#include "serve/image_decode.h"
#include "serve/json_reader.h"
#include "serve/model_meta.h"
#include "serve/request_codec.h"
#include "serve/serve_config.h"

namespace {

using namespace tarn::serve;

void Require(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "serve_fuzzer: contract broken: " << what << "\n";
    std::abort();
  }
}

const ModelMeta& Meta() {
  static const ModelMeta meta = [] {
    ModelMeta m;
    m.input_shape = {1, 28, 28};
    m.labels = {"a", "b", "c"};
    return m;
  }();
  return meta;
}

// tarn-serve's JSON reader (simdjson) against nlohmann::json: the same texts accepted, the
// same values read. Skipped where they differ by design: nesting beyond kMaxJsonDepth (an
// error there only), integers of 19 digits or more (beyond uint64 an error there, a double
// in nlohmann), and NUL bytes (nlohmann stops reading at the first one; there they are an
// error).
void CheckJsonReader(std::string_view text) {
  size_t opens = 0, digits = 0, longest = 0;
  for (char c : text) {
    opens += c == '[' || c == '{';
    digits = (c >= '0' && c <= '9') ? digits + 1 : 0;
    longest = std::max(longest, digits);
  }
  if (opens > static_cast<size_t>(kMaxJsonDepth) || longest >= 19 ||
      text.find('\0') != std::string_view::npos) {
    return;
  }
  auto mine = ParseJson(text);
  const auto theirs = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  Require(mine.ok() == !theirs.is_discarded(), "the JSON reader accepts what nlohmann accepts");
  if (mine.ok()) {
    Require(nlohmann::json::parse(mine->root().dump()) == theirs,
            "the JSON reader reads the same values");
  }
}

void CheckRequest(const tarn::StatusOr<PredictRequest>& r, bool v2) {
  if (!r.ok()) {
    Require(r.status().code() == tarn::StatusCode::kInvalidArgument, "errors are InvalidArgument");
    return;
  }
  const Tensor& in = r->input;
  Require(in.shape.size() == 4 && in.shape[0] >= 1 && in.shape[1] == 1 && in.shape[2] == 28 &&
              in.shape[3] == 28,
          "examples have the model's shape");
  Require(static_cast<int64_t>(in.data.size()) == in.NumElements(), "data fills the shape");
  Tensor out;
  out.shape = {in.shape[0], 3};
  out.data.assign(static_cast<size_t>(in.shape[0] * 3), 0.5f);
  const std::string body =
      v2 ? FormatInferResponse(out, *r, "m", 1) : FormatPredictResponse(out, *r, Meta());
  Require(!nlohmann::json::parse(body, nullptr, false).is_discarded(), "responses are JSON");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      CheckJsonReader(input);
      CheckRequest(ParsePredictRequest(input, Meta()), false);
      break;
    case 1:
      CheckJsonReader(input);
      CheckRequest(ParseInferRequest(input, Meta()), true);
      break;
    case 2: {
      const int channels = input.size() % 2 ? 3 : 1;
      auto pixels = DecodeImage(input, channels, 28, 28);
      if (pixels.ok()) {
        Require(pixels->size() == static_cast<size_t>(channels * 28 * 28), "C x H x W values");
        for (float v : *pixels) Require(v >= 0.0f && v <= 1.0f, "pixels in [0, 1]");
      } else {
        Require(pixels.status().code() == tarn::StatusCode::kInvalidArgument ||
                    pixels.status().code() == tarn::StatusCode::kInternal,
                "image errors are InvalidArgument");
      }
      break;
    }
    case 3: {
      const std::string text(input);
      (void)ParseModelConfigList(text, "models.json");
      (void)ParseBatchingParameters(text, "batching.json");
      (void)ParseModelMeta(text, "meta.json");
      break;
    }
  }
  return 0;
}
