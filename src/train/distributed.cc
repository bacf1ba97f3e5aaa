#include "train/distributed.h"

#include <torch/torch.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "train/checkpoint.h"
#include "train/idx.h"
#include "train/image_batches.h"
#include "train/metrics_server.h"
#include "train/model_export.h"
#include "train/model_zoo.h"
#include "train/parameter_server.h"
#include "train/ps_client.h"

namespace tarn::train {
namespace {

std::vector<int64_t> ParameterSizes(const torch::jit::Module& model) {
  std::vector<int64_t> sizes;
  for (const auto& [name, p] : NamedParameters(model)) sizes.push_back(p.numel());
  return sizes;
}

std::string TaskName(const ClusterSpec& c) {
  return c.task_type + " " + std::to_string(c.task_index);
}

}  // namespace

Status RunParameterServerTask(const DistributedOptions& o, const std::atomic<bool>& stop) {
  const ClusterSpec& c = o.cluster;
  ASSIGN_OR_RETURN(torch::jit::Module model, LoadModel(o.training.model, o.training.seed));
  const ShardPlan plan = PlanShards(ParameterSizes(model), static_cast<int>(c.Job("ps").size()));
  const std::string address = c.Address();
  ParameterServer::Options po;
  po.host = o.bind_ip.empty() ? "0.0.0.0" : o.bind_ip;
  po.port = std::atoi(address.c_str() + address.rfind(':') + 1);
  po.elements = plan.elements[static_cast<size_t>(c.task_index)];
  po.optimizer = o.training.optimizer;
  po.sync = o.sync;
  po.backup_workers = o.backup_workers;
  po.log = o.training.log;
  po.secret = o.secret;
  ASSIGN_OR_RETURN(auto server, ParameterServer::Create(po));
  RETURN_IF_ERROR(server->Start());
  if (o.training.log) {
    o.training.log(TaskName(c) + " serving " + std::to_string(po.elements) + " parameters on " +
                   po.host + ":" + std::to_string(server->port()) +
                   (o.sync ? " (synchronous, " + std::to_string(o.backup_workers) + " backup)"
                           : " (asynchronous)") +
                   (o.secret.empty() ? "; admits any process (no $TARN_ASSEMBLY_SECRET)"
                                     : "; admits only its assembly's processes"));
  }
  std::unique_ptr<MetricsServer> metrics;
  if (o.metrics_port >= 0) {
    ParameterServer* ps = server.get();
    metrics = std::make_unique<MetricsServer>(po.host, o.metrics_port, [ps] {
      const ParameterServer::Stats s = ps->stats();
      std::string out;
      auto metric = [&](const char* name, const char* type, const char* help, int64_t value) {
        out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
               name + " " + std::to_string(value) + "\n";
      };
      metric("tarn_ps_step", "gauge", "Updates applied to this server's parameters.", s.step);
      metric("tarn_ps_workers", "gauge", "Workers registered now.", s.workers);
      metric("tarn_ps_initialized", "gauge", "1 once the parameters are set.", s.initialized);
      metric("tarn_ps_pushes_total", "counter", "Gradients received.", s.pushes);
      metric("tarn_ps_stale_pushes_total", "counter",
             "Sync: gradients dropped as computed at an older step (backup workers).",
             s.stale_pushes);
      metric("tarn_ps_pulls_total", "counter", "Parameter pulls served.", s.pulls);
      return out;
    });
    RETURN_IF_ERROR(metrics->Start());
    if (o.training.log) {
      o.training.log(TaskName(c) + " metrics on " + po.host + ":" +
                     std::to_string(metrics->port()));
    }
  }
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (metrics) metrics->Stop();
  server->Stop();
  return OkStatus();
}

StatusOr<WorkerTaskResult> RunWorkerTask(const DistributedOptions& o,
                                         const std::atomic<bool>* stop) {
  const LocalTrainingOptions& t = o.training;
  const ClusterSpec& c = o.cluster;
  auto log = [&](const std::string& line) {
    if (t.log) t.log(line);
  };
  ASSIGN_OR_RETURN(ImageSet train, ReadImageSet(t.data_dir, "train"));
  std::optional<ImageSet> test;
  if (c.IsChief()) {
    ASSIGN_OR_RETURN(test, ReadImageSet(t.data_dir, "t10k"));
  }
  ASSIGN_OR_RETURN(torch::jit::Module model, LoadModel(t.model, t.seed));
  try {
    SetUpTorch(t.threads, t.jit_optimize);
    ASSIGN_OR_RETURN(const torch::Device device, ChooseDevice(t.device));
    model.to(device);
    const int64_t trainers = c.TrainerCount(), rank = c.TrainerRank();
    // This worker's shard: every trainers-th image from its rank.
    std::vector<int64_t> order;
    const int64_t limit = t.train_limit > 0 ? std::min(t.train_limit, train.count) : train.count;
    for (int64_t i = rank; i < limit; i += trainers) order.push_back(i);
    if (order.empty()) return InvalidArgumentError(TaskName(c) + ": its data shard is empty");

    const std::vector<int64_t> sizes = ParameterSizes(model);
    const size_t elements = static_cast<size_t>(std::accumulate(sizes.begin(), sizes.end(), 0L));
    PsClient::Options co;
    co.servers = c.Job("ps");
    co.worker = rank;
    co.chief = c.IsChief();
    co.plan = PlanShards(sizes, static_cast<int>(co.servers.size()));
    co.log = t.log;
    co.secret = o.secret;
    ASSIGN_OR_RETURN(auto client, PsClient::Connect(co));
    HostParameters host(model);
    const std::vector<float*>& params = host.params();
    // The newest checkpoint of this model and optimiser; NOT_FOUND when there is none (or
    // no --checkpoint_dir), an error when the newest is of something else.
    auto newest_checkpoint = [&] {
      return ReadResumableCheckpoint(t.checkpoint_dir, t.model, t.optimizer.kind, elements,
                                     BufferElements(model));
    };
    int64_t start_epoch = 1, start_position = 0;
    if (c.IsChief()) {
      StatusOr<Checkpoint> latest = newest_checkpoint();
      if (latest.ok()) {
        // Parameter servers that kept their state (only the chief restarted) hold newer
        // parameters than the checkpoint: they stay; the chief takes its data position.
        if (!client->initialized()) {
          RETURN_IF_ERROR(client->Restore({latest->step, std::move(latest->arrays)}));
          log(TaskName(c) + ": restored the parameter servers from the checkpoint of step " +
              std::to_string(latest->step));
        }
        // The model's buffers (batch norm's running statistics) are the chief's alone.
        RETURN_IF_ERROR(SetBufferValues(model, latest->buffers));
        start_epoch = latest->epoch;
        start_position = latest->position;
        log(TaskName(c) + ": resuming from the checkpoint of step " + std::to_string(latest->step) +
            " at epoch " + std::to_string(start_epoch) + ", batch " +
            std::to_string(start_position));
      } else if (latest.status().code() != StatusCode::kNotFound) {
        return latest.status();
      }
    }
    if (c.IsChief() && !client->initialized()) {
      host.FromModel();
      RETURN_IF_ERROR(client->Init(params));
      log(TaskName(c) + ": initialised the parameter servers");
    }
    log(TaskName(c) + ": training on " + std::to_string(order.size()) + " images (rank " +
        std::to_string(rank) + " of " + std::to_string(trainers) + ", " +
        (client->sync() ? "synchronous" : "asynchronous") + ", on " + device.str() + ")");

    model.train();
    LocalTrainingResult result;
    StepReporter reporter(t.progress, TaskName(c), t.log_every_secs, t.log);
    Progress& progress = reporter.progress();
    const auto start = std::chrono::steady_clock::now();
    // Both count from the first step pulled (a resumed chief neither evaluates nor
    // checkpoints at once).
    Every exports(t.export_every_secs, t.export_every_steps),
        checkpoints(t.checkpoint_every_secs, t.checkpoint_every_steps);
    // Time spent evaluating, exporting and checkpointing, left out of the training
    // throughput (samples/s counts training steps, as tarn-train alone and the peers do).
    std::chrono::steady_clock::duration paused{};
    int64_t epoch = start_epoch, position = start_position;  // the batches done this epoch
    int64_t last_checkpoint = -1;
    auto checkpoint_now = [&]() -> Status {
      const auto began = std::chrono::steady_clock::now();
      ASSIGN_OR_RETURN(PsClient::ModelState state, client->Snapshot());
      Checkpoint ck;
      ck.step = state.step;
      ck.model = t.model;
      ck.optimizer = t.optimizer.kind;
      ck.epoch = epoch;
      ck.position = position;
      ck.arrays = std::move(state.arrays);
      ck.buffers = BufferValues(model);
      RETURN_IF_ERROR(WriteCheckpoint(t.checkpoint_dir, ck));
      last_checkpoint = ck.step;
      log(TaskName(c) + ": checkpoint of step " + std::to_string(ck.step) + " (epoch " +
          std::to_string(epoch) + ", batch " + std::to_string(position) + ")");
      checkpoints.Mark(ck.step);
      paused += std::chrono::steady_clock::now() - began;
      progress.Checkpointed(ck.step);
      return OkStatus();
    };
    auto refill_servers = [&]() -> Status {
      StatusOr<Checkpoint> latest = newest_checkpoint();
      if (latest.ok()) {
        RETURN_IF_ERROR(client->Restore({latest->step, std::move(latest->arrays)}));
        log(TaskName(c) + ": gave the restarted parameter server the checkpoint of step " +
            std::to_string(latest->step));
        return OkStatus();
      }
      if (latest.status().code() != StatusCode::kNotFound) return latest.status();
      RETURN_IF_ERROR(client->Init(params));
      log(TaskName(c) + ": gave the restarted parameter server the parameters of its last pull");
      return OkStatus();
    };
    // A pull. The chief does not wait for a restarted ps to be initialised (nobody else
    // would): it refills it, as after a push, and pulls again.
    auto pull = [&]() -> StatusOr<int64_t> {
      StatusOr<int64_t> pulled = client->Pull(params);
      if (pulled.ok() || !c.IsChief() || !IsNotInitialized(pulled.status())) return pulled;
      log(TaskName(c) + ": " + pulled.status().message());
      RETURN_IF_ERROR(refill_servers());
      return client->Pull(params);
    };
    int64_t samples = 0, step = 0;
    int64_t evaluated_step = -1;
    auto export_now = [&]() -> Status {
      const auto began = std::chrono::steady_clock::now();
      ASSIGN_OR_RETURN(step, pull());
      host.ToModel();
      evaluated_step = step;
      result.accuracy = Evaluate(model, *test);
      progress.accuracy = result.accuracy;
      log("step " + std::to_string(step) + ": test accuracy " + std::to_string(result.accuracy));
      if (!t.export_base.empty()) {
        ASSIGN_OR_RETURN(
            result.exported_version,
            ExportTrainedModel(model, t, train.rows, train.cols, result.accuracy, step));
        progress.Exported(result.exported_version);
      }
      exports.Mark(step);
      paused += std::chrono::steady_clock::now() - began;
      return OkStatus();
    };
    bool done = false, stopped = false;
    bool fresh = false;  // `params` hold what the last push's answer brought
    for (; epoch <= t.epochs; ++epoch, position = 0) {
      // The same order for an epoch in every run, so that a resumed chief skips exactly the
      // batches it had done.
      BatchLoader loader(train, EpochOrder(order, t.seed, rank, epoch),
                         static_cast<size_t>(position), t.batch_size,
                         {t.augment, t.seed, rank, epoch});
      torch::Tensor images, labels;
      while (!done && loader.Next(&images, &labels)) {
        if (stop != nullptr && stop->load()) {  // between steps: the position stays exact
          stopped = done = true;
          break;
        }
        if (!fresh) {  // else the last push's answer brought them
          ASSIGN_OR_RETURN(step, pull());
        }
        fresh = false;
        host.ToModel();
        if (!exports.marked()) exports.Mark(step);
        if (!checkpoints.marked()) checkpoints.Mark(step);
        if (t.max_steps > 0 && step >= t.max_steps) {
          done = true;
          break;
        }
        torch::Tensor loss = ForwardBackward(model, device, images, labels);
        const int64_t pulled_at = step;
        // The gradient goes and the parameters it made come back in one round trip.
        StatusOr<int64_t> pushed = client->PushPull(host.Gradients(), params);
        if (!pushed.ok() && IsNotInitialized(pushed.status())) {
          // A ps restarted and lost its share. The chief gives it back its part of the newest
          // checkpoint (the servers that kept theirs ignore it), or else of its last pull;
          // other workers wait for that at their next pull.
          if (c.IsChief()) {
            log(TaskName(c) + ": " + pushed.status().message());
            RETURN_IF_ERROR(refill_servers());
          }
          continue;
        }
        ASSIGN_OR_RETURN(step, std::move(pushed));
        fresh = true;
        ++result.steps;
        ++position;
        samples += images.size(0);
        // Async: how many other updates were applied between this gradient's pull and its own.
        reporter.Step(
            step, images.size(0), loss.item<double>(),
            client->sync() ? 0.0 : static_cast<double>(std::max<int64_t>(0, step - pulled_at - 1)));
        result.last_loss = reporter.mean_loss();
        if (c.IsChief() && !t.checkpoint_dir.empty() && checkpoints.Due(step)) {
          RETURN_IF_ERROR(checkpoint_now());
        }
        if (c.IsChief() && exports.Due(step)) RETURN_IF_ERROR(export_now());
      }
      if (done) break;  // mid-epoch: the checkpoint keeps this epoch and position
      // The chief evaluates and exports at the end of each of its epochs.
      if (c.IsChief()) RETURN_IF_ERROR(export_now());
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start - paused).count();
    result.samples_per_second = seconds > 0 ? static_cast<double>(samples) / seconds : 0;
    if (c.IsChief() && !t.checkpoint_dir.empty()) RETURN_IF_ERROR(checkpoint_now());
    if (stopped) {
      // Asked to stop: the checkpoint above is what a restart resumes from; no export (the
      // grace period is short, and the last one stands).
      log(TaskName(c) + " stopped: " + std::to_string(result.steps) +
          " steps of its own, global step " + std::to_string(step));
      return WorkerTaskResult{result, true, last_checkpoint};
    }
    // Stopped mid-epoch (max_steps), or resumed with nothing left to do: export what there is
    // (not a second time when the last epoch's end already did, at this step).
    if (c.IsChief() && evaluated_step != step) RETURN_IF_ERROR(export_now());
    log(TaskName(c) + " done: " + std::to_string(result.steps) + " steps of its own, global step " +
        std::to_string(step) + ", " +
        std::to_string(static_cast<int64_t>(result.samples_per_second)) + " samples/s");
    return WorkerTaskResult{result, false, last_checkpoint};
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    return InternalError(TaskName(c) + ": " + what);
  }
}

}  // namespace tarn::train
