#include "train/local_trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "train/idx.h"
#include "train/image_batches.h"
#include "train/model_export.h"
#include "train/model_zoo.h"

namespace tarn::train {

StatusOr<LocalTrainingResult> RunLocalTraining(const LocalTrainingOptions& o) {
  auto log = [&](const std::string& line) {
    if (o.log) o.log(line);
  };
  if (o.batch_size < 1) return InvalidArgumentError("--batch_size must be at least 1");
  if (o.epochs < 1) return InvalidArgumentError("--epochs must be at least 1");
  if (o.optimizer != "adam" && o.optimizer != "sgd") {
    return InvalidArgumentError("--optimizer \"" + o.optimizer + "\": expected adam or sgd");
  }
  ASSIGN_OR_RETURN(ImageSet train, ReadImageSet(o.data_dir, "train"));
  ASSIGN_OR_RETURN(ImageSet test, ReadImageSet(o.data_dir, "t10k"));
  if (o.train_limit > 0 && o.train_limit < train.count) {
    train.count = o.train_limit;
    train.pixels.resize(static_cast<size_t>(train.count * train.rows * train.cols));
    train.labels.resize(static_cast<size_t>(train.count));
  }
  ASSIGN_OR_RETURN(torch::jit::Module model, LoadModel(o.model, o.seed));
  try {
    at::set_num_threads(std::max(1, o.threads));
    torch::manual_seed(o.seed);
    std::vector<torch::Tensor> params;
    for (const auto& [name, p] : NamedParameters(model)) params.push_back(p);
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    if (o.optimizer == "adam") {
      optimizer =
          std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(o.learning_rate));
    } else {
      optimizer = std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(o.learning_rate).momentum(o.momentum));
    }
    model.train();
    std::mt19937_64 rng(o.seed);
    std::vector<int64_t> order(train.count);
    std::iota(order.begin(), order.end(), 0);
    LocalTrainingResult result;
    std::vector<double> recent;  // the last 100 losses
    const auto start = std::chrono::steady_clock::now();
    int64_t samples = 0;
    bool done = false;
    for (int epoch = 1; epoch <= o.epochs && !done; ++epoch) {
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t begin = 0; begin < order.size(); begin += o.batch_size) {
        const size_t end = std::min(order.size(), begin + static_cast<size_t>(o.batch_size));
        torch::Tensor logits = model.forward({ImageBatch(train, order, begin, end)}).toTensor();
        torch::Tensor loss =
            torch::nn::functional::cross_entropy(logits, LabelBatch(train, order, begin, end));
        optimizer->zero_grad();
        loss.backward();
        optimizer->step();
        ++result.steps;
        samples += static_cast<int64_t>(end - begin);
        recent.push_back(loss.item<double>());
        if (recent.size() > 100) recent.erase(recent.begin());
        if (result.steps % 100 == 0) {
          log("epoch " + std::to_string(epoch) + " step " + std::to_string(result.steps) +
              " loss " +
              std::to_string(std::accumulate(recent.begin(), recent.end(), 0.0) /
                             static_cast<double>(recent.size())));
        }
        if (o.max_steps > 0 && result.steps >= o.max_steps) {
          done = true;
          break;
        }
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      result.samples_per_second = seconds > 0 ? static_cast<double>(samples) / seconds : 0;
      result.last_loss = recent.empty() ? 0
                                        : std::accumulate(recent.begin(), recent.end(), 0.0) /
                                              static_cast<double>(recent.size());
      result.accuracy = Evaluate(model, test);
      log("epoch " + std::to_string(epoch) + " done: step " + std::to_string(result.steps) +
          " loss " + std::to_string(result.last_loss) + " test accuracy " +
          std::to_string(result.accuracy) + " (" +
          std::to_string(static_cast<int64_t>(result.samples_per_second)) + " samples/s)");
      if (!o.export_base.empty()) {
        nlohmann::json meta = {{"model", o.model},
                               {"input_shape", {1, train.rows, train.cols}},
                               {"dtype", "float32"},
                               {"labels", FashionMnistLabels()},
                               {"accuracy", result.accuracy},
                               {"step", result.steps},
                               {"epoch", epoch}};
        ASSIGN_OR_RETURN(result.exported_version,
                         ExportVersion(model, o.export_base, o.model_name, meta));
        log("exported " + o.export_base + "/" + o.model_name + "/" +
            std::to_string(result.exported_version));
      }
    }
    return result;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    return InternalError("training " + o.model + ": " + what);
  }
}

}  // namespace tarn::train
