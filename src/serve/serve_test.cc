// tarn-serve as a process, serving versions that tarn-train's exporter wrote, judged by an
// independent reference (Python's torch.jit.load), with versions swapped under load.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/file.h"
#include "common/subprocess.h"
#include "common/temp_dir.h"
#include "common/test_process.h"
#include "http/raw_client_for_test.h"
#include "train/idx.h"
#include "train/logit_tolerance_for_test.h"
#include "train/model_export.h"
#include "train/model_zoo.h"

namespace tarn::serve {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kData = "/usr/share/datasets/fashion-mnist";

// Exports zoo model `name` (initialised from `seed`) as the next version of "fmnist".
int64_t Export(const std::string& base, uint64_t seed, const std::string& name = "cnn") {
  auto model = train::MakeZooModel(name, seed);
  EXPECT_TRUE(model.ok());
  json meta = {{"model", name},
               {"input_shape", {1, 28, 28}},
               {"dtype", "float32"},
               {"labels", train::FashionMnistLabels()},
               {"step", 0}};
  auto v = train::ExportVersion(*model, base, "fmnist", meta);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.value_or(0);
}

// As Export, with the test accuracy the trainer would have recorded in meta.json.
int64_t ExportAt(const std::string& base, uint64_t seed, double accuracy) {
  auto model = train::MakeZooModel("mlp", seed);
  EXPECT_TRUE(model.ok());
  json meta = {{"model", "mlp"},     {"input_shape", {1, 28, 28}},
               {"dtype", "float32"}, {"labels", train::FashionMnistLabels()},
               {"step", 0},          {"accuracy", accuracy}};
  auto v = train::ExportVersion(*model, base, "fmnist", meta);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.value_or(0);
}

class ServeTest : public ::testing::Test {
 protected:
  // tarn-serve on fmnist's base path, or with `extra` alone when it names a config file.
  void Start(std::vector<std::string> extra = {}) {
    port_ = FreeLoopbackPort();
    std::vector<std::string> args = {TARN_SERVE_BINARY, "--rest_api_host=127.0.0.1",
                                     "--rest_api_port=" + std::to_string(port_)};
    if (extra.empty() || extra[0].rfind("--model_config_file", 0) != 0) {
      args.push_back("--model_name=fmnist");
      args.push_back("--model_base_path=" + dir_.path() + "/fmnist");
    }
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = std::make_unique<BackgroundProcess>(args, Log());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(30, 0);
    for (int i = 0; i < 600; ++i) {
      auto r = client_->Get("/v2/health/ready");
      if (r && r->status == 200) return;
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "tarn-serve did not become ready: " << ReadFileToString(Log()).value_or("");
  }

  std::string Log() const { return dir_.path() + "/serve.log"; }

  // The first `n` test images, as [1, 28, 28] examples in [0, 1].
  std::vector<std::vector<float>> Images(int n) {
    auto set = train::ReadImageSet(kData, "t10k");
    EXPECT_TRUE(set.ok()) << set.status().ToString();
    std::vector<std::vector<float>> out;
    for (int i = 0; i < n && set.ok(); ++i) {
      std::vector<float> image(784);
      for (int p = 0; p < 784; ++p) image[p] = set->pixels[i * 784 + p] / 255.0f;
      out.push_back(std::move(image));
    }
    return out;
  }

  static json Instance(const std::vector<float>& image) {
    json rows = json::array();
    for (int r = 0; r < 28; ++r) {
      rows.push_back(std::vector<float>(image.begin() + r * 28, image.begin() + r * 28 + 28));
    }
    return json::array({rows});
  }

  TempDir dir_{"serve-test"};
  int port_ = 0;
  std::unique_ptr<BackgroundProcess> server_;
  std::unique_ptr<httplib::Client> client_;
};

// Python's torch.jit.load on the same version and the same inputs: the reference.
std::vector<float> PythonLogits(const std::string& model_pt, const std::string& inputs,
                                const std::string& outputs) {
  const std::string script = R"(
import sys, numpy as np, torch
m = torch.jit.load(sys.argv[1])
x = torch.from_numpy(np.fromfile(sys.argv[2], dtype=np.float32).reshape(-1, 1, 28, 28))
with torch.no_grad():
    m(x).numpy().astype(np.float32).tofile(sys.argv[3])
)";
  auto py = RunCommand({"/usr/bin/python3", "-c", script, model_pt, inputs, outputs}, 120s);
  EXPECT_TRUE(py.ok() && py->exit_code == 0) << (py.ok() ? py->err : py.status().ToString());
  auto bytes = ReadFileToString(outputs);
  if (!bytes.ok()) return {};
  std::vector<float> out(bytes->size() / sizeof(float));
  std::memcpy(out.data(), bytes->data(), out.size() * sizeof(float));
  return out;
}

TEST_F(ServeTest, BatchedPredictionsMatchPythonsTorchJitLoad) {
  Export(dir_.path(), 7);
  const std::string batching = dir_.path() + "/batching.json";
  std::ofstream(batching) << R"({"max_batch_size": 16, "batch_timeout_micros": 5000,
                                "num_batch_threads": 1, "max_enqueued_batches": 100})";
  Start({"--enable_batching", "--batching_parameters_file=" + batching});
  const auto images = Images(48);
  // 48 single-image requests from 8 clients at once, so that batches form; then the same
  // images in one columnar request and one KServe request.
  std::vector<std::vector<float>> served(images.size());
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", port_);
      for (size_t i = c; i < images.size(); i += 8) {
        auto r = client.Post("/v1/models/fmnist:predict",
                             json{{"instances", {Instance(images[i])}}}.dump(),
                             "application/json");
        if (!r || r->status != 200) {
          ++failures;
          continue;
        }
        served[i] = json::parse(r->body)["predictions"][0].get<std::vector<float>>();
      }
    });
  }
  for (auto& t : clients) t.join();
  ASSERT_EQ(failures, 0) << ReadFileToString(Log()).value_or("");
  std::vector<float> flat;
  for (const auto& image : images) flat.insert(flat.end(), image.begin(), image.end());
  std::ofstream(dir_.path() + "/in.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(flat.data()),
             static_cast<std::streamsize>(flat.size() * sizeof(float)));
  const auto expected = PythonLogits(dir_.path() + "/fmnist/1/model.pt", dir_.path() + "/in.f32",
                                     dir_.path() + "/out.f32");
  ASSERT_EQ(expected.size(), images.size() * 10);
  // The same logits up to the order of float32 sums (other batch sizes than Python's one
  // batch of 48), and the same class wherever that order cannot change it.
  for (size_t i = 0; i < images.size(); ++i) {
    ASSERT_EQ(served[i].size(), 10u);
    int ours = 0, theirs = 0;
    for (int k = 0; k < 10; ++k) {
      EXPECT_NEAR(served[i][k], expected[i * 10 + k], train::LogitTolerance(expected[i * 10 + k]))
          << "image " << i << " class " << k;
      if (served[i][k] > served[i][ours]) ours = k;
      if (expected[i * 10 + k] > expected[i * 10 + theirs]) theirs = k;
    }
    if (!train::AmbiguousPrediction(&expected[i * 10], 10)) {
      EXPECT_EQ(ours, theirs) << "image " << i;
    }
  }
  // Batches of more than one formed (the histogram's count is below the requests).
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tarn_serve_batch_size_bucket{model=\"fmnist\",le=\"16\"}"),
            std::string::npos);
  // KServe v2 with UINT8 pixels answers the same logits for image 0.
  auto set = train::ReadImageSet(kData, "t10k");
  std::vector<int> pixels(set->pixels.begin(), set->pixels.begin() + 784);
  json infer = {{"inputs",
                 {{{"name", "x"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"}, {"data", pixels}}}}};
  auto r = client_->Post("/v2/models/fmnist/infer", infer.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto data = json::parse(r->body)["outputs"][0]["data"].get<std::vector<float>>();
  ASSERT_EQ(data.size(), 10u);
  for (int k = 0; k < 10; ++k)
    EXPECT_NEAR(data[k], expected[k], train::LogitTolerance(expected[k]));
  EXPECT_EQ(server_->Stop(), 0);  // SIGTERM drains and exits cleanly
  EXPECT_NE(ReadFileToString(Log()).value_or("").find("tarn-serve: stopped"), std::string::npos);
}

// SIGTERM drains: every request accepted before it is answered (those waiting in the batch
// queue too), new connections are refused, and tarn-serve exits 0 (1 had the drain's
// deadline cut one). With batching, six 200-image requests (each a batch of its own, one
// batch thread) wait in the queue behind each other when the signal comes; without, two 500-image
// requests (2.5 MB of JSON each) are being parsed or computed. Before the fix, neither kind was
// ever answered.
TEST_F(ServeTest, SigtermAnswersEveryRequestInFlightThenExitsZero) {
  Export(dir_.path(), 3);
  const auto images = Images(1);
  for (const bool batching : {true, false}) {
    SCOPED_TRACE(batching ? "batching on" : "batching off");
    std::vector<std::string> extra;
    int clients = 2, instances = 500;
    if (batching) {
      const std::string file = dir_.path() + "/batching.json";
      std::ofstream(file) << R"({"max_batch_size": 16, "batch_timeout_micros": 500000,
                                 "num_batch_threads": 1, "max_enqueued_batches": 100})";
      extra = {"--enable_batching", "--batching_parameters_file=" + file};
      clients = 6;
      instances = 200;
    }
    Start(extra);
    json rows = json::array();
    for (int i = 0; i < instances; ++i) rows.push_back(Instance(images[0]));
    const std::string body = json{{"instances", rows}}.dump();
    std::atomic<int> answered{0}, sent{0};
    std::mutex errors_mu;
    std::vector<std::string> errors;
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&] {
        httplib::Client client("127.0.0.1", port_);
        client.set_read_timeout(30, 0);
        ++sent;
        auto r = client.Post("/v1/models/fmnist:predict", body, "application/json");
        if (r && r->status == 200 &&
            json::parse(r->body)["predictions"].size() == static_cast<size_t>(instances)) {
          ++answered;
          return;
        }
        std::lock_guard<std::mutex> lock(errors_mu);
        errors.push_back(r ? "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 200)
                           : "no answer: " + httplib::to_string(r.error()));
      });
    }
    while (sent < clients) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(100ms);  // connected, sent, and waiting for their answers
    ASSERT_EQ(::kill(server_->pid(), SIGTERM), 0);
    std::this_thread::sleep_for(200ms);  // tarn-serve looks for the signal every 50 ms
    httplib::Client late("127.0.0.1", port_);
    late.set_connection_timeout(1, 0);
    auto refused = late.Get("/v2/health/live");
    for (auto& t : threads) t.join();
    int code = -2;
    for (int i = 0; i < 400 && !server_->Exited(&code); ++i) std::this_thread::sleep_for(50ms);
    const std::string log = ReadFileToString(Log()).value_or("");
    EXPECT_EQ(answered, clients) << (errors.empty() ? "" : errors[0]) << "\n" << log;
    EXPECT_FALSE(refused) << "a connection after SIGTERM was served";
    EXPECT_EQ(code, 0) << log;
    EXPECT_NE(log.find("tarn-serve: stopped\n"), std::string::npos) << log;
  }
}

TEST_F(ServeTest, AFiftyMegabytePredictGets413WhileStillSending) {
  Export(dir_.path(), 1);
  Start();
  // A client that sends its whole body before it reads (no Expect: 100-continue), as most do.
  http::testing::RawClient c(port_);
  const std::string body(50u << 20, ' ');
  ASSERT_TRUE(c.Send("POST /v1/models/fmnist:predict HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n"));
  EXPECT_TRUE(c.Send(body)) << "tarn-serve reset the connection while the body was sent";
  ::shutdown(c.fd(), SHUT_WR);
  const std::string answer = c.ReadAll(20s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 413 ", 0), 0u) << answer.substr(0, 300);
  EXPECT_NE(answer.find("{\"error\":\"request body is over the limit of 16777216 bytes\"}"),
            std::string::npos)
      << answer.substr(0, 300);
  // And it goes on serving.
  const auto images = Images(1);
  auto r = client_->Post("/v1/models/fmnist:predict",
                         json{{"instances", json::array({Instance(images[0])})}}.dump(),
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(ServeTest, VersionsSwapUnderLoadWithoutAFailedRequestAndACorruptOneIsNotServed) {
  Export(dir_.path(), 1);
  Start({"--enable_batching", "--file_system_poll_wait_seconds=0.2"});
  const json body = {{"instances", {Instance(Images(1)[0])}}};
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> load;
  std::mutex seen_mu;
  std::set<std::string> versions_seen;
  for (int c = 0; c < 4; ++c) {
    load.emplace_back([&] {
      httplib::Client client("127.0.0.1", port_);
      while (!stop) {
        // KServe answers say which version served them.
        json infer = {{"inputs",
                       {{{"name", "x"},
                         {"shape", {1, 1, 28, 28}},
                         {"datatype", "FP32"},
                         {"data", body["instances"][0]}}}}};
        auto r = client.Post("/v2/models/fmnist/infer", infer.dump(), "application/json");
        if (r && r->status == 200) {
          ++ok;
          std::lock_guard<std::mutex> lock(seen_mu);
          versions_seen.insert(json::parse(r->body)["model_version"].get<std::string>());
        } else {
          ++failed;
        }
      }
    });
  }
  std::this_thread::sleep_for(300ms);
  Export(dir_.path(), 2);
  // Served within a generous deadline.
  bool swapped = false;
  for (int i = 0; i < 300 && !swapped; ++i) {
    auto r = client_->Get("/v1/models/fmnist");
    swapped = r && r->status == 200 &&
              json::parse(r->body)["model_version_status"][0]["version"] == "2" &&
              json::parse(r->body)["model_version_status"][0]["state"] == "AVAILABLE" &&
              json::parse(r->body)["model_version_status"][1]["state"] == "END";
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(300ms);
  // A corrupt version 3: written aside and renamed into place, as an exporter would.
  fs::create_directories(dir_.path() + "/fmnist/.3.tmp");
  std::ofstream(dir_.path() + "/fmnist/.3.tmp/model.pt") << "not a model";
  fs::rename(dir_.path() + "/fmnist/.3.tmp", dir_.path() + "/fmnist/3");
  json v3;
  for (int i = 0; i < 300; ++i) {
    auto r = client_->Get("/v1/models/fmnist/versions/3");
    if (r && r->status == 200) {
      v3 = json::parse(r->body)["model_version_status"][0];
      if (v3["state"] == "END") break;
    }
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(300ms);
  stop = true;
  for (auto& t : load) t.join();
  const std::string log = ReadFileToString(Log()).value_or("");
  EXPECT_TRUE(swapped) << log;
  EXPECT_EQ(failed, 0) << log;
  EXPECT_GT(ok, 20);
  EXPECT_EQ(versions_seen, (std::set<std::string>{"1", "2"}));
  // The status showed 2 AVAILABLE before 1 began to unload.
  const size_t available = log.find("model fmnist version 2: AVAILABLE");
  const size_t unloading = log.find("model fmnist version 1: UNLOADING");
  ASSERT_NE(available, std::string::npos) << log;
  ASSERT_NE(unloading, std::string::npos) << log;
  EXPECT_LT(available, unloading);
  EXPECT_EQ(v3["state"], "END") << v3.dump();
  EXPECT_EQ(v3["status"]["error_code"], "INVALID_ARGUMENT") << v3.dump();
  EXPECT_NE(v3["status"]["error_message"].get<std::string>().find("not a loadable TorchScript"),
            std::string::npos)
      << v3.dump();
  auto still = client_->Post("/v2/models/fmnist/infer",
                             json{{"inputs",
                                   {{{"name", "x"},
                                     {"shape", {1, 1, 28, 28}},
                                     {"datatype", "FP32"},
                                     {"data", body["instances"][0]}}}}}
                                 .dump(),
                             "application/json");
  ASSERT_TRUE(still);
  EXPECT_EQ(json::parse(still->body)["model_version"], "2");
}

// The canary rollout in the real server (docs/serve.md, "Canary"): a less accurate export
// is refused unserved, a better one takes exactly 20% of the unlabelled requests, is
// promoted after 20 of them, and the status API and /metrics say so.
TEST_F(ServeTest, ACanaryIsGatedOnAccuracySplitExactlyAndPromoted) {
  ExportAt(dir_.path(), 1, 0.85);
  const std::string config = dir_.path() + "/models.json";
  std::ofstream(config) << json{{"model_config_list",
                                 {{"config",
                                   {{{"name", "fmnist"},
                                     {"base_path", dir_.path() + "/fmnist"},
                                     {"canary",
                                      {{"traffic_percent", 20},
                                       {"max_accuracy_drop", 0.01},
                                       {"promote_after_requests", 20}}}}}}}}}
                               .dump();
  Start({"--model_config_file=" + config, "--file_system_poll_wait_seconds=0.1"});
  auto status = [&] {
    auto r = client_->Get("/v1/models/fmnist");
    return r && r->status == 200 ? json::parse(r->body) : json::object();
  };
  auto wait = [&](auto done) {
    for (int i = 0; i < 600; ++i) {
      if (done(status())) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  };
  ExportAt(dir_.path(), 2, 0.70);
  ASSERT_TRUE(wait([](const json& s) { return s["tarn_rollout"]["refused"] == 1; }))
      << status().dump();
  const json refused = status()["model_version_status"][0];
  EXPECT_EQ(refused["version"], "2");
  EXPECT_EQ(refused["state"], "END");
  EXPECT_EQ(refused["status"]["error_message"],
            "refused: its accuracy 0.7000 is below stable version 1's 0.8500 by more than "
            "max_accuracy_drop 0.0100 (version 2 never served)");

  ExportAt(dir_.path(), 3, 0.86);
  ASSERT_TRUE(wait([](const json& s) {
    return s["tarn_rollout"]["version_labels"].value("canary", "") == "3";
  })) << status().dump();
  const json image = Instance(Images(1)[0]);
  auto ask = [&] {
    json infer = {
        {"inputs",
         {{{"name", "x"}, {"shape", {1, 1, 28, 28}}, {"datatype", "FP32"}, {"data", image}}}}};
    auto r = client_->Post("/v2/models/fmnist/infer", infer.dump(), "application/json");
    return r && r->status == 200 ? json::parse(r->body)["model_version"].get<std::string>() : "";
  };
  std::map<std::string, int> answered;
  for (int i = 0; i < 100; ++i) ++answered[ask()];
  EXPECT_EQ(answered["3"], 20) << json(answered).dump();
  EXPECT_EQ(answered["1"], 80);
  ASSERT_TRUE(wait([](const json& s) {
    return s["tarn_rollout"]["version_labels"].value("stable", "") == "3";
  })) << status().dump();
  EXPECT_EQ(status()["tarn_rollout"]["last_decision"],
            "version 3 promoted: canary version 3 at 20%: 0 of 20 failed (0.00%); stable: 0 of "
            "80 failed (0.00%)");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(ask(), "3");
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tarn_serve_version_label{model=\"fmnist\",label=\"stable\"} 3\n"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find(
                "tarn_serve_canary_decisions_total{model=\"fmnist\",decision=\"refused\"} 1\n"),
            std::string::npos);
  const std::string log = ReadFileToString(Log()).value_or("");
  EXPECT_NE(log.find("version 3: canary for 20% of unlabelled requests, against stable 1"),
            std::string::npos)
      << log;
}

TEST_F(ServeTest, BadFlagsAndConfigsExitTwoWithTheReason) {
  auto run = [](std::vector<std::string> args) {
    args.insert(args.begin(), TARN_SERVE_BINARY);
    auto r = RunCommand(args, 60s);
    EXPECT_TRUE(r.ok());
    return r.value_or(CommandResult{});
  };
  auto none = run({});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("give --model_base_path"), std::string::npos) << none.err;
  const std::string config = dir_.path() + "/models.json";
  std::ofstream(config) << R"({"model_config_list": {"config": [{"name": "m"}]}})";
  auto bad = run({"--model_config_file=" + config});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(config + ": model_config_list.config[0].base_path: missing"),
            std::string::npos)
      << bad.err;
  auto flag = run({"--model_base_path=/x", "--rest_api_port=notaport"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.err.find("--rest_api_port"), std::string::npos) << flag.err;
}

}  // namespace
}  // namespace tarn::serve
