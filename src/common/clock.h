// Clock: the time source every state machine and scheduler takes, so that tests can use a
// FakeClock and advance it instead of sleeping (Ray's FakeClock, TF Serving's FakeClockEnv).
// RealClock is thread-safe; FakeClock is safe to read from any thread while one thread
// advances it.
#pragma once

#include <atomic>
#include <chrono>

namespace tarn {

class Clock {
 public:
  using Duration = std::chrono::nanoseconds;
  using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;

  virtual ~Clock() = default;
  // Monotonic time: for timeouts, backoff, ages.
  virtual TimePoint Now() const = 0;
  // Wall-clock time in milliseconds since the Unix epoch: for timestamps users read.
  virtual int64_t WallMillis() const = 0;
};

class RealClock final : public Clock {
 public:
  TimePoint Now() const override {
    return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
  }
  int64_t WallMillis() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class FakeClock final : public Clock {
 public:
  TimePoint Now() const override { return TimePoint(Duration(now_ns_.load())); }
  int64_t WallMillis() const override { return wall_base_ms_ + now_ns_.load() / 1000000; }
  void Advance(Duration d) { now_ns_ += d.count(); }

 private:
  std::atomic<int64_t> now_ns_{1'000'000'000};
  int64_t wall_base_ms_ = 1'700'000'000'000;
};

}  // namespace tarn
