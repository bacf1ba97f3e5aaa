// Progress: what a tarn-train task reports about itself, written by the training loop and
// read by the metrics endpoint and the periodic JSON lines on stdout. Lock-free; any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>

namespace tarn::train {

struct Progress {
  std::atomic<int64_t> steps{0};        // updates this task computed (its own pushes)
  std::atomic<int64_t> global_step{0};  // the cluster's step (server 0's), or steps alone
  std::atomic<int64_t> samples{0};      // training images this task went through
  std::atomic<double> loss{0};          // mean of the recent steps
  std::atomic<double> samples_per_second{0};
  std::atomic<double> accuracy{-1};  // the last evaluation; -1 before any
  std::atomic<double> staleness{0};  // async: updates applied between pull and push, mean
  std::atomic<int64_t> exported_version{0};
  std::atomic<double> export_time{0};  // of the last export: seconds since the epoch; 0: none
  std::atomic<int64_t> checkpoint_step{-1};
  std::atomic<double> checkpoint_time{0};  // of the last checkpoint, as export_time

  // The training loops' reports of a version exported and a checkpoint written, now.
  void Exported(int64_t version);
  void Checkpointed(int64_t step);

  // One JSON object, e.g. {"task":"worker 0","step":120,"loss":0.41,...}; no newline.
  std::string JsonLine(const std::string& task) const;
  // Prometheus text: tarn_train_* gauges and counters.
  std::string PrometheusText() const;
};

// Every: a schedule of "every `secs` seconds or every `steps` steps, whichever comes first"
// (0 turns either off), counted from the last Mark(); nothing is due before the first.
// The training loops keep their evaluations and checkpoints with it. Thread-compatible.
class Every {
 public:
  Every(double secs, int64_t steps) : secs_(secs), steps_(steps) {}
  void Mark(int64_t step) {
    last_time_ = std::chrono::steady_clock::now();
    last_step_ = step;
    marked_ = true;
  }
  bool marked() const { return marked_; }
  int64_t last_step() const { return last_step_; }
  bool Due(int64_t step) const {
    return marked_ && ((secs_ > 0 && std::chrono::steady_clock::now() - last_time_ >
                                         std::chrono::duration<double>(secs_)) ||
                       (steps_ > 0 && step - last_step_ >= steps_));
  }

 private:
  double secs_;
  int64_t steps_;
  std::chrono::steady_clock::time_point last_time_;
  int64_t last_step_ = 0;
  bool marked_ = false;
};

// StepReporter: what a training loop calls after each step. It keeps a Progress current (the
// mean loss and staleness of the last 100 steps, throughput over the last interval) and
// writes a Progress::JsonLine through `log` every `every_secs` seconds. Not thread-safe:
// the training thread owns it.
class StepReporter {
 public:
  StepReporter(Progress* progress, std::string task, double every_secs,
               std::function<void(const std::string&)> log);

  void Step(int64_t global_step, int64_t batch_samples, double loss, double staleness = 0);
  double mean_loss() const;
  Progress& progress() { return *progress_; }

 private:
  Progress own_;  // when the caller gives none
  Progress* progress_;
  const std::string task_;
  const std::chrono::duration<double> every_;
  const std::function<void(const std::string&)> log_;
  std::deque<double> losses_, staleness_;
  std::chrono::steady_clock::time_point interval_start_ = std::chrono::steady_clock::now();
  int64_t interval_samples_ = 0;
};

}  // namespace tarn::train
