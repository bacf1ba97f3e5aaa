// Batcher: dynamic batching for one loaded model version, as TF Serving's
// BasicBatchScheduler does it. Requests (tasks of one or more examples) queue up; a batch
// thread takes the oldest and adds the next ones until the batch holds max_batch_size
// examples or the oldest has waited batch_timeout_micros, concatenates them, runs the model
// once, and hands each task its rows of the output. The queue holds at most
// max_enqueued_batches full batches: past that, Submit answers Unavailable at once rather
// than letting a client wait. A task larger than max_batch_size runs as a batch of its own.
// Tasks are batched only with tasks whose examples have the same shape.
//
// Thread-safe: Submit from any thread. `done` runs on a batch thread, exactly once per
// accepted task. The destructor answers tasks still queued with Unavailable and joins the
// threads; it must not run on a batch thread (the owner keeps the Batcher alive until its
// tasks are answered).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "serve/serve_config.h"
#include "serve/tensor.h"

namespace tarn::serve {

// What a batch cost, for metrics.
struct BatchStats {
  int64_t examples = 0;
  std::chrono::nanoseconds compute{0};
};

class Batcher {
 public:
  using Runner = std::function<StatusOr<Tensor>(const Tensor& batch)>;
  using Done = std::function<void(StatusOr<Tensor> output, std::chrono::nanoseconds queued)>;

  Batcher(BatchingParameters params, Runner runner,
          std::function<void(const BatchStats&)> on_batch = nullptr);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues `input` ([N, ...]); Unavailable when the queue is full (done is not called).
  Status Submit(Tensor input, Done done);

  // Examples waiting now.
  int64_t QueuedExamples() const;

 private:
  struct Task {
    Tensor input;
    Done done;
    std::chrono::steady_clock::time_point enqueued;
  };

  void Loop();
  void RunBatch(std::vector<Task>& tasks);

  const BatchingParameters params_;
  const Runner runner_;
  const std::function<void(const BatchStats&)> on_batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;      // guarded by mu_
  int64_t queued_examples_ = 0;  // guarded by mu_
  bool stopping_ = false;        // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace tarn::serve
