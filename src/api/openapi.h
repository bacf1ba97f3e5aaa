// docs/openapi.yaml, compiled into the binary and served at GET /tarn/v1/openapi.yaml.
#pragma once

#include <string>

namespace tarn::api {

const std::string& OpenApiYaml();

}  // namespace tarn::api
