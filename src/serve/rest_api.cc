#include "serve/rest_api.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "serve/request_codec.h"

namespace tarn::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// What a path asks for.
struct Route {
  std::string api = "other";  // predict, infer, status, metadata, health, metrics, other
  std::string model;
  std::optional<int64_t> version;
  std::string label;
  std::string method;  // the HTTP method the route takes
  Status error;        // a path that names no route, or a bad version
};

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::optional<int64_t> ParseVersion(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

Route NotFoundRoute(std::string_view path) {
  Route r;
  r.error = NotFoundError("no route for " + std::string(path.substr(0, 200)));
  return r;
}

// /v1/models/{m}[/versions/{v}|/labels/{l}][/metadata|:predict]
Route ParseV1(const std::vector<std::string_view>& p, std::string_view path) {
  if (p.size() < 3 || p[1] != "models" || p[2].empty()) return NotFoundRoute(path);
  Route r;
  r.api = "status";
  r.method = "GET";
  std::vector<std::string_view> rest(p.begin() + 2, p.end());
  // A verb sticks to the last segment: ".../versions/3:predict".
  std::string_view& last = rest.back();
  if (const size_t colon = last.rfind(':'); colon != std::string_view::npos) {
    const std::string_view verb = last.substr(colon + 1);
    last = last.substr(0, colon);
    if (verb == "predict") {
      r.api = "predict";
      r.method = "POST";
    } else if (verb == "classify" || verb == "regress") {
      r.error = UnimplementedError(std::string(verb) +
                                   " takes tf.Example inputs, which TorchScript models do not "
                                   "have; use :predict");
      return r;
    } else {
      return NotFoundRoute(path);
    }
  }
  if (rest.size() >= 2 && rest.back() == "metadata" && r.api == "status") {
    r.api = "metadata";
    rest.pop_back();
  }
  r.model = std::string(rest[0]);
  if (rest.size() == 3 && rest[1] == "versions") {
    r.version = ParseVersion(rest[2]);
    if (!r.version) {
      r.error = InvalidArgumentError("version \"" + std::string(rest[2]) + "\" is not a number");
    }
  } else if (rest.size() == 3 && rest[1] == "labels" && !rest[2].empty()) {
    r.label = std::string(rest[2]);
  } else if (rest.size() != 1) {
    return NotFoundRoute(path);
  }
  return r;
}

// /v2, /v2/health/{live,ready}, /v2/models/{m}[/versions/{v}][/ready|/infer]
Route ParseV2(const std::vector<std::string_view>& p, std::string_view path) {
  Route r;
  r.method = "GET";
  if (p.size() == 1) {
    r.api = "metadata";
    return r;
  }
  if (p.size() == 3 && p[1] == "health" && (p[2] == "live" || p[2] == "ready")) {
    r.api = "health";
    r.label = std::string(p[2]);
    return r;
  }
  if (p.size() < 3 || p[1] != "models" || p[2].empty()) return NotFoundRoute(path);
  r.model = std::string(p[2]);
  size_t i = 3;
  if (p.size() >= 5 && p[3] == "versions") {
    r.version = ParseVersion(p[4]);
    if (!r.version) {
      r.error = InvalidArgumentError("version \"" + std::string(p[4]) + "\" is not a number");
    }
    i = 5;
  }
  if (i == p.size()) {
    r.api = "metadata";
  } else if (i + 1 == p.size() && p[i] == "ready") {
    r.api = "health";
  } else if (i + 1 == p.size() && p[i] == "infer") {
    r.api = "infer";
    r.method = "POST";
  } else {
    return NotFoundRoute(path);
  }
  return r;
}

Route Parse(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  if (path == "/metrics" || path == "/monitoring/prometheus/metrics") {
    Route r;
    r.api = "metrics";
    r.method = "GET";
    return r;
  }
  if (path.empty() || path[0] != '/') return NotFoundRoute(path);
  const auto parts = Split(path);
  if (parts[0] == "v1") return ParseV1(parts, path);
  if (parts[0] == "v2") return ParseV2(parts, path);
  return NotFoundRoute(path);
}

http::Response JsonResponse(int status, const json& body) {
  return http::Response(status, "application/json", body.dump() + "\n");
}

http::Response Error(const Status& s) {
  return JsonResponse(HttpStatusFor(s.code()), json{{"error", s.message()}});
}

json StatusJson(const std::vector<VersionStatus>& versions) {
  json list = json::array();
  for (const VersionStatus& v : versions) {
    list.push_back({{"version", std::to_string(v.version)},
                    {"state", VersionStateName(v.state)},
                    {"status",
                     {{"error_code", StatusCodeName(v.status.code())},
                      {"error_message", v.status.message()}}}});
  }
  return json{{"model_version_status", list}};
}

// tarn's addition to the model status: the rollout's labels, the canary's counts and the
// last decision (docs/serve.md, "Canary"). TF Serving clients ignore a field they do not know.
json RolloutJson(const ModelRepository::Rollout& r) {
  json labels = json::object();
  if (r.stable != 0) labels["stable"] = std::to_string(r.stable);
  if (r.canary != 0) labels["canary"] = std::to_string(r.canary);
  return json{{"version_labels", labels},
              {"traffic_percent", r.traffic_percent},
              {"canary_requests", r.canary_requests},
              {"canary_failures", r.canary_failures},
              {"stable_requests", r.stable_requests},
              {"stable_failures", r.stable_failures},
              {"promoted", r.promoted},
              {"rolled_back", r.rolled_back},
              {"refused", r.refused},
              {"last_decision", r.last_decision}};
}

json Dims(const std::vector<int64_t>& example, int64_t classes) {
  json dims = json::array({{{"size", "-1"}, {"name", ""}}});
  if (classes != 0) {
    dims.push_back({{"size", std::to_string(classes)}, {"name", ""}});
    return dims;
  }
  for (int64_t d : example) dims.push_back({{"size", std::to_string(d)}, {"name", ""}});
  return dims;
}

int64_t Classes(const ModelMeta& m) {
  return m.labels.empty() ? -1 : static_cast<int64_t>(m.labels.size());
}

json V1Metadata(const LoadedVersion& v) {
  const ModelMeta& m = v.meta();
  const json input = {{"dtype", "DT_FLOAT"},
                      {"tensor_shape",
                       {{"dim", Dims(m.input_shape, 0)}, {"unknown_rank", m.input_shape.empty()}}},
                      {"name", "x"}};
  const json output = {{"dtype", "DT_FLOAT"},
                       {"tensor_shape", {{"dim", Dims({}, Classes(m))}, {"unknown_rank", false}}},
                       {"name", "logits"}};
  json signature = {{"inputs", {{"x", input}}},
                    {"outputs", {{"logits", output}}},
                    {"method_name", "tensorflow/serving/predict"}};
  return json{{"model_spec",
               {{"name", v.model()}, {"signature_name", ""}, {"version", std::to_string(v.version())}}},
              {"metadata",
               {{"signature_def", {{"signature_def", {{"serving_default", signature}}}}},
                {"meta", m.raw}}}};
}

json V2Metadata(const LoadedVersion& v, const std::vector<VersionStatus>& versions) {
  json names = json::array();
  for (const VersionStatus& s : versions) {
    if (s.state == VersionState::kAvailable) names.push_back(std::to_string(s.version));
  }
  json in_shape = json::array({-1});
  for (int64_t d : v.meta().input_shape) in_shape.push_back(d);
  return json{{"name", v.model()},
              {"versions", names},
              {"platform", "pytorch_torchscript"},
              {"inputs", json::array({{{"name", "x"}, {"datatype", "FP32"}, {"shape", in_shape}}})},
              {"outputs", json::array({{{"name", "logits"},
                                        {"datatype", "FP32"},
                                        {"shape", json::array({-1, Classes(v.meta())})}}})}};
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kCancelled: return 499;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kDeadlineExceeded: return 504;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kFailedPrecondition: return 400;
    case StatusCode::kAborted: return 409;
    case StatusCode::kOutOfRange: return 400;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kUnknown:
    case StatusCode::kInternal:
    case StatusCode::kDataLoss: return 500;
  }
  return 500;
}

void RestApi::Handle(http::Request request, http::Responder respond) {
  const Route route = Parse(request.target);
  // Metric labels only name configured models, so that unknown names cannot grow them.
  const std::string model_label = repository_.HasModel(route.model) ? route.model : "";
  const auto start = Clock::now();
  auto finish = [this, api = route.api, model_label, start,
                 respond = std::move(respond)](http::Response r) {
    metrics_.CountRequest(api, model_label, r.status, Clock::now() - start);
    respond(std::move(r));
  };
  if (!route.error.ok()) return finish(Error(route.error));
  if (request.method != route.method && !(route.method == "GET" && request.method == "HEAD")) {
    return finish(JsonResponse(
        405, json{{"error", "method " + request.method + " is not allowed on " +
                                request.target.substr(0, 200) + " (use " + route.method + ")"}}));
  }
  if (route.api == "metrics") {
    return finish(http::Response{200, "text/plain; version=0.0.4", metrics_.Render(&repository_)});
  }
  if (route.api == "health" && route.model.empty()) {
    if (route.label == "live") return finish(JsonResponse(200, json{{"live", true}}));
    const bool ready = repository_.Ready();
    return finish(JsonResponse(ready ? 200 : 503, json{{"ready", ready}}));
  }
  if (route.api == "metadata" && route.model.empty()) {
    return finish(JsonResponse(
        200, json{{"name", "tarn-serve"}, {"version", version_}, {"extensions", json::array()}}));
  }
  if (route.api == "status") {
    auto status = repository_.Status(route.model, route.version, route.label);
    if (!status.ok()) return finish(Error(status.status()));
    json body = StatusJson(*status);
    if (auto rollout = repository_.RolloutOf(route.model))
      body["tarn_rollout"] = RolloutJson(*rollout);
    return finish(JsonResponse(200, body));
  }
  const bool inference = route.api == "predict" || route.api == "infer";
  auto found = inference ? repository_.Route(route.model, route.version, route.label)
                         : repository_.Find(route.model, route.version, route.label);
  if (route.api == "health") {  // a model's readiness
    return finish(
        JsonResponse(found.ok() ? 200 : 503, json{{"name", route.model}, {"ready", found.ok()}}));
  }
  if (!found.ok()) return finish(Error(found.status()));
  std::shared_ptr<LoadedVersion> version = std::move(*found);
  if (route.api == "metadata") {
    if (request.target.rfind("/v1/", 0) == 0)
      return finish(JsonResponse(200, V1Metadata(*version)));
    auto versions = repository_.Status(route.model, std::nullopt, "");
    return finish(JsonResponse(200, V2Metadata(*version, versions.value_or({}))));
  }
  const bool v2 = route.api == "infer";
  // Announced before the decode, so that a partial batch waits for this request rather
  // than going without it (the decode is most of an HTTP thread's work on a request).
  Batcher::Arrival arrival = version->Announce();
  auto parsed = v2 ? ParseInferRequest(request.body, version->meta())
                   : ParsePredictRequest(request.body, version->meta());
  if (!parsed.ok()) return finish(Error(parsed.status()));
  PredictRequest req = std::move(*parsed);
  Tensor input = std::move(req.input);
  LoadedVersion* raw = version.get();
  raw->Predict(
      std::move(input),
      [this, version = std::move(version), req = std::move(req), v2, finish = std::move(finish)](
          StatusOr<Tensor> out, std::chrono::nanoseconds queued) mutable {
        metrics_.ObserveQueue(version->model(), queued);
        // The request was parsed: a failure now is the model's, but for a full
        // queue or an unloading version (503), which say nothing of the version.
        repository_.Record(*version, !out.ok() && out.status().code() != StatusCode::kUnavailable);
        if (!out.ok()) return finish(Error(out.status()));
        finish(
            http::Response{200, "application/json",
                           v2 ? FormatInferResponse(*out, req, version->model(), version->version())
                              : FormatPredictResponse(*out, req, version->meta())});
      },
      std::move(arrival));
}

}  // namespace tarn::serve
