#include "train/model_zoo.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <sys/stat.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "train/local_trainer.h"

namespace tarn::train {
namespace {

// Uniform in +-1/sqrt(fan_in), PyTorch's default for both the weight (kaiming_uniform_ with
// a = sqrt(5)) and the bias of Linear and Conv2d.
void AddLayer(torch::jit::Module& m, const std::string& name, std::vector<int64_t> weight_shape,
              torch::Generator& gen) {
  int64_t fan_in = 1;
  for (size_t i = 1; i < weight_shape.size(); ++i) fan_in *= weight_shape[i];
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  auto uniform = [&](std::vector<int64_t> shape) {
    return torch::rand(shape, gen, torch::kFloat32) * (2 * bound) - bound;
  };
  const int64_t out = weight_shape[0];
  m.register_parameter(name + "_weight", uniform(weight_shape).set_requires_grad(true), false);
  m.register_parameter(name + "_bias", uniform({out}).set_requires_grad(true), false);
}

// Fashion-MNIST's pixel mean and standard deviation (of x / 255).
constexpr const char* kNormalise = "        x = (x - 0.2860) / 0.3530\n";

}  // namespace

const std::vector<std::string>& ZooModelNames() {
  static const std::vector<std::string> names = {"mlp", "cnn"};
  return names;
}

StatusOr<torch::jit::Module> MakeZooModel(const std::string& name, uint64_t seed) {
  try {
    torch::Generator gen = at::detail::createCPUGenerator(seed);
    if (name == "mlp") {
      torch::jit::Module m("TarnMlp");
      AddLayer(m, "fc1", {128, 784}, gen);
      AddLayer(m, "fc2", {10, 128}, gen);
      m.define(std::string("def forward(self, x):\n") + kNormalise +
               "        x = torch.flatten(x, 1)\n"
               "        x = torch.relu(torch.linear(x, self.fc1_weight, self.fc1_bias))\n"
               "        return torch.linear(x, self.fc2_weight, self.fc2_bias)\n");
      return m;
    }
    if (name == "cnn") {
      torch::jit::Module m("TarnCnn");
      AddLayer(m, "conv1", {32, 1, 3, 3}, gen);
      AddLayer(m, "conv2", {64, 32, 3, 3}, gen);
      AddLayer(m, "fc1", {128, 1600}, gen);
      AddLayer(m, "fc2", {10, 128}, gen);
      m.define(std::string("def forward(self, x):\n") + kNormalise +
               "        x = torch.relu(torch.conv2d(x, self.conv1_weight, self.conv1_bias))\n"
               "        x = torch.max_pool2d(x, [2, 2])\n"
               "        x = torch.relu(torch.conv2d(x, self.conv2_weight, self.conv2_bias))\n"
               "        x = torch.max_pool2d(x, [2, 2])\n"
               "        x = torch.flatten(x, 1)\n"
               "        x = torch.relu(torch.linear(x, self.fc1_weight, self.fc1_bias))\n"
               "        return torch.linear(x, self.fc2_weight, self.fc2_bias)\n");
      return m;
    }
  } catch (const std::exception& e) {
    return InternalError("model " + name + ": " + e.what());
  }
  std::string known;
  for (const std::string& n : ZooModelNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError("unknown model \"" + name + "\" (the zoo has " + known +
                              "; or give the path of a TorchScript file)");
}

StatusOr<torch::jit::Module> LoadModel(const std::string& spec, uint64_t seed) {
  struct stat st {};
  if (spec.find('/') == std::string::npos && ::stat(spec.c_str(), &st) != 0) {
    return MakeZooModel(spec, seed);
  }
  try {
    torch::jit::Module m = torch::jit::load(spec);
    for (const auto& p : m.parameters()) p.set_requires_grad(true);
    return m;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    return InvalidArgumentError(spec + ": not a loadable TorchScript model: " + what);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> NamedParameters(const torch::jit::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : m.named_parameters(/*recurse=*/true)) out.emplace_back(p.name, p.value);
  return out;
}

StatusOr<torch::Device> ChooseDevice(const std::string& want) {
  if (want == "cpu") return torch::Device(torch::kCPU);
  if (want != "cuda" && want != "auto") {
    return InvalidArgumentError("--device \"" + want + "\": expected auto, cpu or cuda");
  }
  if (torch::cuda::is_available()) return torch::Device(torch::kCUDA, 0);
  if (want == "auto") return torch::Device(torch::kCPU);
  if (!at::hasCUDA()) {
    return FailedPreconditionError(
        "--device cuda: this libtorch was built without CUDA (Debian's libtorch is CPU-only)");
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return FailedPreconditionError(
      std::string("--device cuda: no GPU is visible (CUDA_VISIBLE_DEVICES=") +
      (visible != nullptr ? "\"" + std::string(visible) + "\"" : "unset") + ")");
}

Status CheckDevice(const std::string& want) { return ChooseDevice(want).status(); }

void SetUpTorch(int threads, bool jit_optimize) {
  at::set_num_threads(std::max(1, threads));
  torch::jit::setGraphExecutorOptimize(jit_optimize);
}

}  // namespace tarn::train
