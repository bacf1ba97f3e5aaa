// Who may do what through the API (docs/api.md, "Who may do what"), and the audit event of a
// request. Pure functions of the authenticated Caller and the published queues; thread-safe.
//
//   - A tenant reads and drives (stop, start, flex, destroy, lifetime) its own assemblies and
//     launches into queues whose acl_submit_applications admits its account or a group of it.
//   - An operator or admin reads and drives every tenant's assemblies; launching for another
//     tenant needs acting as it (an admin's Impersonate-User), as in Kubernetes.
//   - An administrator of a queue (acl_administer_queue) is an operator of that queue's
//     assemblies, and may submit to it.
//   - Another tenant's assembly that a caller may not read does not exist for it (404, as if
//     it had never been made); a denied action on what it can see is 403.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "auth/authenticator.h"
#include "auth/identity.h"
#include "common/status.h"
#include "scheduler/scheduler.h"

namespace tarn::api {

// Whether `caller` may read and drive tenant `owner`'s assembly that runs in `queue`.
bool MayAccess(const auth::Caller& caller, const std::string& owner, const std::string& queue,
               const std::vector<scheduler::QueueUsage>& queues);

// OK when `caller` may launch into `queue` ("" is "default"); else PermissionDenied saying
// which ACL refused whom. A queue that does not exist is the Manager's to report.
Status MaySubmit(const auth::Caller& caller, const std::string& queue,
                 const std::vector<scheduler::QueueUsage>& queues);

// {"tenant", "uid", "account", "role"} of an identity (uid null for a remote tenant).
nlohmann::json IdentityJson(const auth::Identity& who);

// What one request did, for the audit log (Kubernetes' audit event is the model). `caller` is
// null when authentication failed (then `failure` says why).
struct AuditFacts {
  const auth::Caller* caller = nullptr;
  auth::AuthFailure failure = auth::AuthFailure::kNone;
  std::string source;  // the peer: "127.0.0.1:40312", "unix"
  std::string method, path;
  std::string object;  // "alice/fmnist", "alice/token/ci"; "" when the request names none
  int status = 0;
  std::string denied;  // why it was denied ("" when allowed)
};
nlohmann::json AuditEvent(const AuditFacts& facts);

}  // namespace tarn::api
