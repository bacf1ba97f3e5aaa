// ParameterServer: one ps task of a training cluster. It holds its share of the model's
// parameters (ShardPlan) as one flat float array and the optimiser state for it, and
// serves workers over the ps_wire protocol: register, init (the chief's initial values;
// later ones are ignored, so a restarted chief does not reset training), pull, push.
//
// Membership comes from registration: a worker is a member while its connection lasts,
// so a worker added by flex joins by connecting, and one that dies leaves.
//
//   async: each push is applied at once (Hogwild-style across workers, serialised here).
//   sync:  each step waits for gradients computed at that step from N - backup_workers of
//          the N current members, averages them and applies them once; pushes computed at
//          an older step are dropped (the worker pulls the new parameters and goes on).
//          N is re-read whenever a member joins or leaves, so flex applies at the next step.
//
// REQUIRES: Create() -> Start() -> Stop() (the destructor stops too). Thread-safe: one
// thread accepts, one thread serves each connection; the parameters sit behind a
// shared_mutex (pulls share it while their bytes are sent; an update takes it alone).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "train/flat_optimizer.h"

namespace tarn::train {

class ParameterServer {
 public:
  struct Options {
    std::string host = "0.0.0.0";  // the address to bind ($TARN_IP when set)
    int port = 0;                  // 0: any; see port()
    int64_t elements = 0;          // this server's share (ShardPlan::elements[i])
    OptimizerOptions optimizer;
    bool sync = false;
    int backup_workers = 0;
    std::function<void(const std::string&)> log;  // may be empty
    // The assembly's secret ($TARN_ASSEMBLY_SECRET): every connection must answer the
    // challenge with it (ps_wire.h). Empty: anyone is admitted.
    std::string secret;
  };

  struct Stats {
    int64_t step = 0;
    int workers = 0;  // members now
    bool initialized = false;
    int64_t pushes = 0;        // gradients received
    int64_t stale_pushes = 0;  // sync: dropped as computed at an older step
    int64_t pulls = 0;
    int connection_threads = 0;  // serving a connection now, or ended and not yet joined
  };

  static StatusOr<std::unique_ptr<ParameterServer>> Create(Options options);
  ~ParameterServer();

  Status Start();  // binds and starts accepting
  void Stop();     // closes every connection; waits for the threads

  int port() const { return port_; }
  Stats stats() const;

 private:
  struct Worker;  // one connection

  explicit ParameterServer(Options options, FlatOptimizer optimizer);
  void AcceptLoop();
  void Serve(std::shared_ptr<Worker> worker, uint64_t serial);
  Status Handle(Worker& w, const struct FrameHeader& h);
  // kPush, or with `answer_params` kPushPull (answered as a pull right after would be).
  Status HandlePush(Worker& w, uint64_t request, bool answer_params);
  Status SendParams(Worker& w, uint64_t request);  // kParams: the step and the parameters
  // Sync: applies the pending sum when enough members have pushed. REQUIRES: mu_ held.
  void MaybeFinishStepLocked();
  void Log(const std::string& line) const;

  const Options options_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;

  mutable std::shared_mutex params_mu_;  // guards params_ and optimizer_
  std::vector<float> params_;
  FlatOptimizer optimizer_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable step_done_;
  bool initialized_ = false;
  int64_t step_ = 0;
  std::map<int64_t, int> members_;  // worker index -> open connections registered as it
  std::vector<float> sum_;          // sync: gradients of this step so far
  int summed_ = 0;
  int64_t pushes_ = 0, stale_pushes_ = 0, pulls_ = 0;
  std::vector<std::shared_ptr<Worker>> connections_;
  // One thread per connection, by a serial number. A thread whose connection ended puts its
  // number in finished_; the accept loop joins those before it starts another, so a ps that
  // sees many reconnects keeps no pile of ended threads.
  uint64_t next_thread_ = 0;
  std::unordered_map<uint64_t, std::thread> threads_;
  std::vector<uint64_t> finished_;
};

}  // namespace tarn::train
