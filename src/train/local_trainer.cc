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
    SetUpTorch(o.threads, o.jit_optimize);
    ASSIGN_OR_RETURN(const torch::Device device, ChooseDevice(o.device));
    model.to(device);
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
    StepReporter reporter(o.progress, "trainer", o.log_every_secs, o.log);
    const auto start = std::chrono::steady_clock::now();
    int64_t samples = 0;
    bool done = false;
    for (int epoch = 1; epoch <= o.epochs && !done; ++epoch) {
      std::shuffle(order.begin(), order.end(), rng);
      BatchLoader loader(train, order, 0, o.batch_size);
      torch::Tensor images, labels;
      while (loader.Next(&images, &labels)) {
        images = images.to(device);
        labels = labels.to(device);
        torch::Tensor logits = model.forward({images}).toTensor();
        torch::Tensor loss = torch::nn::functional::cross_entropy(logits, labels);
        optimizer->zero_grad();
        loss.backward();
        optimizer->step();
        ++result.steps;
        samples += images.size(0);
        reporter.Step(result.steps, images.size(0), loss.item<double>());
        if (o.max_steps > 0 && result.steps >= o.max_steps) {
          done = true;
          break;
        }
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      result.samples_per_second = seconds > 0 ? static_cast<double>(samples) / seconds : 0;
      result.last_loss = reporter.mean_loss();
      result.accuracy = Evaluate(model, test);
      reporter.progress().accuracy = result.accuracy;
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
                         ExportVersion(model, o.export_base, o.model_name, meta, o.keep_versions));
        reporter.progress().exported_version = result.exported_version;
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
