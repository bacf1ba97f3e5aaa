#include "cli/launch_body.h"

#include <filesystem>

#include "spec/data_uri.h"
#include "spec/diagnostics.h"

namespace tarn::cli {
namespace {

using json = nlohmann::json;

// "file:///a" -> "/a"; other strings unchanged.
std::string LocalPath(const std::string& name) {
  return name.rfind("file://", 0) == 0 ? name.substr(7) : name;
}

std::string Resolve(const std::string& local, const std::string& base_dir) {
  if (local.empty() || local[0] == '/' || base_dir.empty()) return local;
  return base_dir + "/" + local;
}

Status InlineFiles(json& configuration, const std::string& path, const std::string& base_dir,
                   const ReadFileFn& read_file) {
  if (!configuration.is_object()) return OkStatus();
  auto files = configuration.find("files");
  if (files == configuration.end() || !files->is_array()) return OkStatus();
  const std::string files_path = spec::ChildPath(path, "files");
  for (size_t i = 0; i < files->size(); ++i) {
    json& file = (*files)[i];
    if (!file.is_object()) continue;
    auto src = file.find("src_file");
    if (src == file.end() || !src->is_string()) continue;
    const std::string name = src->get<std::string>();
    if (spec::IsDataUri(name)) continue;
    const std::string local = LocalPath(name);
    if (local.empty() || local.find("://") != std::string::npos) continue;
    auto content = read_file(Resolve(local, base_dir));
    if (!content.ok()) {
      return content.status().WithContext(
          spec::ChildPath(spec::IndexPath(files_path, i), "src_file"));
    }
    *src = spec::EncodeDataUri(*content);
  }
  return OkStatus();
}

void AbsoluteTarball(json& artifact, const std::string& base_dir) {
  if (!artifact.is_object()) return;
  auto type = artifact.find("type");
  auto id = artifact.find("id");
  if (type == artifact.end() || *type != "TARBALL" || id == artifact.end() || !id->is_string()) {
    return;
  }
  const std::string local = LocalPath(id->get<std::string>());
  if (local.empty() || local[0] == '/' || local.find("://") != std::string::npos) return;
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(Resolve(local, base_dir), ec);
  if (!ec) *id = absolute.lexically_normal().string();
}

}  // namespace

StatusOr<json> MakeLaunchBody(json document, const std::string& base_dir,
                              const ReadFileFn& read_file) {
  if (!document.is_object()) return document;
  if (auto it = document.find("artifact"); it != document.end()) AbsoluteTarball(*it, base_dir);
  if (auto it = document.find("configuration"); it != document.end()) {
    RETURN_IF_ERROR(InlineFiles(*it, "configuration", base_dir, read_file));
  }
  auto components = document.find("components");
  if (components == document.end() || !components->is_array()) return document;
  for (size_t i = 0; i < components->size(); ++i) {
    json& component = (*components)[i];
    if (!component.is_object()) continue;
    if (auto it = component.find("artifact"); it != component.end()) {
      AbsoluteTarball(*it, base_dir);
    }
    if (auto it = component.find("configuration"); it != component.end()) {
      const std::string path = spec::ChildPath(spec::IndexPath("components", i), "configuration");
      RETURN_IF_ERROR(InlineFiles(*it, path, base_dir, read_file));
    }
  }
  return document;
}

}  // namespace tarn::cli
