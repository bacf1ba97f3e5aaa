#include "serve/model_meta.h"

#include <sys/stat.h>

#include "common/file.h"
#include "serve/tensor.h"

namespace tarn::serve {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

StatusOr<ModelMeta> ParseModelMeta(const std::string& text, const std::string& source) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgumentError(source + ": not a JSON object");
  ModelMeta m;
  m.raw = j;
  if (auto it = j.find("input_shape"); it != j.end()) {
    if (!it->is_array() || it->empty() || it->size() > 4) {
      return InvalidArgumentError(source + ": input_shape: not a list of 1 to 4 sizes");
    }
    int64_t elements = 1;
    for (const auto& d : *it) {
      if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > 65536) {
        return InvalidArgumentError(source + ": input_shape: " + d.dump() +
                                    " is not a size in [1, 65536]");
      }
      elements *= d.get<int64_t>();
      m.input_shape.push_back(d.get<int64_t>());
    }
    if (elements > (64 << 20)) {
      return InvalidArgumentError(source + ": input_shape: " + ShapeString(m.input_shape) +
                                  " is larger than 64 Mi elements per example");
    }
  }
  if (auto it = j.find("dtype"); it != j.end()) {
    if (!it->is_string() || it->get<std::string>() != "float32") {
      return InvalidArgumentError(source + ": dtype: " + it->dump() +
                                  " is not served (models take float32)");
    }
  }
  if (auto it = j.find("labels"); it != j.end()) {
    if (!it->is_array()) return InvalidArgumentError(source + ": labels: not a list of names");
    for (const auto& l : *it) {
      if (!l.is_string())
        return InvalidArgumentError(source + ": labels: " + l.dump() + " is not a string");
      m.labels.push_back(l.get<std::string>());
    }
  }
  if (auto it = j.find("accuracy"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1) {
      return InvalidArgumentError(source + ": accuracy: " + it->dump() +
                                  " is not an accuracy in [0, 1]");
    }
    m.accuracy = it->get<double>();
  }
  return m;
}

StatusOr<ModelMeta> ReadModelMeta(const std::string& version_dir) {
  const std::string path = version_dir + "/meta.json";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return ModelMeta{};
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 1 << 20));
  return ParseModelMeta(text, path);
}

}  // namespace tarn::serve
