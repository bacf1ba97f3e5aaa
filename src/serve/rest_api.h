// RestApi: tarn-serve's HTTP routes, on top of the ModelRepository.
//
//   TF Serving:  GET  /v1/models/{m}[/versions/{v}|/labels/{l}]            status
//                GET  /v1/models/{m}[/versions/{v}|/labels/{l}]/metadata   metadata
//                POST /v1/models/{m}[/versions/{v}|/labels/{l}]:predict    predict
//   KServe v2:   GET  /v2, /v2/health/live, /v2/health/ready
//                GET  /v2/models/{m}[/versions/{v}][/ready]
//                POST /v2/models/{m}[/versions/{v}]/infer
//   Prometheus:  GET  /metrics (also TF Serving's /monitoring/prometheus/metrics)
//
// Errors are {"error": "..."} with TF Serving's mapping of status codes to HTTP statuses.
// Thread-safe: Handle runs on any HTTP thread; predictions are answered from batch threads.
#pragma once

#include <string>

#include "common/status.h"
#include "http/server.h"
#include "serve/model_repository.h"
#include "serve/serve_metrics.h"

namespace tarn::serve {

class RestApi {
 public:
  RestApi(const ModelRepository& repository, ServeMetrics& metrics, std::string version)
      : repository_(repository), metrics_(metrics), version_(std::move(version)) {}

  void Handle(http::Request request, http::Responder respond);

 private:
  const ModelRepository& repository_;
  ServeMetrics& metrics_;
  const std::string version_;
};

// TF Serving's mapping of status codes to HTTP statuses.
int HttpStatusFor(StatusCode code);

}  // namespace tarn::serve
