// ModelRepository: the models tarn-serve serves and their versions, kept in step with what
// is on disk, as TF Serving's file-system source and AspiredVersionsManager do together.
//
// Each poll lists every model's base path, works out the versions its policy wants, loads
// the ones not loaded yet (START -> LOADING -> AVAILABLE, or END with the error when the
// load fails), and only then unloads the versions no longer wanted (UNLOADING -> END): a
// newer version is serving before the older one stops, so a swap fails no request. A
// version that failed to load is left out of the policy's choice (the older one keeps
// serving) and is retried only when its model.pt changes. Unloading waits until the
// requests that hold the version have been answered.
//
// A model with a canary policy (serve_config.h) is served by its rollout instead of its
// version policy: one stable version, and a newer one as canary on a share of the traffic
// until it is promoted or rolled back (canary.h; model_rollout.cc).
//
// REQUIRES: Create() (which polls once, so models on disk are served from the start), then
// any calls, then destruction (which stops the poll thread and unloads everything). Find,
// Status, Ready and Snapshot are thread-safe; PollOnce runs on the poll thread, or from a
// test when poll_interval <= 0.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "serve/batcher.h"
#include "serve/canary.h"
#include "serve/dir_watch.h"
#include "serve/model_meta.h"
#include "serve/servable.h"
#include "serve/serve_config.h"

namespace tarn::serve {

// TF Serving's ManagerState names.
enum class VersionState { kStart, kLoading, kAvailable, kUnloading, kEnd };
std::string_view VersionStateName(VersionState s);

struct VersionStatus {
  int64_t version = 0;
  VersionState state = VersionState::kStart;
  Status status;  // why a load failed; OK otherwise
};

// A version that serves. Held by each request while it runs.
class LoadedVersion {
 public:
  LoadedVersion(std::string model, int64_t version, ModelMeta meta,
                std::unique_ptr<Servable> servable, const BatchingParameters& batching,
                std::function<void(const BatchStats&)> on_batch);

  const std::string& model() const { return model_; }
  int64_t version() const { return version_; }
  const ModelMeta& meta() const { return meta_; }

  // A request for this version that is being decoded: a partial batch waits for it (see
  // Batcher). Hold it no longer than this version.
  Batcher::Arrival Announce() { return batcher_.Announce(); }
  // Queues `input` for the model; `done` runs exactly once, on a batch thread, or at once
  // on this thread when the queue is full. Ends `arrival`.
  void Predict(Tensor input, Batcher::Done done, Batcher::Arrival arrival = {});

 private:
  const std::string model_;
  const int64_t version_;
  const ModelMeta meta_;
  const std::unique_ptr<Servable> servable_;
  Batcher batcher_;  // declared last: its threads stop before the servable goes
};

class ModelRepository {
 public:
  struct Options {
    std::vector<ModelConfig> models;
    // Without batching every task runs alone (max_batch_size 1) on the batch threads, so
    // the HTTP threads never compute.
    bool enable_batching = false;
    BatchingParameters batching;
    ServableLoader loader;
    std::chrono::milliseconds poll_interval{1000};  // <= 0: no thread; call PollOnce()
    // With a poll thread: poll as soon as a version directory is renamed into (or out of) a
    // base path, through inotify (dir_watch.h), the interval still bounding what it misses.
    bool watch_base_paths = true;
    std::function<void(const std::string&)> log;   // one line per state change
    std::function<void(const std::string& model, const BatchStats&)> on_batch;
  };

  static StatusOr<std::unique_ptr<ModelRepository>> Create(Options options);
  ~ModelRepository();
  ModelRepository(const ModelRepository&) = delete;
  ModelRepository& operator=(const ModelRepository&) = delete;

  void PollOnce();

  // The version to serve a request: `version`, else `label`, else the newest available.
  // NotFound names what was asked for and what exists.
  StatusOr<std::shared_ptr<LoadedVersion>> Find(const std::string& model,
                                                std::optional<int64_t> version,
                                                const std::string& label) const;

  // The version for a predict or infer request: as Find, but an unlabelled request to a
  // model with a canary goes to the canary or to stable by the split.
  StatusOr<std::shared_ptr<LoadedVersion>> Route(const std::string& model,
                                                 std::optional<int64_t> version,
                                                 const std::string& label) const;
  // A predict or infer request `v` answered; `failed`: the model failed it.
  void Record(const LoadedVersion& v, bool failed) const;

  // A model's rollout, for the status API and /metrics; nullopt without a canary policy.
  struct Rollout {
    int64_t stable = 0, canary = 0;  // 0: none
    int64_t traffic_percent = 0;
    int64_t canary_requests = 0, canary_failures = 0, stable_requests = 0, stable_failures = 0;
    int64_t promoted = 0, rolled_back = 0, refused = 0;  // since start
    std::string last_decision;
  };
  std::optional<Rollout> RolloutOf(const std::string& model) const;

  // model_version_status: every version known (one when `version` or `label` is given).
  StatusOr<std::vector<VersionStatus>> Status(const std::string& model,
                                              std::optional<int64_t> version,
                                              const std::string& label) const;

  // Whether every configured model has a version AVAILABLE (KServe's server readiness).
  bool Ready() const;
  std::vector<std::string> ModelNames() const;
  bool HasModel(const std::string& name) const;  // configured (loaded or not)

  struct Row {
    std::string model;
    int64_t version;
    VersionState state;
  };
  std::vector<Row> Snapshot() const;

 private:
  struct Entry {
    VersionStatus status;
    std::shared_ptr<LoadedVersion> loaded;  // set while AVAILABLE
    std::string failed_signature;           // model.pt's identity when its load failed
    std::string rejected;                   // why the rollout refused or rolled it back
  };
  struct Model {
    ModelConfig config;
    std::map<int64_t, Entry> versions;
    std::string last_list_error;
    // The rollout's, with a canary policy:
    int64_t stable = 0;
    mutable std::optional<Canary> canary;  // its counts change under mu_ on reads too
    Rollout counts;                        // promoted, rolled_back, refused, last_decision
  };

  explicit ModelRepository(Options options);
  void PollModel(const std::string& name);
  // Loads version `v` of `name` (START, LOADING, then AVAILABLE or END); whether it serves.
  bool LoadVersion(const std::string& name, const ModelConfig& config, int64_t v);
  // The versions on disk whose last load failed and whose model.pt has not changed since.
  std::set<int64_t> FailedVersions(const std::string& name, const ModelConfig& config,
                                   const std::vector<int64_t>& on_disk);
  void PollRollout(const std::string& name, const ModelConfig& config,
                   const std::vector<int64_t>& on_disk);
  void ForgetEnded(const std::string& name);
  // Find's work, with mu_ held.
  StatusOr<std::shared_ptr<LoadedVersion>> FindLocked(const std::string& model,
                                                      std::optional<int64_t> version,
                                                      const std::string& label) const;
  // The version a label names now; the rollout's stable and canary for a canary policy.
  static std::optional<int64_t> LabelVersion(const Model& m, const std::string& label);
  void SetState(const std::string& name, int64_t version, VersionState state,
                tarn::Status status = OkStatus());
  void Log(const std::string& line) const;
  void Unload(const std::string& name, int64_t version, tarn::Status end = OkStatus());
  void Loop();
  // Adds the base paths not watched yet to watch_; logs a failure when it changes.
  void WatchBasePaths();

  Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Model> models_;  // guarded by mu_
  std::mutex poll_mu_;                   // one poll at a time
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by stop_mu_
  std::unique_ptr<DirWatch> watch_;  // null without inotify; used by the poll thread only
  std::string watch_error_;          // the last failure logged; the poll thread's
  std::thread thread_;
};

}  // namespace tarn::serve
