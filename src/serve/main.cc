// tarn-serve: serves TorchScript model versions over TF Serving's REST API and KServe's v2
// protocol, moving to each newer version as it appears. Flags are TF Serving's.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/file.h"
#include "common/workload_process.h"
#include "http/server.h"
#include "serve/model_repository.h"
#include "serve/rest_api.h"
#include "serve/serve_metrics.h"
#include "serve/torch_servable.h"

namespace {

std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop = true; }

std::mutex g_log_mu;
void Log(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::cerr << "tarn-serve: " << line << std::endl;
}

int Fail(const std::string& message) {
  std::cerr << "tarn-serve: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  tarn::PinBlasThreads(argv);
  tarn::KeepLargeBuffersInHeap();
  using namespace tarn::serve;
  CLI::App app{"tarn-serve: serve TorchScript model versions (TF Serving REST and KServe v2)"};
  int rest_api_port = 8501, grpc_port = 0, rest_api_num_threads = 1;
  int64_t rest_api_timeout_in_ms = 30000, max_body_bytes = 16 << 20;
  std::string host = std::getenv("TARN_IP") ? std::getenv("TARN_IP") : "0.0.0.0";
  std::string model_name = "default", model_base_path, model_config_file,
              batching_parameters_file;
  double poll_seconds = 1;
  bool enable_batching = false, watch_base_paths = true;
  int intra_op = 0;
  app.add_option("--rest_api_port", rest_api_port, "HTTP port (0: any free port)")
      ->capture_default_str();
  app.add_option("--rest_api_host", host, "address to bind (default $TARN_IP, else 0.0.0.0)")
      ->capture_default_str();
  app.add_option("--port", grpc_port, "gRPC port: gRPC is not served; accepted for scripts");
  app.add_option("--rest_api_num_threads", rest_api_num_threads, "HTTP I/O threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--rest_api_timeout_in_ms", rest_api_timeout_in_ms,
                 "time allowed to read a request or write an answer; idle keep-alive limit")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}));
  app.add_option("--rest_api_max_body_bytes", max_body_bytes, "largest request body (413 above)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30));
  app.add_option("--model_name", model_name, "the model's name in URLs")->capture_default_str();
  app.add_option("--model_base_path", model_base_path,
                 "directory of version directories <version>/model.pt");
  app.add_option("--model_config_file", model_config_file,
                 "JSON model_config_list (TF Serving's field names), instead of the two above");
  app.add_option("--file_system_poll_wait_seconds", poll_seconds,
                 "how often base paths are polled for new versions (0: only at start)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--tarn_watch_base_paths", watch_base_paths,
                 "poll as soon as a version directory is renamed into a base path (inotify); "
                 "false: only every --file_system_poll_wait_seconds")
      ->capture_default_str();
  app.add_flag("--enable_batching", enable_batching, "batch requests dynamically");
  app.add_option("--batching_parameters_file", batching_parameters_file,
                 "JSON BatchingParameters (max_batch_size, batch_timeout_micros, "
                 "num_batch_threads, max_enqueued_batches)");
  app.add_option("--tensorflow_intra_op_parallelism", intra_op,
                 "threads per batch (default: the instance's cores / num_batch_threads)")
      ->check(CLI::Range(0, 256));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::vector<ModelConfig> models;
  if (!model_config_file.empty()) {
    if (!model_base_path.empty()) {
      return Fail("--model_config_file and --model_base_path exclude each other");
    }
    auto text = tarn::ReadFileToString(model_config_file, 4 << 20);
    if (!text.ok()) return Fail(text.status().message());
    auto parsed = ParseModelConfigList(*text, model_config_file);
    if (!parsed.ok()) return Fail(parsed.status().message());
    models = std::move(*parsed);
  } else {
    if (model_base_path.empty()) {
      return Fail("give --model_base_path (with --model_name) or --model_config_file");
    }
    if (auto s = CheckModelName(model_name, "--model_name"); !s.ok()) return Fail(s.message());
    models.push_back(ModelConfig{model_name, model_base_path, {}, {}, std::nullopt});
  }
  BatchingParameters batching;
  if (!batching_parameters_file.empty()) {
    auto text = tarn::ReadFileToString(batching_parameters_file, 1 << 20);
    if (!text.ok()) return Fail(text.status().message());
    auto parsed = ParseBatchingParameters(*text, batching_parameters_file);
    if (!parsed.ok()) return Fail(parsed.status().message());
    batching = *parsed;
    if (!enable_batching) Log("--batching_parameters_file given without --enable_batching: "
                              "requests run one at a time");
  }
  if (grpc_port != 0) Log("gRPC is not served; --port " + std::to_string(grpc_port) + " ignored");
  // Batch threads x intra-op threads <= cores: more would only make them fight.
  if (intra_op == 0) {
    intra_op = std::max<int>(1, tarn::InstanceCores() / static_cast<int>(batching.num_batch_threads));
  }
  SetTorchThreads(intra_op);

  ServeMetrics metrics;
  ModelRepository::Options ro;
  ro.models = models;
  ro.enable_batching = enable_batching;
  ro.batching = batching;
  ro.loader = LoadTorchServable;
  ro.poll_interval = std::chrono::milliseconds(static_cast<int64_t>(poll_seconds * 1000));
  ro.watch_base_paths = watch_base_paths;
  ro.log = Log;
  ro.on_batch = [&metrics](const std::string& model, const BatchStats& s) {
    metrics.ObserveBatch(model, s);
  };
  auto repository = ModelRepository::Create(std::move(ro));
  if (!repository.ok()) return Fail(repository.status().message());

  RestApi api(**repository, metrics, "0.1.0");
  tarn::http::Server::Options ho;
  ho.listen.host = host;
  ho.listen.port = rest_api_port;
  ho.server_header = "tarn-serve";
  ho.threads = rest_api_num_threads;
  ho.max_body_bytes = static_cast<size_t>(max_body_bytes);
  // TF Serving's one REST timeout: for the request head, the body, an idle keep-alive
  // connection and each write.
  const std::chrono::milliseconds timeout(rest_api_timeout_in_ms);
  ho.header_timeout = ho.body_timeout = ho.idle_timeout = ho.write_timeout = timeout;
  auto server = tarn::http::Server::Create(ho, [&api](tarn::http::Request r,
                                                      tarn::http::Responder respond) {
    api.Handle(std::move(r), std::move(respond));
  });
  if (!server.ok()) return Fail(server.status().message());

  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  (*server)->Start();
  Log("serving on " + host + ":" + std::to_string((*server)->port()) + " (batching " +
      (enable_batching ? "on: max_batch_size " + std::to_string(batching.max_batch_size) +
                             ", batch_timeout_micros " +
                             std::to_string(batching.batch_timeout_micros) +
                             ", num_batch_threads " + std::to_string(batching.num_batch_threads)
                       : std::string("off")) +
      ", " + std::to_string(intra_op) + " intra-op threads)");
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Log("stopping: draining connections");
  const size_t cut = (*server)->Drain(std::chrono::milliseconds(10000));
  repository->reset();  // answers anything left in the batch queues
  server->reset();
  if (cut > 0) {
    Log("stopped: the 10 s drain deadline cut " + std::to_string(cut) +
        " connection(s) with requests still unanswered");
    return 1;
  }
  Log("stopped");
  return 0;
}
