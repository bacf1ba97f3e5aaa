// PsClient: a worker's connections to every parameter server of its cluster. It registers
// with each, and pulls and pushes the model's parameters and gradients straight from and
// into the caller's float32 arrays, each server's share as the ShardPlan says, the servers
// in parallel.
//
// A lost connection is redialled with backoff (100 ms doubling to 5 s, for up to
// `retry_for`) and the worker registers again, so a restarted ps or a restarted worker
// carries on; a pull while the chief has not initialised the parameters waits for that,
// asking every 100 ms.
// A push to a server without parameters (one restarted since) fails with "not
// initialized": the chief then initialises it again (IsNotInitialized).
// Each push carries, per server, the step of the parameters last pulled from it: the step
// its gradient was computed at (synchronous servers drop gradients of an older step).
//
// Not thread-safe: one worker thread uses it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "train/ps_wire.h"
#include "train/shard_plan.h"

namespace tarn::train {

// Whether `s` says a server has no parameters yet.
bool IsNotInitialized(const Status& s);

class PsClient {
 public:
  struct Options {
    std::vector<std::string> servers;  // "host:port", in ps task order
    int64_t worker = 0;                // this worker's index (its membership)
    // The chief: it initialises the servers, so its pulls do not wait for that. A server
    // that answers "not initialized" (restarted, its share lost) is the chief's to refill.
    bool chief = false;
    ShardPlan plan;                    // for as many servers as `servers`
    std::chrono::milliseconds retry_for{120000};
    std::chrono::milliseconds io_timeout{300000};  // a sync push may wait for slow peers
    std::function<void(const std::string&)> log;
    // The assembly's secret, to answer each server's challenge (ps_wire.h).
    std::string secret;
  };

  // Connects to and registers with every server (retrying as above).
  static StatusOr<std::unique_ptr<PsClient>> Connect(Options options);

  // Whether every server said at registration that it holds initialised parameters.
  bool initialized() const { return initialized_; }
  bool sync() const { return sync_; }

  // `params[i]`: parameter i's elements. Init sends them as the initial values (a server
  // that already has values keeps them); Pull overwrites them with the servers' values and
  // returns server 0's step; Push sends gradients and returns server 0's step after it.
  Status Init(const std::vector<float*>& params);
  StatusOr<int64_t> Pull(const std::vector<float*>& params);
  StatusOr<int64_t> Push(const std::vector<float*>& gradients);
  // Push, then Pull into `params`, in one round trip per server where every server takes
  // it (kPushPull; else the two calls). Returns server 0's step after it.
  StatusOr<int64_t> PushPull(const std::vector<float*>& gradients,
                             const std::vector<float*>& params);

  // The whole model's training state, assembled from every server: arrays[0] holds the
  // parameters, arrays[1..] the optimiser's moments, each flattened in model order (the
  // parameters one after another, as NamedParameters lists them). The step is server 0's.
  struct ModelState {
    int64_t step = 0;
    std::vector<std::vector<float>> arrays;
  };
  StatusOr<ModelState> Snapshot();
  // Gives every server its share of `state` (a server that already has parameters keeps
  // them). The plan may differ from the one the state was saved under: it is model order.
  Status Restore(const ModelState& state);

 private:
  struct Server {
    std::string host;
    int port = 0;
    std::unique_ptr<Connection> conn;
    int64_t step = 0;    // the last step it reported
    int64_t pulled = 0;  // the step of the parameters last pulled from it
    bool push_pull = false;  // it said at registration that it takes kPushPull
  };
  explicit PsClient(Options options);

  Status Dial(Server& s);  // connect + register, once
  // Sends server `i` a `type` frame (kPush, kPushPull): the step its parameters were last
  // pulled at, then its share of `gradients`.
  Status SendGradient(size_t i, MessageType type, const std::vector<float*>& gradients);
  // Reads server `i`'s kParams answer into its share of `params`; records its step.
  Status ReadParams(size_t i, const std::vector<float*>& params);
  // Runs `op` on server `index`, redialling and retrying while it fails for the network
  // (and, with `wait_for_init`, while the server has no parameters yet).
  Status WithRetry(size_t index, const std::function<Status(Server&)>& op,
                   bool wait_for_init = false);
  // Runs `op` for every server, in parallel; the first error.
  Status ForEachServer(const std::function<Status(size_t)>& op);
  std::vector<iovec> Parts(size_t server, const std::vector<float*>& arrays) const;
  // Sends every server `head` and then its share of each of `arrays` as one `type` frame
  // (kInit, kRestore), and reads its step; the servers count as initialised after.
  Status SetEverywhere(MessageType type, std::vector<uint64_t> head,
                       const std::vector<std::vector<float*>>& arrays);
  // Pointers to each parameter's first element inside a model-order flat array.
  std::vector<float*> ParamPointers(const std::vector<float>& flat) const;
  void Log(const std::string& line) const;

  Options options_;
  std::vector<Server> servers_;
  std::vector<int64_t> param_offsets_;  // each parameter's start in model order; then the total
  bool initialized_ = true;
  bool sync_ = false;
  uint64_t next_request_ = 1;
};

}  // namespace tarn::train
