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
              torch::Generator& gen, bool bias = true) {
  int64_t fan_in = 1;
  for (size_t i = 1; i < weight_shape.size(); ++i) fan_in *= weight_shape[i];
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  auto uniform = [&](std::vector<int64_t> shape) {
    return torch::rand(shape, gen, torch::kFloat32) * (2 * bound) - bound;
  };
  const int64_t out = weight_shape[0];
  m.register_parameter(name + "_weight", uniform(weight_shape).set_requires_grad(true), false);
  if (bias) m.register_parameter(name + "_bias", uniform({out}).set_requires_grad(true), false);
}

// Batch norm over `channels`, as torch.nn.BatchNorm2d starts: scale 1, shift 0 (parameters),
// running mean 0 and variance 1 (buffers, which torch.batch_norm updates in training mode
// with momentum 0.1 and uses in eval mode).
void AddBatchNorm(torch::jit::Module& m, const std::string& name, int64_t channels) {
  m.register_parameter(name + "_weight", torch::ones({channels}).set_requires_grad(true), false);
  m.register_parameter(name + "_bias", torch::zeros({channels}).set_requires_grad(true), false);
  m.register_buffer(name + "_running_mean", torch::zeros({channels}));
  m.register_buffer(name + "_running_var", torch::ones({channels}));
}

// One block of cnn_bn's forward: a 3x3 convolution keeping the size (no bias: the batch
// norm's shift is one), batch norm, 2x2 max pooling (unless `pool` is false), ReLU. ReLU
// after the pooling is the same function as before it (both are monotonic), on a quarter of
// the values: a step took 26.2 instead of 31.5 ms here (Python, one thread).
std::string ConvBlock(const std::string& conv, const std::string& bn, bool pool) {
  return "        x = torch.conv2d(x, self." + conv + "_weight, None, [1, 1], [1, 1])\n" +
         "        x = torch.batch_norm(x, self." + bn + "_weight, self." + bn + "_bias, self." +
         bn + "_running_mean, self." + bn + "_running_var, self.training, 0.1, 1e-5, True)\n" +
         (pool ? "        x = torch.relu(torch.max_pool2d(x, [2, 2]))\n"
               : "        x = torch.relu(x)\n");
}

// Fashion-MNIST's pixel mean and standard deviation (of x / 255).
constexpr const char* kNormalise = "        x = (x - 0.2860) / 0.3530\n";

}  // namespace

const std::vector<std::string>& ZooModelNames() {
  static const std::vector<std::string> names = {"mlp", "cnn", "cnn_bn"};
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
    if (name == "cnn_bn") {
      torch::jit::Module m("TarnCnnBn");
      // A TorchScript module made in C++ has no `training` attribute until one is given;
      // train() and eval() set it, and batch norm reads it.
      m.register_attribute("training", c10::BoolType::get(), true);
      const int64_t channels[] = {1, 16, 32, 32};
      std::string forward = std::string("def forward(self, x):\n") + kNormalise;
      for (int i = 1; i <= 3; ++i) {
        const std::string n = std::to_string(i);
        AddLayer(m, "conv" + n, {channels[i], channels[i - 1], 3, 3}, gen, /*bias=*/false);
        AddBatchNorm(m, "bn" + n, channels[i]);
        forward += ConvBlock("conv" + n, "bn" + n, /*pool=*/i < 3);
      }
      AddLayer(m, "fc1", {128, 32 * 7 * 7}, gen);
      AddLayer(m, "fc2", {10, 128}, gen);
      m.define(forward +
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

std::vector<std::pair<std::string, torch::Tensor>> NamedBuffers(const torch::jit::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& b : m.named_buffers(/*recurse=*/true)) out.emplace_back(b.name, b.value);
  return out;
}

std::vector<float> BufferValues(const torch::jit::Module& m) {
  torch::NoGradGuard no_grad;
  std::vector<float> out;
  for (const auto& [name, b] : NamedBuffers(m)) {
    const torch::Tensor host = b.to(torch::kCPU, torch::kFloat32).contiguous();
    out.insert(out.end(), host.data_ptr<float>(), host.data_ptr<float>() + host.numel());
  }
  return out;
}

size_t BufferElements(const torch::jit::Module& m) {
  size_t n = 0;
  for (const auto& [name, b] : NamedBuffers(m)) n += static_cast<size_t>(b.numel());
  return n;
}

Status SetBufferValues(const torch::jit::Module& m, const std::vector<float>& values) {
  if (values.size() != BufferElements(m)) {
    return InvalidArgumentError("the model has " + std::to_string(BufferElements(m)) +
                                " buffer values, not " + std::to_string(values.size()));
  }
  torch::NoGradGuard no_grad;
  size_t at = 0;
  for (auto& [name, b] : NamedBuffers(m)) {
    const int64_t n = b.numel();
    // from_blob does not copy; copy_ converts to the buffer's dtype and device.
    b.copy_(torch::from_blob(const_cast<float*>(values.data() + at), b.sizes(), torch::kFloat32));
    at += static_cast<size_t>(n);
  }
  return OkStatus();
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
