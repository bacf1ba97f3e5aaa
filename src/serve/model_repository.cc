#include "serve/model_repository.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>

namespace tarn::serve {
namespace {

// model.pt's identity: a re-export is a new directory (a new inode), an edit a new mtime.
std::string Signature(const std::string& version_dir) {
  struct stat st {};
  if (::stat((version_dir + "/model.pt").c_str(), &st) != 0) return "";
  return std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

std::string Describe(const std::string& model, std::optional<int64_t> version,
                     const std::string& label) {
  if (version) return "Specific(" + model + ", " + std::to_string(*version) + ")";
  if (!label.empty()) return "Label(" + model + ", " + label + ")";
  return "Latest(" + model + ")";
}

constexpr size_t kEndedKept = 20;  // unloaded versions kept in the status, per model

}  // namespace

std::string_view VersionStateName(VersionState s) {
  switch (s) {
    case VersionState::kStart: return "START";
    case VersionState::kLoading: return "LOADING";
    case VersionState::kAvailable: return "AVAILABLE";
    case VersionState::kUnloading: return "UNLOADING";
    case VersionState::kEnd: return "END";
  }
  return "UNKNOWN";
}

LoadedVersion::LoadedVersion(std::string model, int64_t version, ModelMeta meta,
                             std::unique_ptr<Servable> servable,
                             const BatchingParameters& batching,
                             std::function<void(const BatchStats&)> on_batch)
    : model_(std::move(model)),
      version_(version),
      meta_(std::move(meta)),
      servable_(std::move(servable)),
      batcher_(
          batching, [this](const Tensor& batch) { return servable_->Run(batch); },
          std::move(on_batch)) {}

void LoadedVersion::Predict(Tensor input, Batcher::Done done, Batcher::Arrival arrival) {
  // Submit only consumes `done` when it accepts the task.
  auto shared = std::make_shared<Batcher::Done>(std::move(done));
  Status s = batcher_.Submit(
      std::move(input),
      [shared](StatusOr<Tensor> out, std::chrono::nanoseconds queued) {
        (*shared)(std::move(out), queued);
      },
      std::move(arrival));
  if (!s.ok()) (*shared)(s, std::chrono::nanoseconds(0));
}

ModelRepository::ModelRepository(Options options) : options_(std::move(options)) {
  for (const ModelConfig& m : options_.models) models_[m.name].config = m;
  if (!options_.enable_batching) {
    options_.batching.max_batch_size = 1;
    options_.batching.batch_timeout_micros = 0;
  }
}

StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Create(Options options) {
  if (options.models.empty()) return InvalidArgumentError("no models to serve");
  if (!options.loader) return InvalidArgumentError("no loader for models");
  std::unique_ptr<ModelRepository> r(new ModelRepository(std::move(options)));
  const bool polls = r->options_.poll_interval.count() > 0;
  if (polls && r->options_.watch_base_paths) {
    auto watch = DirWatch::Create();
    if (watch.ok()) {
      r->watch_ = std::move(*watch);
      r->WatchBasePaths();  // before the first poll, so that nothing falls between the two
    } else {
      r->Log("new versions are found by the poll alone: " + watch.status().message());
    }
  }
  r->PollOnce();
  if (polls) r->thread_ = std::thread([p = r.get()] { p->Loop(); });
  return r;
}

void ModelRepository::WatchBasePaths() {
  std::vector<std::string> dirs;
  for (const ModelConfig& m : options_.models) dirs.push_back(m.base_path);
  tarn::Status s = watch_->Watch(dirs);
  const std::string error = s.ok() ? "" : s.message();
  if (error != watch_error_ && !error.empty()) {
    Log("these base paths are polled, not watched: " + error);
  }
  watch_error_ = error;
}

ModelRepository::~ModelRepository() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (watch_) watch_->Wake();
  if (thread_.joinable()) thread_.join();
  std::vector<std::pair<std::string, int64_t>> loaded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, model] : models_) {
      for (const auto& [version, entry] : model.versions) {
        if (entry.loaded) loaded.emplace_back(name, version);
      }
    }
  }
  for (const auto& [name, version] : loaded) Unload(name, version);
}

void ModelRepository::Loop() {
  auto stopping = [this] {
    std::lock_guard<std::mutex> lock(stop_mu_);
    return stopping_;
  };
  while (true) {
    if (watch_) {
      // A change, Wake (the stop) or the interval; then a poll either way.
      watch_->Wait(options_.poll_interval);
      if (stopping()) return;
      WatchBasePaths();  // base paths created (or re-created) since
    } else {
      std::unique_lock<std::mutex> lock(stop_mu_);
      if (stop_cv_.wait_for(lock, options_.poll_interval, [&] { return stopping_; })) return;
    }
    PollOnce();
  }
}

void ModelRepository::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void ModelRepository::SetState(const std::string& name, int64_t version, VersionState state,
                               tarn::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = models_[name].versions[version];
    e.status.version = version;
    e.status.state = state;
    e.status.status = status;
  }
  Log("model " + name + " version " + std::to_string(version) + ": " +
      std::string(VersionStateName(state)) + (status.ok() ? "" : " (" + status.message() + ")"));
}

void ModelRepository::PollOnce() {
  std::lock_guard<std::mutex> poll(poll_mu_);
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, model] : models_) names.push_back(name);
  }
  for (const std::string& name : names) PollModel(name);
}

void ModelRepository::PollModel(const std::string& name) {
  ModelConfig config;
  {
    std::lock_guard<std::mutex> lock(mu_);
    config = models_[name].config;
  }
  auto listed = ListVersions(config.base_path);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Model& m = models_[name];
    const std::string error = listed.ok() ? "" : listed.status().message();
    if (error != m.last_list_error && !error.empty()) {
      Log("model " + name + ": " + error + " (keeps serving what it has)");
    }
    m.last_list_error = error;
  }
  // An unreadable base path unloads nothing: it may be back at the next poll.
  if (!listed.ok()) return;
  const std::vector<int64_t>& on_disk = *listed;
  if (config.canary) {
    PollRollout(name, config, on_disk);
    return ForgetEnded(name);
  }
  std::set<int64_t> failed = FailedVersions(name, config, on_disk);
  while (true) {
    std::vector<int64_t> candidates;
    std::vector<int64_t> to_load;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Model& m = models_[name];
      for (int64_t v : on_disk) {
        if (!failed.count(v)) candidates.push_back(v);
      }
      for (int64_t v : VersionsToServe(config.policy, candidates)) {
        auto it = m.versions.find(v);
        if (it == m.versions.end() || !it->second.loaded) to_load.push_back(v);
      }
    }
    if (to_load.empty()) break;
    // Newest first: it is the one a "latest" request wants.
    std::sort(to_load.rbegin(), to_load.rend());
    bool any_failed = false;
    for (int64_t v : to_load) {
      if (!LoadVersion(name, config, v)) {
        failed.insert(v);
        any_failed = true;
      }
    }
    if (!any_failed) break;  // else the policy may now want an older version
  }
  // Only now, with the wanted versions serving, do the others go.
  std::vector<int64_t> to_unload;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Model& m = models_[name];
    std::vector<int64_t> candidates;
    for (int64_t v : on_disk) {
      if (!failed.count(v)) candidates.push_back(v);
    }
    const std::vector<int64_t> wanted = VersionsToServe(config.policy, candidates);
    for (const auto& [v, e] : m.versions) {
      if (e.loaded && !std::binary_search(wanted.begin(), wanted.end(), v)) to_unload.push_back(v);
    }
  }
  for (int64_t v : to_unload) Unload(name, v);
  ForgetEnded(name);
}

void ModelRepository::ForgetEnded(const std::string& name) {
  // Forget the oldest ended versions beyond a few; never one the rollout rejected.
  std::lock_guard<std::mutex> lock(mu_);
  Model& m = models_[name];
  size_t ended = 0;
  for (const auto& [v, e] : m.versions) ended += e.status.state == VersionState::kEnd;
  for (auto it = m.versions.begin(); it != m.versions.end() && ended > kEndedKept;) {
    if (it->second.status.state == VersionState::kEnd && it->second.failed_signature.empty() &&
        it->second.rejected.empty()) {
      it = m.versions.erase(it);
      --ended;
    } else {
      ++it;
    }
  }
}

std::set<int64_t> ModelRepository::FailedVersions(const std::string& name,
                                                  const ModelConfig& config,
                                                  const std::vector<int64_t>& on_disk) {
  std::set<int64_t> failed;
  std::lock_guard<std::mutex> lock(mu_);
  Model& m = models_[name];
  for (int64_t v : on_disk) {
    auto it = m.versions.find(v);
    if (it == m.versions.end() || it->second.failed_signature.empty()) continue;
    if (it->second.failed_signature == Signature(config.base_path + "/" + std::to_string(v))) {
      failed.insert(v);
    } else {
      it->second.failed_signature.clear();  // changed since: worth another try
    }
  }
  return failed;
}

bool ModelRepository::LoadVersion(const std::string& name, const ModelConfig& config, int64_t v) {
  const std::string dir = config.base_path + "/" + std::to_string(v);
  SetState(name, v, VersionState::kStart);
  SetState(name, v, VersionState::kLoading);
  const std::string signature = Signature(dir);
  auto meta = ReadModelMeta(dir);
  StatusOr<std::unique_ptr<Servable>> servable =
      meta.ok() ? options_.loader(dir, *meta) : StatusOr<std::unique_ptr<Servable>>(meta.status());
  if (!servable.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      models_[name].versions[v].failed_signature = signature.empty() ? "gone" : signature;
    }
    SetState(name, v, VersionState::kEnd, servable.status());
    return false;
  }
  auto on_batch = [this, name](const BatchStats& s) {
    if (options_.on_batch) options_.on_batch(name, s);
  };
  auto loaded = std::make_shared<LoadedVersion>(name, v, std::move(*meta), std::move(*servable),
                                                options_.batching, std::move(on_batch));
  {
    std::lock_guard<std::mutex> lock(mu_);
    models_[name].versions[v].loaded = std::move(loaded);
  }
  SetState(name, v, VersionState::kAvailable);
  return true;
}

void ModelRepository::Unload(const std::string& name, int64_t version, tarn::Status end) {
  std::shared_ptr<LoadedVersion> loaded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    loaded = std::move(models_[name].versions[version].loaded);
  }
  if (!loaded) return;
  SetState(name, version, VersionState::kUnloading);
  // Requests that found this version before it left the map still hold it; they are
  // answered in bounded time (the batcher always answers), so wait for them.
  auto waited = std::chrono::steady_clock::now();
  while (loaded.use_count() > 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (std::chrono::steady_clock::now() - waited > std::chrono::seconds(10)) {
      Log("model " + name + " version " + std::to_string(version) +
          ": still waiting for requests in flight to finish before unloading");
      waited = std::chrono::steady_clock::now();
    }
  }
  loaded.reset();
  SetState(name, version, VersionState::kEnd, std::move(end));
}

StatusOr<std::shared_ptr<LoadedVersion>> ModelRepository::Find(const std::string& model,
                                                               std::optional<int64_t> version,
                                                               const std::string& label) const {
  std::lock_guard<std::mutex> lock(mu_);
  return FindLocked(model, version, label);
}

StatusOr<std::shared_ptr<LoadedVersion>> ModelRepository::FindLocked(
    const std::string& model, std::optional<int64_t> version, const std::string& label) const {
  auto m = models_.find(model);
  if (m == models_.end()) {
    return NotFoundError("Servable not found for request: " + Describe(model, version, label) +
                         " (no model named \"" + model + "\" is served)");
  }
  std::optional<int64_t> want = version;
  if (!want && !label.empty()) {
    want = LabelVersion(m->second, label);
    if (!want) {
      return NotFoundError("Servable not found for request: " + Describe(model, version, label) +
                           " (model \"" + model + "\" has no label \"" + label + "\"" +
                           (m->second.config.canary && label == "canary" ? " now: no canary" : "") +
                           ")");
    }
  }
  // With a canary policy, a request that names nothing means stable.
  if (!want && m->second.config.canary && m->second.stable != 0) want = m->second.stable;
  if (want) {
    auto v = m->second.versions.find(*want);
    if (v == m->second.versions.end() || !v->second.loaded) {
      return NotFoundError("Servable not found for request: " + Describe(model, version, label) +
                           " (version " + std::to_string(*want) + " is not available)");
    }
    return v->second.loaded;
  }
  for (auto v = m->second.versions.rbegin(); v != m->second.versions.rend(); ++v) {
    if (v->second.loaded) return v->second.loaded;
  }
  return NotFoundError("Servable not found for request: " + Describe(model, version, label) +
                       " (no version of \"" + model + "\" is available yet; base path " +
                       m->second.config.base_path + ")");
}

StatusOr<std::vector<VersionStatus>> ModelRepository::Status(const std::string& model,
                                                             std::optional<int64_t> version,
                                                             const std::string& label) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto m = models_.find(model);
  if (m == models_.end()) {
    return NotFoundError("Could not find any versions of model " + model);
  }
  std::optional<int64_t> want = version;
  if (!want && !label.empty()) {
    want = LabelVersion(m->second, label);
    if (!want) return NotFoundError("model \"" + model + "\" has no label \"" + label + "\"");
  }
  std::vector<VersionStatus> out;
  for (const auto& [v, e] : m->second.versions) {
    if (!want || v == *want) out.push_back(e.status);
  }
  if (out.empty()) {
    return NotFoundError(want ? "Could not find version " + std::to_string(*want) + " of model " +
                                    model
                              : "Could not find any versions of model " + model);
  }
  // Newest first, as TF Serving lists them.
  std::reverse(out.begin(), out.end());
  return out;
}

bool ModelRepository::Ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, m] : models_) {
    bool any = false;
    for (const auto& [v, e] : m.versions) any = any || e.loaded != nullptr;
    if (!any) return false;
  }
  return true;
}

std::vector<std::string> ModelRepository::ModelNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, m] : models_) out.push_back(name);
  return out;
}

bool ModelRepository::HasModel(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return models_.count(name) > 0;
}

std::vector<ModelRepository::Row> ModelRepository::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Row> out;
  for (const auto& [name, m] : models_) {
    for (const auto& [v, e] : m.versions) out.push_back({name, v, e.status.state});
  }
  return out;
}

}  // namespace tarn::serve
