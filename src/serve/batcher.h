// Batcher: dynamic batching for one loaded model version. Requests (tasks of one or more
// examples) queue up; a batch thread takes the oldest and adds the next ones, concatenates
// them, runs the model once, and hands each task its rows of the output. The queue holds at
// most max_enqueued_batches full batches: past that, Submit answers Unavailable at once
// rather than letting a client wait. A task larger than max_batch_size runs as a batch of
// its own. Tasks are batched only with tasks whose examples have the same shape.
//
// When a batch goes: at once when it is full (max_batch_size examples) or when nothing more
// is on its way, that is when no other batch thread is running a batch and no announced
// request (Announce: one an HTTP thread is decoding) is still to come; otherwise when more
// arrive or the oldest task has waited batch_timeout_micros, whichever is first. So a lone
// client never waits out the timeout for company that cannot come, while under load the
// tasks that arrive during a batch form the next one (TF Serving's BasicBatchScheduler and
// Triton's dynamic batcher wait out the timeout either way). This is Linux's TCP
// autocorking applied to batches: hold small writes only while earlier ones are in flight.
//
// Thread-safe: Submit from any thread. `done` runs on a batch thread, exactly once per
// accepted task. The destructor answers tasks still queued with Unavailable and joins the
// threads; it must not run on a batch thread (the owner keeps the Batcher alive until its
// tasks are answered, and its Arrivals end before it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
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

  // A request on its way: while one is held, a partial batch waits for it (up to the
  // timeout). It ends when passed to Submit or destroyed (a request that failed to decode).
  class Arrival {
   public:
    Arrival() : batcher_(nullptr) {}
    Arrival(Arrival&& other) noexcept : batcher_(std::exchange(other.batcher_, nullptr)) {}
    Arrival& operator=(Arrival&& other) noexcept;
    ~Arrival() { End(); }
    void End();

   private:
    friend class Batcher;
    explicit Arrival(Batcher* b) : batcher_(b) {}
    Batcher* batcher_;
  };
  Arrival Announce();

  // Queues `input` ([N, ...]); Unavailable when the queue is full (done is not called).
  // Ends `arrival` either way.
  Status Submit(Tensor input, Done done, Arrival arrival = {});

  // Examples waiting now.
  int64_t QueuedExamples() const;

 private:
  struct Task {
    Tensor input;
    Done done;
    std::chrono::steady_clock::time_point enqueued;
  };

  void Loop();
  // Whether the batch at the front of the queue goes now. Requires mu_.
  bool ShouldRunLocked(std::chrono::steady_clock::time_point now) const;
  void RunBatch(std::vector<Task>& tasks);

  const BatchingParameters params_;
  const Runner runner_;
  const std::function<void(const BatchStats&)> on_batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;      // guarded by mu_
  int64_t queued_examples_ = 0;  // guarded by mu_
  int64_t arriving_ = 0;         // announced requests not yet submitted; guarded by mu_
  int64_t running_ = 0;          // batches being run now; guarded by mu_
  bool stopping_ = false;        // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace tarn::serve
