#include "train/progress.h"

#include <chrono>
#include <nlohmann/json.hpp>

namespace tarn::train {

std::string Progress::JsonLine(const std::string& task) const {
  nlohmann::json j = {
      {"time_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count()},
      {"task", task},
      {"step", global_step.load()},
      {"own_steps", steps.load()},
      {"loss", loss.load()},
      {"samples_per_s", samples_per_second.load()},
      {"staleness", staleness.load()},
  };
  if (accuracy.load() >= 0) j["accuracy"] = accuracy.load();
  if (exported_version.load() > 0) j["exported_version"] = exported_version.load();
  return j.dump();
}

std::string Progress::PrometheusText() const {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + std::to_string(value) + "\n";
  };
  metric("tarn_train_steps_total", "counter", "Updates this task computed and pushed.",
         static_cast<double>(steps.load()));
  metric("tarn_train_global_step", "gauge", "The cluster's step.",
         static_cast<double>(global_step.load()));
  metric("tarn_train_samples_total", "counter", "Training images this task went through.",
         static_cast<double>(samples.load()));
  metric("tarn_train_loss", "gauge", "Mean training loss of the recent steps.", loss.load());
  metric("tarn_train_samples_per_second", "gauge", "Training throughput of this task.",
         samples_per_second.load());
  metric("tarn_train_staleness", "gauge",
         "Async: updates applied between a gradient's pull and its push, recent mean.",
         staleness.load());
  if (accuracy.load() >= 0) {
    metric("tarn_train_test_accuracy", "gauge", "Test accuracy at the last evaluation.",
           accuracy.load());
  }
  metric("tarn_train_exported_version", "gauge", "The last version exported (0: none).",
         static_cast<double>(exported_version.load()));
  metric("tarn_train_export_timestamp_seconds", "gauge",
         "When the last version was exported, in seconds since the epoch (0: none).",
         export_time.load());
  metric("tarn_train_checkpoint_step", "gauge", "The step of the last checkpoint (-1: none).",
         static_cast<double>(checkpoint_step.load()));
  metric("tarn_train_checkpoint_timestamp_seconds", "gauge",
         "When the last checkpoint was written, in seconds since the epoch (0: none).",
         checkpoint_time.load());
  return out;
}

namespace {
double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void Progress::Exported(int64_t version) {
  export_time = WallSeconds();
  exported_version = version;
}

void Progress::Checkpointed(int64_t step) {
  checkpoint_time = WallSeconds();
  checkpoint_step = step;
}

StepReporter::StepReporter(Progress* progress, std::string task, double every_secs,
                           std::function<void(const std::string&)> log)
    : progress_(progress != nullptr ? progress : &own_),
      task_(std::move(task)),
      every_(every_secs),
      log_(std::move(log)) {}

double StepReporter::mean_loss() const {
  double sum = 0;
  for (double l : losses_) sum += l;
  return losses_.empty() ? 0 : sum / static_cast<double>(losses_.size());
}

void StepReporter::Step(int64_t global_step, int64_t batch_samples, double loss, double staleness) {
  Progress& p = *progress_;
  ++p.steps;
  p.global_step = global_step;
  p.samples += batch_samples;
  losses_.push_back(loss);
  staleness_.push_back(staleness);
  if (losses_.size() > 100) {
    losses_.pop_front();
    staleness_.pop_front();
  }
  double stale = 0;
  for (double s : staleness_) stale += s;
  p.loss = mean_loss();
  p.staleness = stale / static_cast<double>(staleness_.size());
  interval_samples_ += batch_samples;
  const auto now = std::chrono::steady_clock::now();
  const std::chrono::duration<double> elapsed = now - interval_start_;
  if (elapsed.count() > 0) {
    p.samples_per_second = static_cast<double>(interval_samples_) / elapsed.count();
  }
  if (elapsed >= every_) {
    if (log_) log_(p.JsonLine(task_));
    interval_start_ = now;
    interval_samples_ = 0;
  }
}

}  // namespace tarn::train
