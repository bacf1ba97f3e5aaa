// ModelRepository's canary rollout (model_repository.h, canary.h): for a model with a canary
// policy, each poll carries out the canary's verdict, finds a stable version when there is
// none, and takes the newest version above stable as the next canary once it passes the
// accuracy gate. Decisions are written beside the version as marker files, so that every
// replica serving the same base path, and a replica that restarts, follows them: a version
// rolled back or refused anywhere is never served again, and a restarted replica starts from
// the newest version promoted.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/file.h"
#include "serve/model_repository.h"

namespace tarn::serve {
namespace {

constexpr char kRejectedMarker[] = "tarn-rejected";  // holds the reason
constexpr char kPromotedMarker[] = "tarn-promoted";

std::string VersionDir(const ModelConfig& config, int64_t v) {
  return config.base_path + "/" + std::to_string(v);
}

// Writes `text` into <version dir>/<marker>, aside then renamed; the error when it cannot
// (a read-only model directory: the decision then holds in this replica only).
Status WriteMarker(const ModelConfig& config, int64_t v, const char* marker,
                   const std::string& text) {
  const std::string path = VersionDir(config, v) + "/" + marker;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError(tmp + ": " + std::strerror(errno));
  const bool written = WriteFully(fd, text + "\n");
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string error = std::strerror(errno);
    ::unlink(tmp.c_str());
    return UnavailableError(path + ": " + error);
  }
  return OkStatus();
}

std::optional<std::string> ReadMarker(const ModelConfig& config, int64_t v, const char* marker) {
  StatusOr<std::string> text = ReadFileToString(VersionDir(config, v) + "/" + marker, 4096);
  if (!text.ok()) return std::nullopt;
  std::string s = *text;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

std::optional<int64_t> ModelRepository::LabelVersion(const Model& m, const std::string& label) {
  if (m.config.canary && label == "stable") {
    if (m.stable != 0) return m.stable;
    return std::nullopt;
  }
  if (m.config.canary && label == "canary") {
    if (m.canary) return m.canary->version();
    return std::nullopt;
  }
  auto it = m.config.labels.find(label);
  if (it == m.config.labels.end()) return std::nullopt;
  return it->second;
}

void ModelRepository::PollRollout(const std::string& name, const ModelConfig& config,
                                  const std::vector<int64_t>& on_disk) {
  const CanaryPolicy& policy = *config.canary;
  const auto now = std::chrono::steady_clock::now();
  std::map<int64_t, std::string> rejected;  // version -> why, by any replica or by this one
  std::set<int64_t> promoted;
  for (int64_t v : on_disk) {
    if (auto why = ReadMarker(config, v, kRejectedMarker)) rejected[v] = *why;
    if (ReadMarker(config, v, kPromotedMarker)) promoted.insert(v);
  }
  int64_t stable = 0, canary = 0;
  Canary::Verdict verdict = Canary::Verdict::kWait;
  std::string counts, why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Model& m = models_[name];
    for (const auto& [v, e] : m.versions) {
      if (!e.rejected.empty()) rejected.emplace(v, e.rejected);
    }
    stable = m.stable;
    if (m.canary) {
      canary = m.canary->version();
      verdict = m.canary->Decide(now);
      counts = m.canary->Describe();
    }
  }

  // 1. The canary's verdict: this replica's own, or one another replica wrote.
  if (canary != 0) {
    if (auto it = rejected.find(canary);
        it != rejected.end() && verdict != Canary::Verdict::kRollBack) {
      verdict = Canary::Verdict::kRollBack;
      why = it->second;
    } else if (promoted.count(canary) && verdict == Canary::Verdict::kWait) {
      verdict = Canary::Verdict::kPromote;
      why = "promoted by another replica";
    }
    if (verdict == Canary::Verdict::kRollBack && why.empty()) {
      why = "rolled back: " + counts + " (worse than stable)";
    }
    if (verdict == Canary::Verdict::kPromote && why.empty()) why = "promoted: " + counts;
  }
  if (verdict == Canary::Verdict::kPromote) {
    tarn::Status marked = WriteMarker(config, canary, kPromotedMarker, why);
    {
      std::lock_guard<std::mutex> lock(mu_);
      Model& m = models_[name];
      m.stable = canary;
      m.canary.reset();
      ++m.counts.promoted;
      m.counts.last_decision = "version " + std::to_string(canary) + " " + why;
    }
    Log("model " + name + " version " + std::to_string(canary) + ": " + why +
        (marked.ok() ? "" : " (not recorded for other replicas: " + marked.message() + ")"));
    Unload(name, stable);
    stable = canary;
    canary = 0;
  } else if (verdict == Canary::Verdict::kRollBack) {
    tarn::Status marked =
        rejected.count(canary) ? OkStatus() : WriteMarker(config, canary, kRejectedMarker, why);
    {
      std::lock_guard<std::mutex> lock(mu_);
      Model& m = models_[name];
      m.canary.reset();
      m.versions[canary].rejected = why;
      ++m.counts.rolled_back;
      m.counts.last_decision = "version " + std::to_string(canary) + " " + why;
    }
    rejected[canary] = why;
    Log("model " + name + " version " + std::to_string(canary) + ": " + why +
        (marked.ok() ? "" : " (not recorded for other replicas: " + marked.message() + ")"));
    Unload(name, canary, FailedPreconditionError(why));
    canary = 0;
  }

  const std::set<int64_t> failed = FailedVersions(name, config, on_disk);
  auto usable = [&](int64_t v) { return !rejected.count(v) && !failed.count(v); };

  // 2. No stable yet (a start): the newest version promoted, else the newest there is.
  if (stable == 0) {
    std::vector<int64_t> order;
    for (auto v = on_disk.rbegin(); v != on_disk.rend(); ++v) {
      if (usable(*v) && promoted.count(*v)) order.push_back(*v);
    }
    for (auto v = on_disk.rbegin(); v != on_disk.rend(); ++v) {
      if (usable(*v) && !promoted.count(*v)) order.push_back(*v);
    }
    for (int64_t v : order) {
      if (!LoadVersion(name, config, v)) continue;
      stable = v;
      std::string first;
      if (!promoted.count(v)) {
        first = "stable: the first version served";
        tarn::Status marked = WriteMarker(config, v, kPromotedMarker, first);
        if (!marked.ok()) first += " (not recorded for other replicas: " + marked.message() + ")";
      } else {
        first = "stable: the newest version promoted";
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        models_[name].stable = v;
      }
      Log("model " + name + " version " + std::to_string(v) + ": " + first);
      break;
    }
    if (stable == 0) return;
  }

  // 3. The next canary: the newest usable version above stable, through the accuracy gate.
  if (canary != 0) return;
  int64_t next = 0;
  for (auto v = on_disk.rbegin(); v != on_disk.rend() && *v > stable; ++v) {
    if (usable(*v)) {
      next = *v;
      break;
    }
  }
  if (next == 0) return;
  StatusOr<ModelMeta> meta = ReadModelMeta(VersionDir(config, next));
  std::optional<std::string> refusal;
  if (meta.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    const Entry& s = models_[name].versions[stable];
    if (s.loaded) refusal = AccuracyRefusal(policy, next, *meta, stable, s.loaded->meta());
  }
  if (refusal) {
    tarn::Status marked = WriteMarker(config, next, kRejectedMarker, *refusal);
    {
      std::lock_guard<std::mutex> lock(mu_);
      Model& m = models_[name];
      m.versions[next].rejected = *refusal;
      ++m.counts.refused;
      m.counts.last_decision = "version " + std::to_string(next) + " " + *refusal;
    }
    SetState(name, next, VersionState::kEnd, FailedPreconditionError(*refusal));
    if (!marked.ok())
      Log("model " + name + ": not recorded for other replicas: " + marked.message());
    return;
  }
  // A meta.json that does not parse fails the load, with its error in the status.
  if (!LoadVersion(name, config, next)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    models_[name].canary.emplace(policy, next, std::chrono::steady_clock::now());
  }
  Log("model " + name + " version " + std::to_string(next) + ": canary for " +
      std::to_string(policy.traffic_percent) + "% of unlabelled requests, against stable " +
      std::to_string(stable));
}

StatusOr<std::shared_ptr<LoadedVersion>> ModelRepository::Route(const std::string& model,
                                                                std::optional<int64_t> version,
                                                                const std::string& label) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!version && label.empty()) {
    auto m = models_.find(model);
    if (m != models_.end() && m->second.canary && m->second.canary->TakeNext()) {
      auto v = m->second.versions.find(m->second.canary->version());
      if (v != m->second.versions.end() && v->second.loaded) return v->second.loaded;
    }
  }
  return FindLocked(model, version, label);
}

void ModelRepository::Record(const LoadedVersion& v, bool failed) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto m = models_.find(v.model());
  if (m == models_.end() || !m->second.canary) return;
  if (v.version() == m->second.canary->version()) {
    m->second.canary->Record(true, failed);
  } else if (v.version() == m->second.stable) {
    m->second.canary->Record(false, failed);
  }
}

std::optional<ModelRepository::Rollout> ModelRepository::RolloutOf(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto m = models_.find(model);
  if (m == models_.end() || !m->second.config.canary) return std::nullopt;
  Rollout r = m->second.counts;
  r.stable = m->second.stable;
  r.traffic_percent = m->second.config.canary->traffic_percent;
  if (const std::optional<Canary>& c = m->second.canary) {
    r.canary = c->version();
    r.canary_requests = c->canary_requests();
    r.canary_failures = c->canary_failures();
    r.stable_requests = c->stable_requests();
    r.stable_failures = c->stable_failures();
  }
  return r;
}

}  // namespace tarn::serve
