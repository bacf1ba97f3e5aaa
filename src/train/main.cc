// tarn-train: trains a model on Fashion-MNIST-style data and exports versions for serving.
// Flags follow DESIGN.md's contract (TensorFlow's names where they exist).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "train/local_trainer.h"

namespace {

int DefaultThreads() {
  if (const char* v = std::getenv("TARN_VCORES"); v != nullptr && std::atoi(v) > 0) {
    return std::atoi(v);
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tarn-train: train a model (alone, or as a ps/worker of a TF_CONFIG cluster)"};
  tarn::train::LocalTrainingOptions o;
  o.threads = DefaultThreads();
  std::string job_name, ps_hosts, worker_hosts;
  int task_index = 0;
  app.add_option("--model", o.model, "a zoo model (mlp, cnn) or a TorchScript file")
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
  app.add_option("--optimizer", o.optimizer)
      ->capture_default_str()
      ->check(CLI::IsMember({"adam", "sgd"}));
  app.add_option("--learning_rate", o.learning_rate)->capture_default_str();
  app.add_option("--momentum", o.momentum, "for sgd")->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads (default: $TARN_VCORES)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed)->capture_default_str();
  app.add_option("--job_name", job_name, "ps or worker, when not from TF_CONFIG");
  app.add_option("--task_index", task_index);
  app.add_option("--ps_hosts", ps_hosts);
  app.add_option("--worker_hosts", worker_hosts);
  CLI11_PARSE(app, argc, argv);

  bool distributed = !job_name.empty() || !ps_hosts.empty();
  if (const char* tf = std::getenv("TF_CONFIG"); tf != nullptr && *tf != '\0') {
    const nlohmann::json j = nlohmann::json::parse(tf, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      std::cerr << "tarn-train: TF_CONFIG is not a JSON object\n";
      return 2;
    }
    const nlohmann::json cluster = j.value("cluster", nlohmann::json::object());
    distributed |= cluster.contains("ps") && !cluster["ps"].empty();
  }
  if (distributed) {
    std::cerr << "tarn-train: parameter-server training (ps/worker roles) is not built yet; "
                 "run without TF_CONFIG and --job_name to train alone in this process\n";
    return 2;
  }
  o.log = [](const std::string& line) { std::cout << line << std::endl; };
  auto result = tarn::train::RunLocalTraining(o);
  if (!result.ok()) {
    std::cerr << "tarn-train: " << result.status().message() << "\n";
    return 1;
  }
  std::cout << "trained " << result->steps << " steps, test accuracy " << result->accuracy
            << (result->exported_version > 0
                    ? ", exported version " + std::to_string(result->exported_version)
                    : std::string())
            << std::endl;
  return 0;
}
