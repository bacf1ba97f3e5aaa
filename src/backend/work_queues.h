// The backends' task queues: the local backend's keyed pool (a strand per instance) and the
// Slurm backend's single serial thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tarn::backend {

// A fixed pool of threads running tasks posted under a key: tasks of one key run one at a
// time in the order posted (a strand); tasks of different keys run in parallel. The
// destructor drops tasks not yet begun and joins the threads. A task's exception is logged to
// stderr as "tarn: <owner>: <key>: <what>". Thread-safe.
class KeyedWorkQueue {
 public:
  KeyedWorkQueue(int threads, std::string owner) : owner_(std::move(owner)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~KeyedWorkQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // Returns once no task is queued or running.
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return queues_.empty(); });
  }

  void Post(const std::string& key, std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    auto [it, fresh] = queues_.try_emplace(key);
    it->second.push_back(std::move(task));
    // A key already present is queued in ready_ or running: its worker picks this up next.
    if (fresh) {
      ready_.push_back(key);
      cv_.notify_one();
    }
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
      if (stopping_) return;
      std::string key = std::move(ready_.front());
      ready_.pop_front();
      std::deque<std::function<void()>>& tasks = queues_.at(key);  // nodes are stable
      std::function<void()> task = std::move(tasks.front());
      tasks.pop_front();
      lock.unlock();
      try {
        task();
      } catch (const std::exception& e) {
        std::cerr << "tarn: " + owner_ + ": " + key + ": " + e.what() + "\n";
      }
      lock.lock();
      auto it = queues_.find(key);
      if (it->second.empty()) {
        queues_.erase(it);
        if (queues_.empty()) idle_cv_.notify_all();
      } else {
        ready_.push_back(key);
        cv_.notify_one();
      }
    }
  }

  const std::string owner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  bool stopping_ = false;
  std::deque<std::string> ready_;  // keys whose next task may run now
  // Tasks not yet begun, by key; a key is present while one of its tasks is queued or runs.
  std::unordered_map<std::string, std::deque<std::function<void()>>> queues_;
  std::vector<std::thread> threads_;
};

// One thread running tasks in the order posted. The destructor drops tasks not yet begun
// and joins the thread. A task's exception is logged as "tarn: <owner>: <what>". Thread-safe.
class SerialQueue {
 public:
  explicit SerialQueue(std::string owner) : owner_(std::move(owner)), thread_([this] { Work(); }) {}
  ~SerialQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Returns once no task is queued or running.
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return tasks_.empty() && !running_; });
  }
  void Post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
    cv_.notify_one();
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      running_ = true;
      lock.unlock();
      try {
        task();
      } catch (const std::exception& e) {
        std::cerr << "tarn: " + owner_ + ": " + e.what() + "\n";
      }
      lock.lock();
      running_ = false;
      if (tasks_.empty()) idle_cv_.notify_all();
    }
  }

  const std::string owner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  bool stopping_ = false;
  bool running_ = false;
  std::deque<std::function<void()>> tasks_;
  std::thread thread_;  // last: it uses the members above
};

}  // namespace tarn::backend
