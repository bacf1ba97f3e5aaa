// One readiness check of one instance, as YARN's service AM performs them:
//   DEFAULT: ready once running (the caller knows that);
//   PORT:    a TCP connection to the instance's address and `port` opens within `timeout`;
//   HTTP:    GET `url` answers a status from `min.success` to `max.success` (200-299).
// The connection goes to the instance's IP, not to the URL's host name: the name is sent as
// the Host header, so probes do not depend on DNS. Blocking, at most `timeout` (default
// 1000 ms) per probe; thread-safe.
#pragma once

#include <string>

#include "spec/assembly.h"

namespace tarn::service {

struct ProbeResult {
  bool ready = false;
  std::string detail;  // "GET /v1/models/fmnist answered 404", "connection refused", ...
};

// REQUIRES: the check's properties are substituted (no ${THIS_HOST} left).
ProbeResult Probe(const spec::ReadinessCheck& check, const std::string& ip);

}  // namespace tarn::service
