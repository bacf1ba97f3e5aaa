// bench/run scheduler: placements per second of tarn's scheduler on 1,000 simulated nodes
// with 8 GPUs each and 20 queues, next to a plain first-fit placer fed the same stream in
// the same run. The mix: ~30% GPU requests, ~20% of requests in gangs of 2-16, queues with
// caps that the backlog presses against, and releases that keep the cluster about 90% full.
// Only the placement passes are timed (Schedule() for tarn, Pass() for the peer); submits
// and releases are timed separately. Prints one flat JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/clock.h"
#include "scheduler/scheduler.h"

namespace {

using tarn::scheduler::NodeSpec;
using tarn::scheduler::QueueConfig;
using tarn::scheduler::Request;
using tarn::scheduler::Resources;
using Clock = std::chrono::steady_clock;

constexpr int kNodes = 1000;
constexpr int kGpusPerNode = 8;
constexpr int64_t kVcores = 64;
constexpr int64_t kMemory = 512 * 1024;
constexpr int kQueues = 20;
constexpr int kUsersPerQueue = 5;
constexpr size_t kTargetPlacements = 100000;
constexpr size_t kBacklog = 2000;  // pending units kept queued
constexpr double kFull = 0.90;

struct Unit {
  std::string gang;  // empty: a single request
  std::vector<Request> members;
};

// The same pseudo-random stream of units for both placers.
class Workload {
 public:
  explicit Workload(uint32_t seed) : rng_(seed) {}
  Unit Next() {
    Unit u;
    int q = Pick(kQueues);
    std::string queue = "q" + std::to_string(q);
    std::string user = queue + "-u" + std::to_string(Pick(kUsersPerQueue));
    bool gpu = Chance(0.30);
    Resources r;
    if (gpu) {
      r.gpus = 1 + Pick(kGpusPerNode);  // 1..8
      r.vcores = 4 * r.gpus;
      r.memory_mib = 16384 * r.gpus;
    } else {
      r.vcores = 1 + Pick(8);
      r.memory_mib = 2048 * (1 + Pick(16));
    }
    // 20% of requests are in gangs: with mean size 9, about 1 unit in 36 is a gang.
    int size = Chance(0.028) ? 2 + Pick(15) : 1;
    std::string base = user + "/" + std::to_string(seq_++);
    if (size > 1) u.gang = base;
    for (int i = 0; i < size; ++i) {
      u.members.push_back({base + "-" + std::to_string(i), user, queue, r});
    }
    return u;
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }
  bool Chance(double p) { return (rng_() % 1000000) < p * 1000000; }
  std::mt19937 rng_;
  uint64_t seq_ = 0;
};

std::vector<NodeSpec> Nodes() {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < kNodes; ++i) {
    NodeSpec n{"node-" + std::to_string(i), kVcores, kMemory, {}};
    for (int g = 0; g < kGpusPerNode; ++g) n.gpus.push_back({g, "Fake GPU", 81920});
    nodes.push_back(std::move(n));
  }
  return nodes;
}

std::vector<QueueConfig> Queues() {
  std::vector<QueueConfig> queues;
  for (int q = 0; q < kQueues; ++q) {
    // Guarantees add up to 100%; caps between 10% and 25%, so a busy queue meets its cap.
    queues.push_back({"q" + std::to_string(q), 0.05, 0.10 + 0.05 * (q % 4), {}, {}});
  }
  return queues;
}

// The peer: FIFO first-fit, gangs all-or-nothing, no queues, no fairness.
class FirstFit {
 public:
  FirstFit() {
    for (const NodeSpec& n : Nodes()) free_.push_back(n.capacity());
  }
  void Submit(Unit u) { pending_.push_back(std::move(u)); }
  // Returns the number of placements made.
  size_t Pass() {
    size_t made = 0;
    std::vector<Unit> still;
    for (Unit& u : pending_) {
      std::vector<std::pair<int, Resources>> taken;
      bool ok = true;
      for (const Request& r : u.members) {
        int node = -1;
        for (size_t i = 0; i < free_.size(); ++i) {
          if (free_[i].Fits(r.resources)) {
            node = static_cast<int>(i);
            break;
          }
        }
        if (node < 0) {
          ok = false;
          break;
        }
        free_[node] -= r.resources;
        taken.push_back({node, r.resources});
      }
      if (!ok) {
        for (auto& [node, res] : taken) free_[node] += res;
        still.push_back(std::move(u));
        continue;
      }
      for (auto& t : taken) {
        placed_.push_back(t);
        used_ += t.second;
      }
      made += taken.size();
    }
    pending_ = std::move(still);
    return made;
  }
  void ReleaseRandom(std::mt19937& rng) {
    size_t i = rng() % placed_.size();
    free_[placed_[i].first] += placed_[i].second;
    used_ -= placed_[i].second;
    placed_[i] = placed_.back();
    placed_.pop_back();
  }
  Resources Used() const { return used_; }
  size_t pending() const { return pending_.size(); }

 private:
  std::vector<Resources> free_;
  std::vector<Unit> pending_;
  std::vector<std::pair<int, Resources>> placed_;
  Resources used_;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

bool OverFull(const Resources& used, const Resources& total) {
  return double(used.vcores) / double(total.vcores) > kFull ||
         double(used.gpus) / double(total.gpus) > kFull;
}

}  // namespace

int main() {
  nlohmann::json out;
  const Resources total{kNodes * kVcores, kNodes * kMemory, kNodes * kGpusPerNode};

  // tarn's scheduler.
  {
    tarn::FakeClock clock;
    // Preemption off, as the server runs it until the manager stops victims (issue 25): the
    // workload releases only what it chose to, never a victim.
    tarn::scheduler::Scheduler::Options options{Nodes(), Queues(), &clock};
    options.preemption = false;
    auto sched = tarn::scheduler::Scheduler::Create(std::move(options)).value();
    Workload work(42);
    std::mt19937 rng(1);
    std::vector<std::string> placed;
    size_t placements = 0, passes = 0, submitted = 0, pending_units = 0;
    Clock::duration schedule_time{}, other_time{};
    double util_v = 0, util_g = 0;
    while (placements < kTargetPlacements) {
      auto t0 = Clock::now();
      while (pending_units < kBacklog) {
        Unit u = work.Next();
        tarn::Status s =
            u.gang.empty() ? sched->Submit(u.members[0]) : sched->SubmitGang(u.gang, u.members);
        if (!s.ok()) {
          std::fprintf(stderr, "submit: %s\n", s.ToString().c_str());
          return 1;
        }
        ++pending_units;
        submitted += u.members.size();
      }
      auto t1 = Clock::now();
      std::vector<tarn::scheduler::Placement> made = sched->Schedule();
      auto t2 = Clock::now();
      schedule_time += t2 - t1;
      ++passes;
      placements += made.size();
      for (const auto& p : made) placed.push_back(p.id);
      pending_units = 0;
      for (const auto& q : sched->Queues()) pending_units += q.pending;
      Resources used;
      for (const auto& q : sched->Queues()) used += q.used;
      util_v += double(used.vcores) / double(total.vcores);
      util_g += double(used.gpus) / double(total.gpus);
      auto t3 = Clock::now();
      while (OverFull(used, total) && !placed.empty()) {
        size_t i = rng() % placed.size();
        if (!sched->Release(placed[i]).ok()) return 1;
        placed[i] = placed.back();
        placed.pop_back();
        used = Resources{};
        for (const auto& q : sched->Queues()) used += q.used;
      }
      other_time += (t1 - t0) + (Clock::now() - t3);
    }
    out["tarn_placements"] = placements;
    out["tarn_passes"] = passes;
    out["tarn_schedule_seconds"] = Seconds(schedule_time);
    out["tarn_placements_per_s"] = double(placements) / Seconds(schedule_time);
    out["tarn_submit_release_seconds"] = Seconds(other_time);
    out["tarn_placements_per_s_with_submit_release"] =
        double(placements) / Seconds(schedule_time + other_time);
    out["tarn_mean_vcore_utilization"] = util_v / double(passes);
    out["tarn_mean_gpu_utilization"] = util_g / double(passes);
    out["requests_submitted"] = submitted;
  }

  // The first-fit peer on the same stream.
  {
    FirstFit ff;
    Workload work(42);
    std::mt19937 rng(1);
    size_t placements = 0, passes = 0;
    Clock::duration pass_time{};
    double util_v = 0, util_g = 0;
    while (placements < kTargetPlacements) {
      while (ff.pending() < kBacklog) ff.Submit(work.Next());
      auto t1 = Clock::now();
      placements += ff.Pass();
      pass_time += Clock::now() - t1;
      ++passes;
      Resources used = ff.Used();
      util_v += double(used.vcores) / double(total.vcores);
      util_g += double(used.gpus) / double(total.gpus);
      while (OverFull(ff.Used(), total)) ff.ReleaseRandom(rng);
    }
    out["first_fit_placements"] = placements;
    out["first_fit_passes"] = passes;
    out["first_fit_schedule_seconds"] = Seconds(pass_time);
    out["first_fit_placements_per_s"] = double(placements) / Seconds(pass_time);
    out["first_fit_mean_vcore_utilization"] = util_v / double(passes);
    out["first_fit_mean_gpu_utilization"] = util_g / double(passes);
  }
  out["benchmark"] = "scheduler";
  out["nodes"] = kNodes;
  out["gpus_per_node"] = kGpusPerNode;
  out["queues"] = kQueues;
  out["users"] = kQueues * kUsersPerQueue;
  out["backlog_units"] = kBacklog;
  out["target_placements_per_s"] = 50000;
  out["ratio_tarn_vs_first_fit"] =
      out["tarn_placements_per_s"].get<double>() / out["first_fit_placements_per_s"].get<double>();
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
