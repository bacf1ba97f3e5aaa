#include "train/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file.h"

namespace tarn::train {
namespace {

constexpr const char* kPrefix = "ckpt-";

Status WriteFileSynced(const std::string& path,
                       const std::vector<std::pair<const void*, size_t>>& parts) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError(path + ": " + std::strerror(errno));
  for (const auto& [data, size] : parts) {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd, static_cast<const char*>(data) + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = errno;
        ::close(fd);
        return InternalError(path + ": write: " + std::strerror(err));
      }
      done += static_cast<size_t>(n);
    }
  }
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!synced) return InternalError(path + ": fsync: " + std::strerror(err));
  return OkStatus();
}

Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return InternalError(dir + ": " + std::strerror(errno));
  ::fsync(fd);
  ::close(fd);
  return OkStatus();
}

// The steps of the complete checkpoints under `dir`, ascending.
std::vector<int64_t> Steps(const std::string& dir) {
  std::vector<int64_t> steps;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return steps;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(kPrefix, 0) != 0 || name.size() == std::strlen(kPrefix) || name.size() > 24) {
      continue;
    }
    const std::string digits = name.substr(std::strlen(kPrefix));
    if (std::all_of(digits.begin(), digits.end(), ::isdigit)) steps.push_back(std::stoll(digits));
  }
  ::closedir(d);
  std::sort(steps.begin(), steps.end());
  return steps;
}

// Over the arrays, then the buffers: state.bin's bytes in order.
uint32_t Crc(const std::vector<std::vector<float>>& arrays, const std::vector<float>& buffers) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  std::vector<const std::vector<float>*> all;
  for (const auto& a : arrays) all.push_back(&a);
  all.push_back(&buffers);
  for (const std::vector<float>* a : all) {
    const auto* p = reinterpret_cast<const Bytef*>(a->data());
    size_t left = a->size() * sizeof(float);
    while (left > 0) {
      const uInt chunk = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
      crc = ::crc32(crc, p, chunk);
      p += chunk;
      left -= chunk;
    }
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

Status WriteCheckpoint(const std::string& dir, const Checkpoint& c, int keep) {
  if (c.arrays.empty()) return InvalidArgumentError("checkpoint: no arrays");
  for (const auto& a : c.arrays) {
    if (a.size() != c.arrays[0].size()) return InvalidArgumentError("checkpoint: ragged arrays");
  }
  RETURN_IF_ERROR(MakeDirectories(dir, 0755));
  const std::string name = kPrefix + std::to_string(c.step);
  const std::string tmp = dir + "/.tmp-" + name + "-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  RETURN_IF_ERROR(MakeDirectories(tmp, 0755));
  std::vector<std::pair<const void*, size_t>> parts;
  for (const auto& a : c.arrays) parts.push_back({a.data(), a.size() * sizeof(float)});
  parts.push_back({c.buffers.data(), c.buffers.size() * sizeof(float)});
  const nlohmann::json meta = {{"step", c.step},
                               {"model", c.model},
                               {"optimizer", c.optimizer},
                               {"epoch", c.epoch},
                               {"position", c.position},
                               {"arrays", c.arrays.size()},
                               {"elements", c.arrays[0].size()},
                               {"buffers", c.buffers.size()},
                               {"crc32", Crc(c.arrays, c.buffers)}};
  const std::string meta_text = meta.dump(2) + "\n";
  Status s = WriteFileSynced(tmp + "/state.bin", parts);
  if (s.ok()) s = WriteFileSynced(tmp + "/meta.json", {{meta_text.data(), meta_text.size()}});
  if (s.ok()) s = SyncDirectory(tmp);
  const std::string final_dir = dir + "/" + name;
  if (s.ok()) {
    std::filesystem::remove_all(final_dir, ec);  // a checkpoint of the same step: replaced
    if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
      s = InternalError(final_dir + ": rename: " + std::strerror(errno));
    }
  }
  if (!s.ok()) {
    std::filesystem::remove_all(tmp, ec);
    return s;
  }
  RETURN_IF_ERROR(SyncDirectory(dir));
  std::vector<int64_t> steps = Steps(dir);
  for (size_t i = 0; i + static_cast<size_t>(std::max(1, keep)) < steps.size(); ++i) {
    RETURN_IF_ERROR(RemoveOutOfSight(dir, kPrefix + std::to_string(steps[i])));
  }
  return OkStatus();
}

StatusOr<Checkpoint> ReadLatestCheckpoint(const std::string& dir) {
  const std::vector<int64_t> steps = Steps(dir);
  if (steps.empty()) return NotFoundError("no checkpoint in " + dir);
  const std::string path = dir + "/" + kPrefix + std::to_string(steps.back());
  ASSIGN_OR_RETURN(std::string meta_text, ReadFileToString(path + "/meta.json", 1 << 20));
  const auto meta = nlohmann::json::parse(meta_text, nullptr, false);
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("checkpoint " + path + ": " + why);
  };
  if (!meta.is_object()) return bad("meta.json is not a JSON object");
  Checkpoint c;
  size_t arrays = 0, elements = 0, buffers = 0;
  uint32_t crc = 0;
  try {
    c.step = meta.at("step").get<int64_t>();
    c.model = meta.at("model").get<std::string>();
    c.optimizer = meta.at("optimizer").get<std::string>();
    c.epoch = meta.at("epoch").get<int64_t>();
    c.position = meta.at("position").get<int64_t>();
    arrays = meta.at("arrays").get<size_t>();
    elements = meta.at("elements").get<size_t>();
    crc = meta.at("crc32").get<uint32_t>();
    buffers = meta.value("buffers", size_t{0});  // absent before checkpoints held buffers
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("meta.json: ") + e.what());
  }
  if (arrays < 1 || arrays > 3 || elements == 0 || elements > (size_t{1} << 32) ||
      buffers > (size_t{1} << 32)) {
    return bad("meta.json: implausible arrays/elements/buffers");
  }
  const size_t bytes = (arrays * elements + buffers) * sizeof(float);
  ASSIGN_OR_RETURN(std::string state, ReadFileToString(path + "/state.bin", bytes + 1));
  if (state.size() != bytes) {
    return bad("state.bin holds " + std::to_string(state.size()) + " bytes, meta.json says " +
               std::to_string(bytes));
  }
  c.arrays.assign(arrays, std::vector<float>(elements));
  for (size_t i = 0; i < arrays; ++i) {
    std::memcpy(c.arrays[i].data(), state.data() + i * elements * sizeof(float),
                elements * sizeof(float));
  }
  c.buffers.resize(buffers);
  if (buffers > 0) {
    std::memcpy(c.buffers.data(), state.data() + arrays * elements * sizeof(float),
                buffers * sizeof(float));
  }
  if (Crc(c.arrays, c.buffers) != crc)
    return bad("state.bin does not match its checksum (corrupt)");
  return c;
}

StatusOr<Checkpoint> ReadResumableCheckpoint(const std::string& dir, const std::string& model,
                                             const std::string& optimizer, size_t elements,
                                             size_t buffer_elements) {
  if (dir.empty()) return NotFoundError("no checkpoint directory");
  ASSIGN_OR_RETURN(Checkpoint latest, ReadLatestCheckpoint(dir));
  const std::string which =
      "the newest checkpoint in " + dir + " (step " + std::to_string(latest.step) + ")";
  const size_t arrays = optimizer == "adam" ? 3 : 2;
  if (latest.model != model || latest.optimizer != optimizer || latest.arrays.size() != arrays) {
    return FailedPreconditionError(which + " is of model " + latest.model + " with " +
                                   latest.optimizer + ", not " + model + " with " + optimizer +
                                   "; use another --checkpoint_dir");
  }
  if (latest.arrays[0].size() != elements) {
    return FailedPreconditionError(which + " holds " + std::to_string(latest.arrays[0].size()) +
                                   " parameters, model " + model + " has " +
                                   std::to_string(elements) + "; use another --checkpoint_dir");
  }
  if (latest.buffers.size() != buffer_elements) {
    return FailedPreconditionError(which + " holds " + std::to_string(latest.buffers.size()) +
                                   " buffer values (batch norm's statistics), model " + model +
                                   " has " + std::to_string(buffer_elements) +
                                   "; use another --checkpoint_dir");
  }
  return latest;
}

}  // namespace tarn::train
