#include "train/local_trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "train/checkpoint.h"
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
  ASSIGN_OR_RETURN(ImageSet train, ReadImageSet(o.data_dir, "train"));
  ASSIGN_OR_RETURN(ImageSet test, ReadImageSet(o.data_dir, "t10k"));
  ASSIGN_OR_RETURN(torch::jit::Module model, LoadModel(o.model, o.seed));
  try {
    SetUpTorch(o.threads, o.jit_optimize);
    ASSIGN_OR_RETURN(const torch::Device device, ChooseDevice(o.device));
    model.to(device);
    // One optimiser per parameter, on the parameters' host memory (the tensors' own on the
    // CPU): element by element what a parameter server applies to its share.
    HostParameters host(model);
    const std::vector<float*>& params = host.params();
    std::vector<size_t> sizes;
    std::vector<FlatOptimizer> optimizers;
    for (const auto& [name, p] : NamedParameters(model)) {
      sizes.push_back(static_cast<size_t>(p.numel()));
      ASSIGN_OR_RETURN(FlatOptimizer opt, FlatOptimizer::Create(o.optimizer, sizes.back()));
      optimizers.push_back(std::move(opt));
    }
    const size_t elements = std::accumulate(sizes.begin(), sizes.end(), size_t{0});

    int64_t step = 0, epoch = 1, position = 0;  // position: the batches done this epoch
    StatusOr<Checkpoint> latest = ReadResumableCheckpoint(
        o.checkpoint_dir, o.model, o.optimizer.kind, elements, BufferElements(model));
    if (latest.ok()) {
      // Model order, one parameter after another: [0] the parameters, then the moments.
      size_t at = 0;
      for (size_t i = 0; i < sizes.size(); at += sizes[i], ++i) {
        std::memcpy(params[i], latest->arrays[0].data() + at, sizes[i] * sizeof(float));
        for (int k = 0; k < optimizers[i].moment_arrays(); ++k) {
          std::memcpy(optimizers[i].moment(k), latest->arrays[1 + k].data() + at,
                      sizes[i] * sizeof(float));
        }
        optimizers[i].set_steps(latest->step);
      }
      host.ToModel();
      RETURN_IF_ERROR(SetBufferValues(model, latest->buffers));
      step = latest->step;
      epoch = latest->epoch;
      position = latest->position;
      log("resuming from the checkpoint of step " + std::to_string(step) + " at epoch " +
          std::to_string(epoch) + ", batch " + std::to_string(position));
    } else if (latest.status().code() != StatusCode::kNotFound) {
      return latest.status();
    } else {
      host.FromModel();
    }

    std::vector<int64_t> order(static_cast<size_t>(
        o.train_limit > 0 ? std::min(o.train_limit, train.count) : train.count));
    std::iota(order.begin(), order.end(), 0);
    LocalTrainingResult result;
    StepReporter reporter(o.progress, "trainer", o.log_every_secs, o.log);
    Progress& progress = reporter.progress();
    const auto start = std::chrono::steady_clock::now();
    Every exports(o.export_every_secs, o.export_every_steps),
        checkpoints(o.checkpoint_every_secs, o.checkpoint_every_steps);
    exports.Mark(step);
    checkpoints.Mark(step);
    // Evaluating, exporting and checkpointing are left out of the training throughput.
    std::chrono::steady_clock::duration paused{};
    int64_t samples = 0, evaluated_step = -1;

    auto checkpoint_now = [&]() -> Status {
      const auto began = std::chrono::steady_clock::now();
      Checkpoint ck;
      ck.step = step;
      ck.model = o.model;
      ck.optimizer = o.optimizer.kind;
      ck.epoch = epoch;
      ck.position = position;
      ck.arrays.assign(1 + static_cast<size_t>(optimizers.front().moment_arrays()),
                       std::vector<float>(elements));
      size_t at = 0;  // params() hold the newest values: the optimisers write there
      for (size_t i = 0; i < sizes.size(); at += sizes[i], ++i) {
        std::memcpy(ck.arrays[0].data() + at, params[i], sizes[i] * sizeof(float));
        for (int k = 0; k < optimizers[i].moment_arrays(); ++k) {
          std::memcpy(ck.arrays[1 + k].data() + at, optimizers[i].moment(k),
                      sizes[i] * sizeof(float));
        }
      }
      ck.buffers = BufferValues(model);
      RETURN_IF_ERROR(WriteCheckpoint(o.checkpoint_dir, ck));
      log("checkpoint of step " + std::to_string(step) + " (epoch " + std::to_string(epoch) +
          ", batch " + std::to_string(position) + ")");
      checkpoints.Mark(step);
      paused += std::chrono::steady_clock::now() - began;
      progress.Checkpointed(step);
      return OkStatus();
    };
    // `epoch_done`: the epoch whose end this is, for the log line; 0 mid-epoch.
    auto evaluate_and_export = [&](int64_t epoch_done) -> Status {
      const auto began = std::chrono::steady_clock::now();
      evaluated_step = step;
      result.accuracy = Evaluate(model, test);
      progress.accuracy = result.accuracy;
      const double seconds = std::chrono::duration<double>(began - start - paused).count();
      result.samples_per_second = seconds > 0 ? static_cast<double>(samples) / seconds : 0;
      if (epoch_done > 0) {
        log("epoch " + std::to_string(epoch_done) + " done: step " + std::to_string(step) +
            " loss " + std::to_string(reporter.mean_loss()) + " test accuracy " +
            std::to_string(result.accuracy) + " (" +
            std::to_string(static_cast<int64_t>(result.samples_per_second)) + " samples/s)");
      } else {
        log("step " + std::to_string(step) + ": test accuracy " + std::to_string(result.accuracy));
      }
      if (!o.export_base.empty()) {
        ASSIGN_OR_RETURN(result.exported_version,
                         ExportTrainedModel(model, o, train.rows, train.cols, result.accuracy, step,
                                            epoch_done));
        progress.Exported(result.exported_version);
      }
      exports.Mark(step);
      paused += std::chrono::steady_clock::now() - began;
      return OkStatus();
    };

    model.train();
    bool done = o.max_steps > 0 && step >= o.max_steps;
    for (; epoch <= o.epochs && !done; ++epoch, position = 0) {
      BatchLoader loader(train, EpochOrder(order, o.seed, 0, epoch), static_cast<size_t>(position),
                         o.batch_size, {o.augment, o.seed, 0, epoch});
      torch::Tensor images, labels;
      while (loader.Next(&images, &labels)) {
        torch::Tensor loss = ForwardBackward(model, device, images, labels);
        {
          torch::NoGradGuard no_grad;  // the optimiser writes the parameters in place
          const std::vector<float*> gradients = host.Gradients();
          for (size_t i = 0; i < optimizers.size(); ++i) optimizers[i].Apply(params[i], gradients[i]);
          host.ToModel();
        }
        ++step;
        ++position;
        ++result.steps;
        samples += images.size(0);
        reporter.Step(step, images.size(0), loss.item<double>());
        result.last_loss = reporter.mean_loss();
        if (o.max_steps > 0 && step >= o.max_steps) {
          done = true;
          break;
        }
        if (!o.checkpoint_dir.empty() && checkpoints.Due(step)) RETURN_IF_ERROR(checkpoint_now());
        if (exports.Due(step)) RETURN_IF_ERROR(evaluate_and_export(0));
      }
      if (done) break;  // mid-epoch: the checkpoint keeps this epoch and position
      RETURN_IF_ERROR(evaluate_and_export(epoch));
    }
    if (!o.checkpoint_dir.empty() && checkpoints.last_step() != step) {
      RETURN_IF_ERROR(checkpoint_now());
    }
    // Stopped mid-epoch (max_steps), or resumed with nothing left to do: evaluate and export
    // what there is (not a second time when an epoch's end already did, at this step).
    if (evaluated_step != step) RETURN_IF_ERROR(evaluate_and_export(0));
    return result;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    return InternalError("training " + o.model + ": " + what);
  }
}

}  // namespace tarn::train
