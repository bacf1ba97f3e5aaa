// Watches: blocking reads of an assembly, as Consul's blocking queries. Every answer to
// GET /app/v1/services/NAME carries `X-Tarn-Index`, the modify index of the assembly's status
// (StateSnapshot's AssemblyView::modify_index); a GET that sends `?index=N` is held until the
// status has changed past N, the assembly is gone, its `wait` ends or the server shuts down,
// and is then answered as any GET. A client that waits for a state (`tarn launch --wait`, a
// deployment script) so sees each change as soon as the service loop publishes it, with one
// request per change instead of one per poll interval.
//
// Like Consul's, an answer may come early (the wait ended, the server stopped, too many were
// waiting): the client compares the state, not the index, and asks again with the index it
// got. An index above the snapshot's generation (a server restarted since, which counts anew)
// is answered at once.
//
// Thread-safe. Published() runs on the publishing thread, Wait() on any; the wake callbacks
// run on the caller of Published(), of Close(), or on the Watches' own timer thread, never
// under its lock, exactly once each. They must be quick (post the work elsewhere).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "api/state_snapshot.h"

namespace tarn::api {

class Watches {
 public:
  using Clock = std::chrono::steady_clock;

  // `current` gives the newest snapshot (ServiceLoop::Snapshot). At most `max_waiting`
  // requests are held at once; more are answered at once.
  Watches(std::function<std::shared_ptr<const StateSnapshot>()> current, size_t max_waiting);
  ~Watches();  // Close()s
  Watches(const Watches&) = delete;
  Watches& operator=(const Watches&) = delete;

  // Holds `wake` until assembly `key` ("user/name") has a modify index above `index`, is
  // gone, or `wait` has passed. False (and `wake` is dropped, not called) when it need not or
  // cannot wait: it changed already, the index is from another run of the server, too many
  // wait, or the Watches are closed; the caller answers at once then.
  bool Wait(const std::string& key, uint64_t index, std::chrono::milliseconds wait,
            std::function<void()> wake);

  // After each publish, with the snapshot just made current: wakes whoever it concerns.
  void Published(const StateSnapshot& snapshot);

  // Wakes every waiting request, and answers later ones at once. Idempotent.
  void Close();

  size_t waiting() const;

 private:
  struct Waiter {
    std::string key;
    uint64_t index = 0;
    std::function<void()> wake;
  };
  // Whether `key` reads differently in `s` than at `index`.
  static bool Changed(const StateSnapshot& s, const std::string& key, uint64_t index);
  void RunTimer();

  const std::function<std::shared_ptr<const StateSnapshot>()> current_;
  const size_t max_waiting_;
  mutable std::mutex mu_;
  std::condition_variable cv_;                        // the timer's: the earliest deadline moved
  std::multimap<Clock::time_point, Waiter> waiting_;  // by deadline; guarded by mu_
  bool closed_ = false;                               // guarded by mu_
  std::thread timer_;
};

}  // namespace tarn::api
