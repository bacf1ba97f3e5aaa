#include "train/distributed.h"

#include <torch/torch.h>

#include <chrono>
#include <numeric>
#include <random>
#include <thread>

#include "train/idx.h"
#include "train/image_batches.h"
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
  po.optimizer = o.optimizer;
  po.sync = o.sync;
  po.backup_workers = o.backup_workers;
  po.log = o.training.log;
  ASSIGN_OR_RETURN(auto server, ParameterServer::Create(po));
  RETURN_IF_ERROR(server->Start());
  if (o.training.log) {
    o.training.log(TaskName(c) + " serving " + std::to_string(po.elements) + " parameters on " +
                   po.host + ":" + std::to_string(server->port()) +
                   (o.sync ? " (synchronous, " + std::to_string(o.backup_workers) + " backup)"
                           : " (asynchronous)"));
  }
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server->Stop();
  return OkStatus();
}

StatusOr<LocalTrainingResult> RunWorkerTask(const DistributedOptions& o) {
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
    at::set_num_threads(std::max(1, t.threads));
    const int64_t trainers = c.TrainerCount(), rank = c.TrainerRank();
    // This worker's shard: every trainers-th image from its rank.
    std::vector<int64_t> order;
    const int64_t limit = t.train_limit > 0 ? std::min(t.train_limit, train.count) : train.count;
    for (int64_t i = rank; i < limit; i += trainers) order.push_back(i);
    if (order.empty()) return InvalidArgumentError(TaskName(c) + ": its data shard is empty");

    PsClient::Options co;
    co.servers = c.Job("ps");
    co.worker = rank;
    co.plan = PlanShards(ParameterSizes(model), static_cast<int>(co.servers.size()));
    co.log = t.log;
    ASSIGN_OR_RETURN(auto client, PsClient::Connect(co));
    std::vector<float*> params = ParameterData(model);
    if (c.IsChief() && !client->initialized()) {
      RETURN_IF_ERROR(client->Init(params));
      log(TaskName(c) + ": initialised the parameter servers");
    }
    log(TaskName(c) + ": training on " + std::to_string(order.size()) + " images (rank " +
        std::to_string(rank) + " of " + std::to_string(trainers) + ", " +
        (client->sync() ? "synchronous" : "asynchronous") + ")");

    model.train();
    std::mt19937_64 rng(t.seed + static_cast<uint64_t>(rank));
    LocalTrainingResult result;
    std::vector<double> recent;
    const auto start = std::chrono::steady_clock::now();
    auto last_export = start;
    int64_t samples = 0, step = 0;
    auto export_now = [&]() -> Status {
      ASSIGN_OR_RETURN(step, client->Pull(params));
      result.accuracy = Evaluate(model, *test);
      log("step " + std::to_string(step) + ": test accuracy " + std::to_string(result.accuracy));
      if (t.export_base.empty()) return OkStatus();
      nlohmann::json meta = {{"model", t.model},
                             {"input_shape", {1, train.rows, train.cols}},
                             {"dtype", "float32"},
                             {"labels", FashionMnistLabels()},
                             {"accuracy", result.accuracy},
                             {"step", step}};
      ASSIGN_OR_RETURN(result.exported_version,
                       ExportVersion(model, t.export_base, t.model_name, meta));
      log("exported " + t.export_base + "/" + t.model_name + "/" +
          std::to_string(result.exported_version));
      last_export = std::chrono::steady_clock::now();
      return OkStatus();
    };
    bool done = false;
    for (int epoch = 1; epoch <= t.epochs && !done; ++epoch) {
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t begin = 0; begin < order.size() && !done; begin += t.batch_size) {
        const size_t end = std::min(order.size(), begin + static_cast<size_t>(t.batch_size));
        ASSIGN_OR_RETURN(step, client->Pull(params));
        if (t.max_steps > 0 && step >= t.max_steps) {
          done = true;
          break;
        }
        for (auto& [name, p] : NamedParameters(model)) {
          if (p.mutable_grad().defined()) p.mutable_grad().zero_();
        }
        torch::Tensor logits = model.forward({ImageBatch(train, order, begin, end)}).toTensor();
        torch::Tensor loss =
            torch::nn::functional::cross_entropy(logits, LabelBatch(train, order, begin, end));
        loss.backward();
        StatusOr<int64_t> pushed = client->Push(GradientData(model));
        if (!pushed.ok() && IsNotInitialized(pushed.status()) && c.IsChief()) {
          // A ps restarted and lost its share: the chief's copy (from its last pull) is the
          // freshest there is.
          log(TaskName(c) + ": " + pushed.status().message() + "; initialising it again");
          RETURN_IF_ERROR(client->Init(params));
          continue;
        }
        ASSIGN_OR_RETURN(step, std::move(pushed));
        ++result.steps;
        samples += static_cast<int64_t>(end - begin);
        recent.push_back(loss.item<double>());
        if (recent.size() > 100) recent.erase(recent.begin());
        result.last_loss =
            std::accumulate(recent.begin(), recent.end(), 0.0) / static_cast<double>(recent.size());
        if (result.steps % 100 == 0) {
          log(TaskName(c) + " epoch " + std::to_string(epoch) + " step " + std::to_string(step) +
              " loss " + std::to_string(result.last_loss));
        }
        if (c.IsChief() && o.export_every_secs > 0 &&
            std::chrono::steady_clock::now() - last_export >
                std::chrono::duration<double>(o.export_every_secs)) {
          RETURN_IF_ERROR(export_now());
        }
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.samples_per_second = seconds > 0 ? static_cast<double>(samples) / seconds : 0;
    if (c.IsChief()) RETURN_IF_ERROR(export_now());
    log(TaskName(c) + " done: " + std::to_string(result.steps) + " steps of its own, global step " +
        std::to_string(step) + ", " +
        std::to_string(static_cast<int64_t>(result.samples_per_second)) + " samples/s");
    return result;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    return InternalError(TaskName(c) + ": " + what);
  }
}

}  // namespace tarn::train
