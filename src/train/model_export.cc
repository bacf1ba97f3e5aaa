#include "train/model_export.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/file.h"
#include "train/idx.h"

namespace tarn::train {
namespace {

Status FsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return InternalError(path + ": " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return InternalError(path + ": fsync: " + std::strerror(err));
  return OkStatus();
}

bool IsVersion(const std::string& name) {
  return !name.empty() && name.size() <= 18 &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

int64_t LatestVersion(const std::string& base, const std::string& model_name) {
  int64_t latest = 0;
  DIR* d = ::opendir((base + "/" + model_name).c_str());
  if (d == nullptr) return 0;
  while (dirent* e = ::readdir(d)) {
    if (IsVersion(e->d_name)) latest = std::max<int64_t>(latest, std::stoll(e->d_name));
  }
  ::closedir(d);
  return latest;
}

StatusOr<int64_t> ExportVersion(torch::jit::Module& module, const std::string& base,
                                const std::string& model_name, nlohmann::json meta, int keep) {
  const std::string model_dir = base + "/" + model_name;
  RETURN_IF_ERROR(MakeDirectories(model_dir, 0755));
  const int64_t version = LatestVersion(base, model_name) + 1;
  const std::string tmp =
      model_dir + "/.tmp-" + std::to_string(version) + "-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  RETURN_IF_ERROR(MakeDirectories(tmp, 0755));
  meta["version"] = version;
  const bool training = module.is_training();
  try {
    // Always saved on the CPU, whatever the model trains on, so that any server (and
    // Python's torch.jit.load without map_location) loads it.
    // And in eval mode: batch norm uses its running statistics, as when served.
    bool on_cpu = true;
    for (const torch::Tensor& p : module.parameters()) on_cpu = on_cpu && p.device().is_cpu();
    module.eval();
    if (on_cpu) {
      module.save(tmp + "/model.pt");
    } else {
      torch::jit::Module copy = module.clone();
      copy.to(torch::kCPU);
      copy.save(tmp + "/model.pt");
    }
    module.train(training);
  } catch (const std::exception& e) {
    module.train(training);
    std::filesystem::remove_all(tmp, ec);
    return InternalError(tmp + "/model.pt: cannot save: " + e.what());
  }
  {
    std::ofstream out(tmp + "/meta.json");
    out << meta.dump(2) << "\n";
    if (!out.flush()) {
      std::filesystem::remove_all(tmp, ec);
      return InternalError(tmp + "/meta.json: cannot write");
    }
  }
  for (const char* f : {"/model.pt", "/meta.json", ""}) RETURN_IF_ERROR(FsyncPath(tmp + f));
  const std::string final_dir = model_dir + "/" + std::to_string(version);
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    const int err = errno;
    std::filesystem::remove_all(tmp, ec);
    return InternalError(final_dir + ": rename: " + std::strerror(err));
  }
  RETURN_IF_ERROR(FsyncPath(model_dir));
  if (keep > 0) {
    // Out of sight first (a rename), then deleted, so that a server polling the directory
    // never finds half a version; one still loading it fails to and keeps what it has.
    std::vector<int64_t> old;
    if (DIR* d = ::opendir(model_dir.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (IsVersion(e->d_name) && std::stoll(e->d_name) <= version - keep) {
          old.push_back(std::stoll(e->d_name));
        }
      }
      ::closedir(d);
    }
    std::sort(old.begin(), old.end());  // oldest first
    for (int64_t v : old) RETURN_IF_ERROR(RemoveOutOfSight(model_dir, std::to_string(v)));
  }
  return version;
}

StatusOr<int64_t> ExportTrainedModel(torch::jit::Module& model, const LocalTrainingOptions& o,
                                     int64_t rows, int64_t cols, double accuracy, int64_t step,
                                     int64_t epoch) {
  nlohmann::json meta = {{"model", o.model},
                         {"input_shape", {1, rows, cols}},
                         {"dtype", "float32"},
                         {"labels", FashionMnistLabels()},
                         {"accuracy", accuracy},
                         {"step", step}};
  if (epoch > 0) meta["epoch"] = epoch;
  ASSIGN_OR_RETURN(int64_t version,
                   ExportVersion(model, o.export_base, o.model_name, meta, o.keep_versions));
  if (o.log) {
    o.log("exported " + o.export_base + "/" + o.model_name + "/" + std::to_string(version));
  }
  return version;
}

}  // namespace tarn::train
