// ServiceLoop: the one thread that owns the service::Manager. HTTP handler threads and the
// backend's threads never touch the Manager; they hand it work through this loop: Post()
// a backend event, Call() a function and wait for it. Between inputs the loop sleeps until
// the Manager's next deadline (restart backoffs, probes, lifetimes), at most `max_idle`.
// After each round of work it publishes a StateSnapshot for the readers (rounds of backend
// events alone as often as publishing stays a small share of the loop's time), and a round's
// Call()s are answered only once its snapshot is out: what a caller was told is done, readers see.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "api/state_snapshot.h"
#include "common/clock.h"
#include "service/manager.h"

namespace tarn::api {

class ServiceLoop {
 public:
  explicit ServiceLoop(const Clock& clock,
                       std::chrono::milliseconds max_idle = std::chrono::milliseconds(1000));
  ~ServiceLoop();  // Stop()s
  ServiceLoop(const ServiceLoop&) = delete;
  ServiceLoop& operator=(const ServiceLoop&) = delete;

  // Starts the thread. Events posted before are kept and handled first. A snapshot of the
  // manager is published before this returns.
  void Start(service::Manager* manager);
  // Runs what is queued, then ends the thread. Later Call()s fail.
  void Stop();

  // Thread-safe. The BackendEvent sink.
  void Post(service::BackendEvent event);
  // Thread-safe: runs `f` on the loop thread and waits for it. False when the loop has
  // stopped (f did not run). Must not be called from the loop thread itself.
  bool Call(const std::function<void(service::Manager&)>& f);

  // How many backend events it handled, and how many calls: for /metrics.
  uint64_t events_handled() const;
  uint64_t calls_handled() const;

  // The newest snapshot; any thread.
  std::shared_ptr<const StateSnapshot> Snapshot() const { return snapshots_.Current(); }
  // SnapshotPublisher::OnPublish: `f` sees each snapshot the loop publishes.
  void OnPublish(std::function<void(const StateSnapshot&)> f) {
    snapshots_.OnPublish(std::move(f));
  }

 private:
  void Run();

  const Clock& clock_;
  const std::chrono::milliseconds max_idle_;
  service::Manager* manager_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Task {
    const std::function<void(service::Manager&)>* f;
    std::promise<void>* done;  // set once the round's snapshot is published
  };
  std::deque<Task> tasks_;
  std::vector<service::BackendEvent> events_pending_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> calls_{0};
  // Real time, not clock_: a test's fake clock must not hold snapshots back. Publishing
  // takes at most 1 / (1 + kPublishShare) of the loop's time.
  static constexpr std::chrono::milliseconds kPublishInterval{20};
  static constexpr int kPublishShare = 9;
  std::chrono::steady_clock::time_point last_publish_{};  // loop thread only
  // From the last publish until the next one of events alone: kPublishShare times what
  // the last publish took, at most kPublishInterval.
  std::chrono::steady_clock::duration publish_gap_ = kPublishInterval;  // loop thread only
  bool unpublished_ = false;                              // a round since then changed things
  SnapshotPublisher snapshots_;
  std::thread thread_;
};

}  // namespace tarn::api
