#include "serve/batcher.h"

#include <algorithm>
#include <cstring>

namespace tarn::serve {

Batcher::Batcher(BatchingParameters params, Runner runner,
                 std::function<void(const BatchStats&)> on_batch)
    : params_(params), runner_(std::move(runner)), on_batch_(std::move(on_batch)) {
  for (int64_t i = 0; i < params_.num_batch_threads; ++i) threads_.emplace_back([this] { Loop(); });
}

Batcher::~Batcher() {
  std::deque<Task> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    left.swap(queue_);
    queued_examples_ = 0;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  for (Task& t : left) t.done(UnavailableError("the model version is being unloaded"), {});
}

Batcher::Arrival& Batcher::Arrival::operator=(Arrival&& other) noexcept {
  if (this != &other) {
    End();
    batcher_ = std::exchange(other.batcher_, nullptr);
  }
  return *this;
}

void Batcher::Arrival::End() {
  Batcher* b = std::exchange(batcher_, nullptr);
  if (b == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(b->mu_);
    --b->arriving_;
  }
  // A partial batch may have been waiting for this request alone.
  b->cv_.notify_all();
}

Batcher::Arrival Batcher::Announce() {
  std::lock_guard<std::mutex> lock(mu_);
  ++arriving_;
  return Arrival(this);
}

Status Batcher::Submit(Tensor input, Done done, Arrival arrival) {
  if (input.shape.empty() || input.shape[0] < 1) {
    return InvalidArgumentError("a batch task needs at least one example");
  }
  const int64_t n = input.shape[0];
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (arrival.batcher_ == this) {  // it arrives now, with the lock held: no wake-up between
      arrival.batcher_ = nullptr;
      --arriving_;
    }
    if (stopping_) return UnavailableError("the model version is being unloaded");
    const int64_t capacity = params_.max_enqueued_batches * params_.max_batch_size;
    // An empty queue always takes a task, however large, so that big requests still run.
    if (queued_examples_ > 0 && queued_examples_ + n > capacity) {
      return UnavailableError("the batching queue is full (" + std::to_string(queued_examples_) +
                              " examples waiting, max_enqueued_batches " +
                              std::to_string(params_.max_enqueued_batches) + " x max_batch_size " +
                              std::to_string(params_.max_batch_size) + ")");
    }
    queue_.push_back(Task{std::move(input), std::move(done), std::chrono::steady_clock::now()});
    queued_examples_ += n;
  }
  cv_.notify_all();  // a thread waiting for company, and an idle one, may both go now
  return OkStatus();
}

int64_t Batcher::QueuedExamples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_examples_;
}

bool Batcher::ShouldRunLocked(std::chrono::steady_clock::time_point now) const {
  if (queued_examples_ >= params_.max_batch_size) return true;  // full
  if (running_ == 0 && arriving_ == 0) return true;             // nothing more is coming
  return now >= queue_.front().enqueued + std::chrono::microseconds(params_.batch_timeout_micros);
}

void Batcher::Loop() {
  const auto timeout = std::chrono::microseconds(params_.batch_timeout_micros);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    // Wait while more is on its way: for a full batch, for the batches in flight and the
    // announced requests, or for the oldest task's deadline, whichever comes first.
    const auto deadline = queue_.front().enqueued + timeout;
    cv_.wait_until(lock, deadline, [&] {
      return stopping_ || queue_.empty() || ShouldRunLocked(std::chrono::steady_clock::now());
    });
    if (stopping_) return;
    if (queue_.empty()) continue;  // another thread took them
    // Woken early, and the front is now a younger task: wait for its own deadline.
    if (!ShouldRunLocked(std::chrono::steady_clock::now())) continue;
    std::vector<Task> tasks;
    const std::vector<int64_t>& shape = queue_.front().input.shape;
    const std::vector<int64_t> example(shape.begin() + 1, shape.end());
    int64_t examples = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      const int64_t n = it->input.shape[0];
      const bool same = std::equal(example.begin(), example.end(), it->input.shape.begin() + 1,
                                   it->input.shape.end());
      if (!tasks.empty() && (!same || examples + n > params_.max_batch_size)) {
        if (examples + n > params_.max_batch_size) break;
        ++it;
        continue;
      }
      examples += n;
      queued_examples_ -= n;
      tasks.push_back(std::move(*it));
      it = queue_.erase(it);
      if (examples >= params_.max_batch_size) break;
    }
    // Others may be able to start on what is left.
    if (!queue_.empty()) cv_.notify_one();
    ++running_;
    lock.unlock();
    RunBatch(tasks);
    tasks.clear();  // the tasks' callbacks and their captures go before the lock is retaken
    lock.lock();
    --running_;
    // Threads holding a partial batch back for this one's company may go now.
    if (!queue_.empty()) cv_.notify_all();
  }
}

void Batcher::RunBatch(std::vector<Task>& tasks) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<Tensor> output = InternalError("no output");
  int64_t examples = 0;
  if (tasks.size() == 1) {
    examples = tasks[0].input.shape[0];
    output = runner_(tasks[0].input);
  } else {
    Tensor batch;
    batch.shape = tasks[0].input.shape;
    for (const Task& t : tasks) examples += t.input.shape[0];
    batch.shape[0] = examples;
    batch.data.reserve(static_cast<size_t>(batch.NumElements()));
    for (const Task& t : tasks) {
      batch.data.insert(batch.data.end(), t.input.data.begin(), t.input.data.end());
    }
    output = runner_(batch);
  }
  const auto end = std::chrono::steady_clock::now();
  if (on_batch_) on_batch_(BatchStats{examples, end - start});
  if (output.ok() && (output->shape.empty() || output->shape[0] != examples)) {
    output = InternalError("the model returned shape " + ShapeString(output->shape) + " for " +
                           std::to_string(examples) + " examples");
  }
  if (!output.ok()) {
    for (Task& t : tasks) t.done(output.status(), start - t.enqueued);
    return;
  }
  if (tasks.size() == 1) {
    tasks[0].done(std::move(output), start - tasks[0].enqueued);
    return;
  }
  const int64_t row = output->RowElements();
  int64_t offset = 0;
  for (Task& t : tasks) {
    Tensor part;
    part.shape = output->shape;
    part.shape[0] = t.input.shape[0];
    const auto first = output->data.begin() + offset * row;
    part.data.assign(first, first + part.shape[0] * row);
    offset += part.shape[0];
    t.done(std::move(part), start - t.enqueued);
  }
}

}  // namespace tarn::serve
