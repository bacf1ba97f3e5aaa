#include "api/watches.h"

#include <utility>
#include <vector>

namespace tarn::api {

Watches::Watches(std::function<std::shared_ptr<const StateSnapshot>()> current, size_t max_waiting)
    : current_(std::move(current)), max_waiting_(max_waiting) {
  timer_ = std::thread([this] { RunTimer(); });
}

Watches::~Watches() {
  Close();
  if (timer_.joinable()) timer_.join();
}

bool Watches::Changed(const StateSnapshot& s, const std::string& key, uint64_t index) {
  if (index > s.generation) return true;  // counted by another run of the server
  auto it = s.by_key.find(key);
  return it == s.by_key.end() || s.assemblies[it->second]->modify_index() > index;
}

bool Watches::Wait(const std::string& key, uint64_t index, std::chrono::milliseconds wait,
                   std::function<void()> wake) {
  std::lock_guard lock(mu_);
  // Read under the lock: a snapshot published after this check is Published() after it too,
  // which then finds this waiter.
  if (closed_ || waiting_.size() >= max_waiting_ || Changed(*current_(), key, index)) {
    return false;
  }
  const Clock::time_point deadline = Clock::now() + wait;
  const bool earliest = waiting_.empty() || deadline < waiting_.begin()->first;
  waiting_.emplace(deadline, Waiter{key, index, std::move(wake)});
  if (earliest) cv_.notify_one();
  return true;
}

void Watches::Published(const StateSnapshot& snapshot) {
  std::vector<std::function<void()>> woken;
  {
    std::lock_guard lock(mu_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (Changed(snapshot, it->second.key, it->second.index)) {
        woken.push_back(std::move(it->second.wake));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& wake : woken) wake();
}

void Watches::Close() {
  std::vector<std::function<void()>> woken;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    for (auto& [deadline, waiter] : waiting_) woken.push_back(std::move(waiter.wake));
    waiting_.clear();
  }
  cv_.notify_all();
  for (auto& wake : woken) wake();
}

size_t Watches::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

void Watches::RunTimer() {
  std::unique_lock lock(mu_);
  while (!closed_) {
    if (waiting_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const Clock::time_point next = waiting_.begin()->first;
    if (Clock::now() < next) {
      cv_.wait_until(lock, next);
      continue;
    }
    std::vector<std::function<void()>> woken;
    const Clock::time_point now = Clock::now();
    while (!waiting_.empty() && waiting_.begin()->first <= now) {
      woken.push_back(std::move(waiting_.begin()->second.wake));
      waiting_.erase(waiting_.begin());
    }
    lock.unlock();
    for (auto& wake : woken) wake();
    lock.lock();
  }
}

}  // namespace tarn::api
