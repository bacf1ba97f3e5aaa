#include "serve/torch_servable.h"

#include <torch/script.h>

#include <ATen/Parallel.h>
#include <cstring>

namespace tarn::serve {
namespace {

class TorchServable final : public Servable {
 public:
  explicit TorchServable(torch::jit::Module module) : module_(std::move(module)) {}

  StatusOr<Tensor> Run(const Tensor& input) override {
    try {
      c10::InferenceMode guard;
      // The request's buffer is read as is: from_blob makes no copy.
      at::Tensor x = torch::from_blob(const_cast<float*>(input.data.data()), input.shape,
                                      torch::kFloat32);
      at::Tensor y = module_.forward({x}).toTensor().to(torch::kFloat32).contiguous();
      Tensor out;
      out.shape.assign(y.sizes().begin(), y.sizes().end());
      out.data.resize(static_cast<size_t>(y.numel()));
      std::memcpy(out.data.data(), y.data_ptr<float>(), out.data.size() * sizeof(float));
      return out;
    } catch (const std::exception& e) {
      std::string what = e.what();
      // TorchScript's messages carry a long traceback; the first line says what happened.
      if (const size_t nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
      return InvalidArgumentError("the model failed on input " + ShapeString(input.shape) + ": " +
                                  what);
    }
  }

 private:
  torch::jit::Module module_;
};

}  // namespace

void SetTorchThreads(int threads) { at::set_num_threads(std::max(1, threads)); }

StatusOr<std::unique_ptr<Servable>> LoadTorchServable(const std::string& version_dir,
                                                      const ModelMeta& meta) {
  const std::string path = version_dir + "/model.pt";
  std::unique_ptr<TorchServable> servable;
  try {
    torch::jit::Module m = torch::jit::load(path);
    m.eval();
    servable = std::make_unique<TorchServable>(std::move(m));
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    return InvalidArgumentError(path + ": not a loadable TorchScript model: " + what);
  }
  if (!meta.input_shape.empty()) {
    Tensor warm;
    warm.shape = {1};
    warm.shape.insert(warm.shape.end(), meta.input_shape.begin(), meta.input_shape.end());
    warm.data.assign(static_cast<size_t>(warm.NumElements()), 0.0f);
    auto out = servable->Run(warm);
    if (!out.ok()) return out.status().WithContext(path + ": warm-up");
    if (out->shape.empty() || out->shape[0] != 1) {
      return InvalidArgumentError(path + ": warm-up: the model answered shape " +
                                  ShapeString(out->shape) + " for one example");
    }
  }
  return std::unique_ptr<Servable>(std::move(servable));
}

}  // namespace tarn::serve
