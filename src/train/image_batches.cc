#include "train/image_batches.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "train/model_zoo.h"

namespace tarn::train {

torch::Tensor ImageBatch(const ImageSet& set, const std::vector<int64_t>& order, size_t begin,
                         size_t end) {
  const int64_t pixels = set.rows * set.cols;
  torch::Tensor out =
      torch::empty({static_cast<int64_t>(end - begin), 1, set.rows, set.cols}, torch::kFloat32);
  float* dst = out.data_ptr<float>();
  for (size_t i = begin; i < end; ++i) {
    const uint8_t* src = set.pixels.data() + order[i] * pixels;
    for (int64_t p = 0; p < pixels; ++p) *dst++ = src[p] * (1.0f / 255.0f);
  }
  return out;
}

torch::Tensor LabelBatch(const ImageSet& set, const std::vector<int64_t>& order, size_t begin,
                         size_t end) {
  torch::Tensor out = torch::empty({static_cast<int64_t>(end - begin)}, torch::kInt64);
  int64_t* dst = out.data_ptr<int64_t>();
  for (size_t i = begin; i < end; ++i) *dst++ = set.labels[order[i]];
  return out;
}

std::vector<int64_t> EpochOrder(std::vector<int64_t> shard, uint64_t seed, int64_t rank,
                                int64_t epoch) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(rank) * 7919 +
                      static_cast<uint64_t>(epoch));
  std::shuffle(shard.begin(), shard.end(), rng);
  return shard;
}

void Augment(const Augmentation& a, std::mt19937_64& rng, torch::Tensor* images) {
  const int64_t n = images->size(0), rows = images->size(2), cols = images->size(3);
  const int shift = std::clamp(a.shift, 0, 4);
  std::vector<float> copy(static_cast<size_t>(rows * cols));
  float* data = images->data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r0 = rng(), r1 = rng(), r2 = rng();
    const bool flip = a.flip && (r0 & 1) != 0;
    const int64_t dy = shift > 0 ? static_cast<int64_t>(r1 % (2 * shift + 1)) - shift : 0;
    const int64_t dx = shift > 0 ? static_cast<int64_t>(r2 % (2 * shift + 1)) - shift : 0;
    if (!flip && dx == 0 && dy == 0) continue;
    float* img = data + i * rows * cols;
    std::copy(img, img + rows * cols, copy.begin());
    for (int64_t y = 0; y < rows; ++y) {
      for (int64_t x = 0; x < cols; ++x) {
        // Output (y, x) shows input (y - dy, x - dx) of the image, flipped first.
        const int64_t sy = y - dy, sx = x - dx;
        const bool inside = sy >= 0 && sy < rows && sx >= 0 && sx < cols;
        img[y * cols + x] = inside ? copy[sy * cols + (flip ? cols - 1 - sx : sx)] : 0.0f;
      }
    }
  }
}

std::mt19937_64 AugmentationRng(uint64_t seed, int64_t rank, int64_t epoch, size_t batch) {
  // Another stream than EpochOrder's for the same (seed, rank, epoch).
  std::seed_seq seq{seed, static_cast<uint64_t>(rank), static_cast<uint64_t>(epoch),
                    static_cast<uint64_t>(batch), uint64_t{0xa06}};
  return std::mt19937_64(seq);
}

torch::Tensor ForwardBackward(torch::jit::Module& model, const torch::Device& device,
                              const torch::Tensor& images, const torch::Tensor& labels) {
  for (auto& [name, p] : NamedParameters(model)) {
    if (p.mutable_grad().defined()) p.mutable_grad().zero_();
  }
  torch::Tensor logits = model.forward({images.to(device)}).toTensor();
  torch::Tensor loss = torch::nn::functional::cross_entropy(logits, labels.to(device));
  loss.backward();
  return loss;
}

double Evaluate(torch::jit::Module& model, const ImageSet& set) {
  torch::NoGradGuard no_grad;
  const torch::Device device = NamedParameters(model).front().second.device();
  model.eval();
  std::vector<int64_t> order(set.count);
  std::iota(order.begin(), order.end(), 0);
  int64_t correct = 0;
  // 256 images a forward: the CNN's activations (256 x 32 x 26 x 26 floats, 22 MB) stay
  // below malloc's mmap threshold and are reused, where 1,000 (87 MB) were mapped and
  // faulted in afresh each time. The test set took 1.2 s instead of 2.0.
  constexpr size_t kChunk = 256;
  for (size_t begin = 0; begin < order.size(); begin += kChunk) {
    const size_t end = std::min(order.size(), begin + kChunk);
    torch::Tensor logits =
        model.forward({ImageBatch(set, order, begin, end).to(device)}).toTensor();
    correct +=
        logits.argmax(1).eq(LabelBatch(set, order, begin, end).to(device)).sum().item<int64_t>();
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(set.count);
}

BatchLoader::BatchLoader(const ImageSet& set, std::vector<int64_t> order, size_t first_batch,
                         int batch_size, AugmentedBy augment, int depth)
    : set_(set),
      order_(std::move(order)),
      batch_size_(static_cast<size_t>(std::max(1, batch_size))),
      augment_(augment),
      depth_(static_cast<size_t>(std::max(1, depth))) {
  thread_ = std::thread([this, first_batch] { Run(first_batch); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BatchLoader::Run(size_t first_batch) {
  for (size_t begin = first_batch * batch_size_; begin < order_.size(); begin += batch_size_) {
    const size_t end = std::min(order_.size(), begin + batch_size_);
    auto batch =
        std::make_pair(ImageBatch(set_, order_, begin, end), LabelBatch(set_, order_, begin, end));
    if (augment_.augment.any()) {
      std::mt19937_64 rng =
          AugmentationRng(augment_.seed, augment_.rank, augment_.epoch, begin / batch_size_);
      Augment(augment_.augment, rng, &batch.first);
    }
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return stopping_ || ready_.size() < depth_; });
    if (stopping_) return;
    ready_.push_back(std::move(batch));
    changed_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = true;
  changed_.notify_all();
}

bool BatchLoader::Next(torch::Tensor* images, torch::Tensor* labels) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return !ready_.empty() || finished_; });
  if (ready_.empty()) return false;
  *images = std::move(ready_.front().first);
  *labels = std::move(ready_.front().second);
  ready_.pop_front();
  changed_.notify_all();
  return true;
}

std::vector<float*> ParameterData(const torch::jit::Module& model) {
  std::vector<float*> out;
  for (auto& [name, p] : NamedParameters(model)) out.push_back(p.data_ptr<float>());
  return out;
}

std::vector<float*> GradientData(const torch::jit::Module& model) {
  std::vector<float*> out;
  for (auto& [name, p] : NamedParameters(model)) {
    torch::Tensor g = p.mutable_grad();
    if (!g.defined()) {
      p.mutable_grad() = torch::zeros_like(p);
      g = p.mutable_grad();
    }
    out.push_back(g.data_ptr<float>());
  }
  return out;
}

HostParameters::HostParameters(const torch::jit::Module& model) : model_(model) {
  for (auto& [name, p] : NamedParameters(model)) {
    device_params_.push_back(p);
    if (!p.device().is_cpu()) on_host_ = false;
  }
  for (const torch::Tensor& p : device_params_) {
    if (on_host_) {
      param_data_.push_back(p.data_ptr<float>());
      continue;
    }
    auto pinned = torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(true);
    host_params_.push_back(torch::empty(p.sizes(), pinned));
    host_grads_.push_back(torch::zeros(p.sizes(), pinned));
    param_data_.push_back(host_params_.back().data_ptr<float>());
  }
}

void HostParameters::FromModel() {
  if (on_host_) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < device_params_.size(); ++i) host_params_[i].copy_(device_params_[i]);
}

void HostParameters::ToModel() {
  if (on_host_) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < device_params_.size(); ++i) device_params_[i].copy_(host_params_[i]);
}

std::vector<float*> HostParameters::Gradients() {
  if (on_host_) return GradientData(model_);
  std::vector<float*> out;
  for (size_t i = 0; i < device_params_.size(); ++i) {
    const torch::Tensor& g = device_params_[i].grad();
    if (g.defined()) {
      host_grads_[i].copy_(g);
    } else {
      host_grads_[i].zero_();
    }
    out.push_back(host_grads_[i].data_ptr<float>());
  }
  return out;
}

}  // namespace tarn::train
