// The HTTP server and the REST routes together, over real loopback sockets, with a fake
// model (it multiplies its input by its version).
#include "serve/rest_api.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/temp_dir.h"

namespace tarn::serve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ScaleServable : public Servable {
 public:
  explicit ScaleServable(float f) : f_(f) {}
  StatusOr<Tensor> Run(const Tensor& input) override {
    // [N, 2] -> [N, 3]: (f*a, f*b, a+b)
    Tensor out;
    out.shape = {input.shape[0], 3};
    for (int64_t i = 0; i < input.shape[0]; ++i) {
      const float a = input.data[i * 2], b = input.data[i * 2 + 1];
      out.data.insert(out.data.end(), {f_ * a, f_ * b, a + b});
    }
    return out;
  }

 private:
  float f_;
};

class RestApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Export(1);
    ModelRepository::Options o;
    o.models.push_back(ModelConfig{"m", dir_.path(), {}, {{"stable", 1}}, std::nullopt});
    o.enable_batching = true;
    o.batching.max_batch_size = 4;
    o.batching.batch_timeout_micros = 100;
    o.loader = [](const std::string& dir, const ModelMeta&) -> StatusOr<std::unique_ptr<Servable>> {
      return std::unique_ptr<Servable>(
          new ScaleServable(static_cast<float>(std::stoi(fs::path(dir).filename().string()))));
    };
    o.poll_interval = std::chrono::milliseconds(0);
    o.on_batch = [this](const std::string& m, const BatchStats& s) { metrics_.ObserveBatch(m, s); };
    repository_ = ModelRepository::Create(std::move(o)).value();
    api_ = std::make_unique<RestApi>(*repository_, metrics_, "test");
    http::Server::Options h;
    h.listen.host = "127.0.0.1";
    h.listen.port = 0;
    h.max_body_bytes = 64 << 10;
    h.header_timeout = h.body_timeout = h.idle_timeout = std::chrono::milliseconds(2000);
    server_ = http::Server::Create(h, [this](http::Request r, http::Responder respond) {
                api_->Handle(std::move(r), respond);
              }).value();
    server_->Start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override {
    server_->Drain(std::chrono::milliseconds(2000));
    repository_.reset();
    server_.reset();
  }

  void Export(int version) {
    const std::string d = dir_.path() + "/" + std::to_string(version);
    fs::create_directories(d);
    std::ofstream(d + "/model.pt") << "fake";
    std::ofstream(d + "/meta.json") << R"({"input_shape": [2], "labels": ["a", "b", "c"]})";
  }

  std::pair<int, json> Post(const std::string& path, const std::string& body) {
    auto r = client_->Post(path, body, "application/json");
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  std::pair<int, json> Get(const std::string& path) {
    auto r = client_->Get(path);
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  TempDir dir_{"rest-api-test"};
  ServeMetrics metrics_;
  std::unique_ptr<ModelRepository> repository_;
  std::unique_ptr<RestApi> api_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(RestApiTest, TfServingStatusMetadataAndPredict) {
  auto [code, status] = Get("/v1/models/m");
  EXPECT_EQ(code, 200);
  EXPECT_EQ(status, json::parse(R"({"model_version_status": [{"version": "1",
      "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]})"));
  auto [mcode, meta] = Get("/v1/models/m/versions/1/metadata");
  EXPECT_EQ(mcode, 200);
  EXPECT_EQ(meta["model_spec"]["version"], "1");
  EXPECT_EQ(meta["metadata"]["signature_def"]["signature_def"]["serving_default"]["outputs"]
                ["logits"]["tensor_shape"]["dim"][1]["size"],
            "3");
  auto [pcode, predicted] = Post("/v1/models/m:predict", R"({"instances": [[1, 2], [3, 4]]})");
  EXPECT_EQ(pcode, 200);
  EXPECT_EQ(predicted, json::parse(R"({"predictions": [[1, 2, 3], [3, 4, 7]]})"));
  auto [lcode, labelled] = Post("/v1/models/m/labels/stable:predict",
                                R"({"inputs": [[1, 1]], "top_k": 1})");
  EXPECT_EQ(lcode, 200);
  EXPECT_EQ(labelled["outputs"], json::parse("[[1, 1, 2]]"));
  EXPECT_EQ(labelled["top_k"][0][0]["label"], "c");
}

TEST_F(RestApiTest, KServeV2) {
  EXPECT_EQ(Get("/v2/health/live").first, 200);
  EXPECT_EQ(Get("/v2/health/ready"), std::make_pair(200, json{{"ready", true}}));
  EXPECT_EQ(Get("/v2/models/m/ready").first, 200);
  EXPECT_EQ(Get("/v2/models/m/versions/9/ready").first, 503);
  auto [mcode, meta] = Get("/v2/models/m");
  EXPECT_EQ(mcode, 200);
  EXPECT_EQ(meta["versions"], json::parse(R"(["1"])"));
  EXPECT_EQ(meta["inputs"][0]["shape"], json::parse("[-1, 2]"));
  auto [code, out] = Post("/v2/models/m/versions/1/infer",
                          R"({"id": "q", "inputs": [{"name": "x", "shape": [1, 2],
                              "datatype": "FP32", "data": [5, 6]}]})");
  EXPECT_EQ(code, 200);
  EXPECT_EQ(out["id"], "q");
  EXPECT_EQ(out["outputs"][0]["data"], json::parse("[5, 6, 11]"));
}

TEST_F(RestApiTest, ErrorsGetTheRightStatusAndAMessage) {
  struct Case {
    std::string method, path, body;
    int code;
    const char* message;
  } cases[] = {
      {"GET", "/v1/models/nope", "", 404, "Could not find any versions of model nope"},
      {"POST", "/v1/models/nope:predict", R"({"instances": [[1, 2]]})", 404,
       "Servable not found for request: Latest(nope)"},
      {"POST", "/v1/models/m/versions/7:predict", R"({"instances": [[1, 2]]})", 404,
       "Specific(m, 7)"},
      {"POST", "/v1/models/m/versions/x:predict", "{}", 400, "version \"x\" is not a number"},
      {"POST", "/v1/models/m:predict", "{\"instances\": [", 400, "not valid JSON"},
      {"POST", "/v1/models/m:predict", R"({"instances": [[1, 2, 3]]})", 400,
       "shape [3] does not match the model's input [2]"},
      {"POST", "/v1/models/m:classify", "{}", 501, "use :predict"},
      {"GET", "/v1/models/m:predict", "", 405, "use POST"},
      {"GET", "/v3/anything", "", 404, "no route for /v3/anything"},
      {"POST", "/v2/models/m/infer", R"({"inputs": []})", 400, "must be a list of one tensor"},
  };
  for (const Case& c : cases) {
    auto r = c.method == "GET" ? client_->Get(c.path)
                               : client_->Post(c.path, c.body, "application/json");
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, c.code) << c.path << ": " << r->body;
    const json body = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(body.contains("error")) << r->body;
    EXPECT_NE(body["error"].get<std::string>().find(c.message), std::string::npos)
        << body["error"] << " lacks " << c.message;
  }
}

TEST_F(RestApiTest, AnOversizedBodyIs413AndTheServerGoesOn) {
  const std::string huge(200 << 10, ' ');
  auto r = client_->Post("/v1/models/m:predict", huge, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(r->body.find("over the limit"), std::string::npos);
  httplib::Client fresh("127.0.0.1", server_->port());
  auto ok = fresh.Post("/v1/models/m:predict", R"({"instances": [[1, 2]]})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(RestApiTest, MalformedHttpIs400) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(server_->port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string junk = "GARBAGE\x01 / HTTP/9\r\n\r\n";
  ASSERT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  std::string reply(4096, '\0');
  const ssize_t n = ::read(fd, reply.data(), reply.size());
  ::close(fd);
  ASSERT_GT(n, 0);
  reply.resize(static_cast<size_t>(n));
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
}

TEST_F(RestApiTest, ManyRequestsShareKeepAliveConnectionsAndAreCounted) {
  client_->set_keep_alive(true);
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(Post("/v1/models/m:predict", R"({"instances": [[1, 2]]})").first, 200);
  }
  auto r = client_->Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("tarn_serve_requests_total{api=\"predict\",model=\"m\",code=\"200\"} 50"),
            std::string::npos)
      << r->body;
  EXPECT_NE(r->body.find("tarn_serve_batch_size_count{model=\"m\"}"), std::string::npos);
  EXPECT_NE(r->body.find("tarn_serve_model_version_state{model=\"m\",version=\"1\","
                         "state=\"AVAILABLE\"} 1"),
            std::string::npos);
}

TEST_F(RestApiTest, ANewVersionIsServedAfterAPoll) {
  Export(2);
  repository_->PollOnce();
  auto [code, out] = Post("/v1/models/m:predict", R"({"instances": [[1, 2]]})");
  EXPECT_EQ(code, 200);
  EXPECT_EQ(out["predictions"], json::parse("[[2, 4, 3]]"));
  EXPECT_EQ(Post("/v1/models/m/labels/stable:predict", R"({"instances": [[1, 2]]})").first, 404);
}

}  // namespace
}  // namespace tarn::serve
