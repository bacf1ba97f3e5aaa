// tarn-train: trains a model on Fashion-MNIST-style data and exports versions for serving.
// Flags follow DESIGN.md's contract (TensorFlow's names where they exist).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "common/workload_process.h"
#include "train/cluster_spec.h"
#include "train/distributed.h"
#include "train/local_trainer.h"
#include "train/metrics_server.h"
#include "train/progress.h"

namespace {

std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop = true; }

}  // namespace

int main(int argc, char** argv) {
  tarn::PinBlasThreads(argv);
  tarn::KeepLargeBuffersInHeap();
  CLI::App app{"tarn-train: train a model (alone, or as a ps/worker of a TF_CONFIG cluster)"};
  tarn::train::LocalTrainingOptions o;
  o.threads = tarn::InstanceCores();
  std::string job_name, ps_hosts, worker_hosts;
  int64_t task_index = 0;
  tarn::train::DistributedOptions d;
  app.add_option("--model", o.model, "a zoo model (mlp, cnn, cnn_bn) or a TorchScript file")
      ->capture_default_str();
  app.add_option("--data_dir", o.data_dir, "IDX files (gzipped or not)")->capture_default_str();
  app.add_option("--export_base", o.export_base,
                 "export each evaluated model as <export_base>/<model_name>/<version>");
  app.add_option("--model_name", o.model_name)->capture_default_str();
  app.add_option("--epochs", o.epochs)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max_steps", o.max_steps, "stop after N steps (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--train_limit", o.train_limit, "use only the first N training images")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch_size", o.batch_size)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--optimizer", o.optimizer.kind)
      ->capture_default_str()
      ->check(CLI::IsMember({"adam", "sgd"}));
  app.add_option("--learning_rate", o.optimizer.learning_rate)->capture_default_str();
  app.add_option("--momentum", o.optimizer.momentum, "for sgd")->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads (default: $TARN_VCORES)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed)->capture_default_str();
  app.add_flag("--augment_flip", o.augment.flip,
               "flip half the training images left to right (each batch's own draw)");
  app.add_option("--augment_shift", o.augment.shift,
                 "shift each training image by up to N pixels each way (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4));
  app.add_option("--device", o.device,
                 "auto (a GPU when libtorch has CUDA and the instance has a GPU), cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_flag("--jit_optimize", o.jit_optimize,
               "let TorchScript's graph executor profile and fuse (slower on the CPU here)");
  app.add_option("--job_name", job_name, "ps or worker, when not from TF_CONFIG");
  app.add_option("--task_index", task_index);
  app.add_option("--ps_hosts", ps_hosts);
  app.add_option("--worker_hosts", worker_hosts);
  app.add_flag("--sync_replicas", d.sync,
               "synchronous: each step averages the gradients of the current workers");
  app.add_option("--backup_workers", d.backup_workers,
                 "synchronous: a step goes on without the slowest N")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--export_every_secs", o.export_every_secs,
                 "evaluate and export this often (the chief, in a cluster; 0: not by time)")
      ->capture_default_str();
  app.add_option("--export_every_steps", o.export_every_steps,
                 "also evaluate and export every N steps (0: by time and at epoch ends only)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--checkpoint_dir", o.checkpoint_dir,
                 "checkpoint here (the chief, in a cluster); a restart resumes from the newest");
  app.add_option("--checkpoint_every_secs", o.checkpoint_every_secs)->capture_default_str();
  app.add_option("--checkpoint_every_steps", o.checkpoint_every_steps, "(0: by time only)")
      ->check(CLI::NonNegativeNumber);
  int metrics_port = -1;
  if (const char* p = std::getenv("TARN_PORT_METRICS"); p != nullptr) metrics_port = std::atoi(p);
  app.add_option("--metrics_port", metrics_port,
                 "serve Prometheus GET /metrics here (default: $TARN_PORT_METRICS, else none)");
  app.add_option("--log_every_secs", o.log_every_secs, "a JSON progress line this often")
      ->capture_default_str();
  app.add_option("--keep_versions", o.keep_versions, "exported versions kept (0: all)")
      ->capture_default_str();
  app.add_option("--lr_decay_steps", o.optimizer.decay_steps,
                 "decay the learning rate every N steps")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--lr_decay_rate", o.optimizer.decay_rate, "by this factor")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the help, or the error and how to get help
    return code == 0 ? 0 : 2;
  }

  const char* tf_config = std::getenv("TF_CONFIG");
  auto cluster = job_name.empty() && ps_hosts.empty()
                     ? tarn::train::ParseTfConfig(tf_config != nullptr ? tf_config : "")
                     : tarn::train::ClusterFromFlags(job_name, task_index, ps_hosts, worker_hosts);
  if (!cluster.ok()) {
    std::cerr << "tarn-train: " << cluster.status().message() << "\n";
    return 2;
  }
  const bool runs_a_model = cluster->jobs.empty() || cluster->task_type != "ps";
  if (tarn::Status device = tarn::train::CheckDevice(o.device); runs_a_model && !device.ok()) {
    std::cerr << "tarn-train: " << device.message() << "\n";
    return 2;
  }
  o.log = [](const std::string& line) { std::cout << line << std::endl; };
  const char* tarn_ip = std::getenv("TARN_IP");
  const std::string bind = tarn_ip != nullptr && *tarn_ip != '\0' ? tarn_ip : "0.0.0.0";
  tarn::train::Progress progress;
  o.progress = &progress;
  std::unique_ptr<tarn::train::MetricsServer> metrics;
  const bool is_ps = !cluster->jobs.empty() && cluster->task_type == "ps";
  if (metrics_port >= 0 && !is_ps) {
    metrics = std::make_unique<tarn::train::MetricsServer>(
        bind, metrics_port, [&progress] { return progress.PrometheusText(); });
    if (tarn::Status s = metrics->Start(); !s.ok()) {
      std::cerr << "tarn-train: --metrics_port " << metrics_port << ": " << s.message() << "\n";
      return 1;
    }
    std::cout << "metrics on " << bind << ":" << metrics->port() << std::endl;
  }
  if (!cluster->jobs.empty()) {
    d.training = o;
    d.cluster = *cluster;
    if (tarn_ip != nullptr) d.bind_ip = tarn_ip;
    // Given to the assembly's instances alone (tarn server): the ps's admission.
    if (const char* secret = std::getenv("TARN_ASSEMBLY_SECRET"); secret != nullptr) {
      d.secret = secret;
    }
    d.metrics_port = metrics_port;
    if (cluster->task_type == "ps") {
      struct sigaction sa {};
      sa.sa_handler = OnStopSignal;
      ::sigaction(SIGTERM, &sa, nullptr);
      ::sigaction(SIGINT, &sa, nullptr);
      tarn::Status s = tarn::train::RunParameterServerTask(d, g_stop);
      if (!s.ok()) {
        std::cerr << "tarn-train: " << s.message() << "\n";
        return 1;
      }
      return 0;
    }
    if (cluster->task_type != "worker" && cluster->task_type != "chief") {
      std::cerr << "tarn-train: task type \"" << cluster->task_type
                << "\" is not one tarn-train runs (ps, worker, chief)\n";
      return 2;
    }
    // SIGTERM (tarn stopping it: a stop, a flex-down, a preemption): the step in flight
    // ends, the chief checkpoints it, and the last stderr line says where a restart resumes
    // (tarn shows it: "resumes from step N"). The ps is stopped only after the chief.
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sa.sa_flags = SA_RESTART;  // a blocking pull or push carries on; the loop checks the flag
    ::sigaction(SIGTERM, &sa, nullptr);
    auto result = tarn::train::RunWorkerTask(d, &g_stop);
    if (!result.ok()) {
      std::cerr << "tarn-train: " << result.status().message() << "\n";
      return 1;
    }
    if (result->stopped) {
      std::cerr << "tarn-train: stopped by SIGTERM";
      if (result->checkpoint_step >= 0) {
        std::cerr << ": checkpoint at step " << result->checkpoint_step << " in "
                  << o.checkpoint_dir;
      }
      std::cerr << std::endl;
      return 128 + SIGTERM;  // as a shell reports a process the signal ended
    }
    return 0;
  }
  if (d.sync || d.backup_workers > 0) {
    std::cerr << "tarn-train: --sync_replicas and --backup_workers need a cluster (TF_CONFIG, "
                 "or --job_name with --ps_hosts and --worker_hosts)\n";
    return 2;
  }
  auto result = tarn::train::RunLocalTraining(o);
  if (!result.ok()) {
    std::cerr << "tarn-train: " << result.status().message() << "\n";
    return 1;
  }
  std::cout << "trained " << result->steps << " steps ("
            << static_cast<int64_t>(result->samples_per_second) << " samples/s), test accuracy "
            << result->accuracy
            << (result->exported_version > 0
                    ? ", exported version " + std::to_string(result->exported_version)
                    : std::string())
            << std::endl;
  return 0;
}
