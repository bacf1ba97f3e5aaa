// bench/run serve's helper: makes the model version tarn-serve serves, and is the
// in-process peer that the served figures are compared with.
//
//   serve_peer export BASE
//       Exports zoo model "cnn" (seed 1) as the next version of BASE/fmnist, with the
//       meta.json tarn-train writes (input shape [1, 28, 28], float32, the Fashion-MNIST
//       labels); prints the version's directory.
//
//   serve_peer inprocess VERSION_DIR SECONDS B...
//       Loads VERSION_DIR/model.pt with tarn-serve's own LoadTorchServable (the same
//       libtorch path, warm-up included), at the threads tarn-serve runs with one core
//       (SetTorchThreads(1)), and calls Servable::Run on a ready [B, 1, 28, 28] batch again
//       and again for each batch size B: 3 rounds of SECONDS/3 each, after a warm-up; the
//       median round is reported. Prints one JSON object:
//       {"B": {"images_per_s": ..., "batch_ms": ...}, ...}.
//
// Both call tarn-serve's process settings first (PinBlasThreads, KeepLargeBuffersInHeap),
// so the peer runs with the same BLAS threads and allocator tuning as the server.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/workload_process.h"
#include "serve/model_meta.h"
#include "serve/torch_servable.h"
#include "train/idx.h"
#include "train/model_export.h"
#include "train/model_zoo.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

int Usage() {
  std::cerr << "usage: serve_peer export BASE\n"
               "       serve_peer inprocess VERSION_DIR SECONDS B...\n";
  return 2;
}

int Export(const std::string& base) {
  auto model = tarn::train::MakeZooModel("cnn", 1);
  if (!model.ok()) {
    std::cerr << "serve_peer: " << model.status().ToString() << "\n";
    return 1;
  }
  json meta = {{"model", "cnn"},
               {"input_shape", {1, 28, 28}},
               {"dtype", "float32"},
               {"labels", tarn::train::FashionMnistLabels()},
               {"step", 0}};
  auto v = tarn::train::ExportVersion(*model, base, "fmnist", meta);
  if (!v.ok()) {
    std::cerr << "serve_peer: " << v.status().ToString() << "\n";
    return 1;
  }
  std::cout << base << "/fmnist/" << *v << "\n";
  return 0;
}

int InProcess(const std::string& dir, double seconds, const std::vector<int64_t>& batches) {
  auto meta = tarn::serve::ReadModelMeta(dir);
  if (!meta.ok()) {
    std::cerr << "serve_peer: " << meta.status().ToString() << "\n";
    return 1;
  }
  tarn::serve::SetTorchThreads(1);
  auto servable = tarn::serve::LoadTorchServable(dir, *meta);
  if (!servable.ok()) {
    std::cerr << "serve_peer: " << servable.status().ToString() << "\n";
    return 1;
  }
  // Pixels in [0, 1], as clients send them; the CNN's cost does not depend on their values.
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  json out = json::object();
  const double round_seconds = seconds / 3;
  for (const int64_t b : batches) {
    tarn::serve::Tensor input;
    input.shape = {b, 1, 28, 28};
    input.data.resize(static_cast<size_t>(input.NumElements()));
    for (float& x : input.data) x = pixel(rng);
    auto run = [&] {
      auto y = (*servable)->Run(input);
      if (!y.ok() || y->shape.empty() || y->shape[0] != b) {
        std::cerr << "serve_peer: Run failed at batch " << b << ": "
                  << (y.ok() ? tarn::serve::ShapeString(y->shape) : y.status().ToString())
                  << "\n";
        std::exit(1);
      }
    };
    // Warm-up: the first runs at a new shape allocate and plan.
    const auto warm_end = Clock::now() + std::chrono::milliseconds(200);
    do run(); while (Clock::now() < warm_end);
    std::vector<double> rates;
    for (int r = 0; r < 3; ++r) {
      int64_t calls = 0;
      const auto start = Clock::now();
      double elapsed = 0;
      do {
        run();
        ++calls;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      } while (elapsed < round_seconds);
      rates.push_back(static_cast<double>(calls * b) / elapsed);
    }
    std::sort(rates.begin(), rates.end());
    const double rate = rates[1];
    out[std::to_string(b)] = {{"images_per_s", rate},
                              {"batch_ms", 1000.0 * static_cast<double>(b) / rate}};
    std::cerr << "serve_peer: batch " << b << ": " << rate << " images/s\n";
  }
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tarn::PinBlasThreads(argv);
  tarn::KeepLargeBuffersInHeap();
  if (argc < 3) return Usage();
  const std::string verb = argv[1];
  if (verb == "export" && argc == 3) return Export(argv[2]);
  if (verb == "inprocess" && argc >= 5) {
    const double seconds = std::atof(argv[3]);
    std::vector<int64_t> batches;
    for (int i = 4; i < argc; ++i) {
      const int64_t b = std::atoll(argv[i]);
      if (b < 1 || b > 4096) return Usage();
      batches.push_back(b);
    }
    if (!(seconds > 0)) return Usage();
    return InProcess(argv[2], seconds, batches);
  }
  return Usage();
}
