// The body `tarn launch` posts: the assembly document as written, made self-contained for a
// server that cannot read the client's files. Every config file's local src_file becomes a
// data: URI of its contents and a TARBALL artifact's relative path becomes absolute; data:
// URIs, remote URIs and everything else are left as they are. Pure apart from `read_file`;
// thread-safe when it is.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace tarn::cli {

using ReadFileFn = std::function<StatusOr<std::string>(const std::string& path)>;

// `document` is the parsed assembly file (JSON or YAML); relative paths are resolved against
// `base_dir` (the assembly file's directory) as spec::LoadAssemblyFile resolves them.
// Errors name the field (components[0].configuration.files[1].src_file) and the file.
StatusOr<nlohmann::json> MakeLaunchBody(nlohmann::json document, const std::string& base_dir,
                                        const ReadFileFn& read_file);

}  // namespace tarn::cli
