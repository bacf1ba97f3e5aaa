#include "serve/request_codec.h"

#include <gtest/gtest.h>
#include <png.h>

#include <nlohmann/json.hpp>

#include "common/base64.h"

namespace tarn::serve {
namespace {

using nlohmann::json;

ModelMeta Image28() {
  ModelMeta m;
  m.input_shape = {1, 28, 28};
  m.labels = {"T-shirt/top", "Trouser", "Pullover"};
  return m;
}

// A 28 x 28 example as nested JSON lists, [1, 28, 28] or [28, 28], every pixel `v`.
json Example(float v, bool with_channel) {
  json rows = json::array();
  for (int i = 0; i < 28; ++i) rows.push_back(std::vector<float>(28, v));
  return with_channel ? json::array({rows}) : rows;
}

std::string GreyPng(int side, uint8_t value) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = side;
  image.height = side;
  image.format = PNG_FORMAT_GRAY;
  std::vector<uint8_t> pixels(side * side, value);
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data(), 0, nullptr);
  std::string out(size, '\0');
  png_image_write_to_memory(&image, out.data(), &size, 0, pixels.data(), 0, nullptr);
  out.resize(size);
  return out;
}

TEST(PredictRequestTest, RowFormatTakesExamplesInTheModelsShapeOrWithoutTheChannel) {
  json body = {{"instances", {Example(0.5f, true), Example(0.25f, false),
                              json{{"x", Example(1.0f, true)}}}}};
  auto r = ParsePredictRequest(body.dump(), Image28());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->columnar);
  EXPECT_EQ(r->input.shape, (std::vector<int64_t>{3, 1, 28, 28}));
  ASSERT_EQ(r->input.data.size(), 3u * 784);
  EXPECT_EQ(r->input.data[0], 0.5f);
  EXPECT_EQ(r->input.data[784], 0.25f);
  EXPECT_EQ(r->input.data[2 * 784 + 5], 1.0f);
}

TEST(PredictRequestTest, ColumnarFormatIsAnsweredWithOutputs) {
  json body = {{"inputs", {{"x", {Example(0.5f, true), Example(0.5f, true)}}}}};
  auto r = ParsePredictRequest(body.dump(), Image28());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->columnar);
  EXPECT_EQ(r->input.shape, (std::vector<int64_t>{2, 1, 28, 28}));
  Tensor out{{2, 3}, {1, 2, 3, 4, 5, 6}};
  json answer = json::parse(FormatPredictResponse(out, *r, Image28()));
  EXPECT_EQ(answer, json::parse(R"({"outputs": [[1, 2, 3], [4, 5, 6]]})"));
}

TEST(PredictRequestTest, ImagesAreDecodedAndFitted) {
  const std::string png = GreyPng(56, 51);  // 51/255 = 0.2, a dark background: not inverted
  json body = {{"instances", {{{"b64", Base64Encode(png)}}, Example(0.0f, true)}}};
  auto r = ParsePredictRequest(body.dump(), Image28());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->input.shape, (std::vector<int64_t>{2, 1, 28, 28}));
  EXPECT_NEAR(r->input.data[400], 0.2f, 1e-3);
  auto bad = ParsePredictRequest(R"({"instances": [{"b64": "aGVsbG8="}]})", Image28());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("instances[0]: image: not a PNG or JPEG"),
            std::string::npos)
      << bad.status().message();
}

TEST(PredictRequestTest, TopKNamesTheLabels) {
  auto r = ParsePredictRequest(json{{"instances", {Example(0, true)}}, {"top_k", 2}}.dump(),
                               Image28());
  ASSERT_TRUE(r.ok());
  Tensor out{{1, 3}, {0.0f, 2.0f, 1.0f}};
  json answer = json::parse(FormatPredictResponse(out, *r, Image28()));
  ASSERT_EQ(answer["top_k"][0].size(), 2u);
  EXPECT_EQ(answer["top_k"][0][0]["label"], "Trouser");
  EXPECT_EQ(answer["top_k"][0][0]["class"], 1);
  EXPECT_NEAR(answer["top_k"][0][0]["probability"].get<double>(), 0.6652, 1e-3);
  EXPECT_EQ(answer["top_k"][0][1]["label"], "Pullover");
  EXPECT_EQ(answer["predictions"][0].size(), 3u);
}

TEST(PredictRequestTest, BadBodiesNameWhatIsWrong) {
  struct Case {
    std::string body;
    const char* message;
  } cases[] = {
      {"{\"instances\": [", "request body: not valid JSON"},
      {"[1, 2]", "request body: not a JSON object"},
      {"{}", "needs exactly one of \"instances\""},
      {json{{"instances", {Example(0, true)}}, {"inputs", {Example(0, true)}}}.dump(),
       "needs exactly one of"},
      {R"({"instances": []})", "instances: must be a non-empty list"},
      {R"({"instances": [[1, 2, 3]]})",
       "instances[0]: shape [3] does not match the model's input [1, 28, 28] (or [28, 28])"},
      {R"({"instances": [[[1, 2], [3]]]})", "instances[0]: not rectangular"},
      {R"({"instances": [[[1], 2]]})", "instances[0]: not rectangular (a number where a list"},
      {R"({"instances": [[1, [2]]]})", "instances[0]: not rectangular (a list where a number"},
      {R"({"instances": [[0.5, 0.25,, 1]]})", "request body: not valid JSON at byte 27"},
      {R"({"instances": [["a"]]})", "instances[0]: \"a\" is not a number"},
      {json{{"instances", {json{{"x", Example(0, true)}, {"y", 1}}}}}.dump(),
       "instances[0]: names 2 inputs; the model takes one"},
      {json{{"instances", {Example(0, true)}}, {"top_k", -1}}.dump(), "top_k: -1 is not"},
      {json{{"instances", {Example(0, true)}}, {"signature_name", "other"}}.dump(),
       "signature_name: \"other\" is not a signature"},
      {R"({"instances": [[[[[[[[[[1]]]]]]]]]]})", "nested too deeply"},
  };
  for (const Case& c : cases) {
    auto r = ParsePredictRequest(c.body, Image28());
    ASSERT_FALSE(r.ok()) << c.body.substr(0, 80);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << r.status().message() << " lacks " << c.message;
  }
}

TEST(InferRequestTest, TakesFlatOrNestedDataAndScalesIntegerPixels) {
  std::vector<float> flat(2 * 784, 0.5f);
  json body = {{"id", "r1"},
               {"inputs",
                {{{"name", "x"}, {"shape", {2, 1, 28, 28}}, {"datatype", "FP32"}, {"data", flat}}}}};
  auto r = ParseInferRequest(body.dump(), Image28());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->input.shape, (std::vector<int64_t>{2, 1, 28, 28}));
  EXPECT_EQ(r->id, "r1");
  json pixels = {{"inputs",
                  {{{"name", "x"},
                    {"shape", {1, 28, 28}},
                    {"datatype", "UINT8"},
                    {"data", std::vector<std::vector<int>>(28, std::vector<int>(28, 255))}}}}};
  auto p = ParseInferRequest(pixels.dump(), Image28());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->input.shape, (std::vector<int64_t>{1, 1, 28, 28}));
  EXPECT_EQ(p->input.data[0], 1.0f);
  Tensor out{{1, 3}, {1, 2, 3}};
  json answer = json::parse(FormatInferResponse(out, *r, "fmnist", 7));
  EXPECT_EQ(answer["model_name"], "fmnist");
  EXPECT_EQ(answer["model_version"], "7");
  EXPECT_EQ(answer["id"], "r1");
  EXPECT_EQ(answer["outputs"][0]["shape"], json::parse("[1, 3]"));
  EXPECT_EQ(answer["outputs"][0]["data"], json::parse("[1, 2, 3]"));
}

TEST(InferRequestTest, BadBodiesNameWhatIsWrong) {
  auto input = [](json shape, json datatype, json data) {
    return json{{"inputs", {{{"name", "x"}, {"shape", shape}, {"datatype", datatype},
                             {"data", data}}}}}
        .dump();
  };
  struct Case {
    std::string body;
    const char* message;
  } cases[] = {
      {R"({"inputs": []})", "inputs: must be a list of one tensor"},
      {R"({"inputs": [{"name": "x", "shape": [1, 784], "datatype": "FP32"}]})",
       "inputs[0].data: missing"},
      {input({1, 784}, "FP32", std::vector<float>(784)),
       "inputs[0].shape: [1, 784] does not match"},
      {input({1, 1, 28, 28}, "FP32", std::vector<float>(783)), "783 values for shape"},
      {input({1, 1, 28, 28}, "BF16", std::vector<float>(784)), "\"BF16\" is not supported"},
      {input({1, 1, 28, 28}, "UINT8", std::vector<int>(784, 256)), "256 is not a pixel value"},
      {input({0, 1, 28, 28}, "FP32", json::array()), "the batch is empty"},
      {input({-1, 1, 28, 28}, "FP32", json::array()), "-1 is not a size"},
  };
  for (const Case& c : cases) {
    auto r = ParseInferRequest(c.body, Image28());
    ASSERT_FALSE(r.ok()) << c.body.substr(0, 80);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << r.status().message() << " lacks " << c.message;
  }
}

TEST(JsonFloatTest, ShortestRoundTripAndNullForNonFinite) {
  std::string out;
  AppendJsonFloat(out, 0.1f);
  out += ",";
  AppendJsonFloat(out, -3.0f);
  out += ",";
  AppendJsonFloat(out, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(out, "0.1,-3,null");
}

}  // namespace
}  // namespace tarn::serve
