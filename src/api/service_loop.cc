#include "api/service_loop.h"

#include <algorithm>
#include <future>

namespace tarn::api {

ServiceLoop::ServiceLoop(const Clock& clock, std::chrono::milliseconds max_idle)
    : clock_(clock), max_idle_(max_idle) {}

ServiceLoop::~ServiceLoop() { Stop(); }

void ServiceLoop::Start(service::Manager* manager) {
  manager_ = manager;
  snapshots_.Publish(*manager_);
  thread_ = std::thread([this] { Run(); });
}

void ServiceLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  stopped_ = true;
}

void ServiceLoop::Post(service::BackendEvent event) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    events_pending_.push_back(std::move(event));
  }
  cv_.notify_one();
}

bool ServiceLoop::Call(const std::function<void(service::Manager&)>& f) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  {
    std::lock_guard lock(mu_);
    if (stopping_ || stopped_) return false;
    tasks_.push_back(Task{&f, &done});
  }
  cv_.notify_one();
  finished.wait();
  return true;
}

uint64_t ServiceLoop::events_handled() const { return events_.load(); }

uint64_t ServiceLoop::calls_handled() const { return calls_.load(); }

void ServiceLoop::Run() {
  for (;;) {
    std::deque<Task> batch;
    std::vector<service::BackendEvent> events;
    {
      std::unique_lock lock(mu_);
      if (tasks_.empty() && events_pending_.empty() && !stopping_) {
        // Sleep until the manager's next deadline, measured on its clock.
        auto wait = max_idle_;
        if (auto next = manager_->NextDeadline()) {
          auto until = std::chrono::duration_cast<std::chrono::milliseconds>(*next - clock_.Now());
          wait = std::clamp(until + std::chrono::milliseconds(1), std::chrono::milliseconds(0),
                            max_idle_);
        }
        if (unpublished_) {
          // A round's changes wait at most kPublishInterval for their snapshot.
          const auto due = std::chrono::ceil<std::chrono::milliseconds>(
              last_publish_ + publish_gap_ - std::chrono::steady_clock::now());
          wait = std::clamp(due, std::chrono::milliseconds(0), wait);
        }
        cv_.wait_for(lock, wait,
                     [this] { return !tasks_.empty() || !events_pending_.empty() || stopping_; });
      }
      batch.swap(tasks_);
      events.swap(events_pending_);
      if (batch.empty() && events.empty() && stopping_) return;
    }
    // A burst of events is handled as one: one reconciliation, one store write.
    if (!events.empty()) {
      manager_->Handle(events);
      events_ += events.size();
    }
    // Tasks run without the lock: they call the backend, which may Post() at once.
    for (const Task& task : batch) {
      (*task.f)(*manager_);
      ++calls_;
    }
    auto next = manager_->NextDeadline();
    if ((batch.empty() && events.empty()) || (next && *next <= clock_.Now())) manager_->Tick();
    // Before a command is acknowledged, its snapshot is out. A round of backend events alone
    // publishes once kPublishShare times what the last publish took has passed since it,
    // and at most kPublishInterval after it: a snapshot walks every assembly, and one
    // per event made a thousand instances' launch 40% slower, while a few instances' change
    // (well under a millisecond to publish) is shown at once.
    const auto now = std::chrono::steady_clock::now();
    if (!batch.empty() || now - last_publish_ >= publish_gap_) {
      snapshots_.Publish(*manager_);
      last_publish_ = std::chrono::steady_clock::now();
      publish_gap_ = std::min<std::chrono::steady_clock::duration>(
          kPublishInterval, (last_publish_ - now) * kPublishShare);
      unpublished_ = false;
    } else {
      unpublished_ = true;
    }
    for (const Task& task : batch) task.done->set_value();
  }
}

}  // namespace tarn::api
