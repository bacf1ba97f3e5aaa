#include "api/access.h"

namespace tarn::api {
namespace {

const scheduler::QueueConfig* FindQueue(const std::string& name,
                                        const std::vector<scheduler::QueueUsage>& queues) {
  const std::string& want = name.empty() ? std::string("default") : name;
  for (const scheduler::QueueUsage& q : queues) {
    if (q.config.name == want) return &q.config;
  }
  return nullptr;
}

}  // namespace

bool MayAccess(const auth::Caller& caller, const std::string& owner, const std::string& queue,
               const std::vector<scheduler::QueueUsage>& queues) {
  const auth::Identity& who = caller.who;
  if (owner == who.tenant || who.role >= auth::Role::kOperator) return true;
  const scheduler::QueueConfig* q = FindQueue(queue, queues);
  return q != nullptr && q->Administers(who.account, who.groups);
}

Status MaySubmit(const auth::Caller& caller, const std::string& queue,
                 const std::vector<scheduler::QueueUsage>& queues) {
  const auth::Identity& who = caller.who;
  const scheduler::QueueConfig* q = FindQueue(queue, queues);
  if (q == nullptr || who.role == auth::Role::kAdmin || q->Allows(who.account, who.groups) ||
      q->Administers(who.account, who.groups)) {
    return OkStatus();
  }
  return PermissionDeniedError("queue: " + q->name + " does not admit " +
                               (who.uid ? "account " : "remote user ") + who.account +
                               " (acl_submit_applications: \"" + q->submit_acl->ToString() +
                               "\")");
}

nlohmann::json IdentityJson(const auth::Identity& who) {
  return {{"tenant", who.tenant},
          {"uid", who.uid ? nlohmann::json(*who.uid) : nlohmann::json()},
          {"account", who.account},
          {"role", std::string(auth::RoleName(who.role))}};
}

nlohmann::json AuditEvent(const AuditFacts& f) {
  nlohmann::json e = {{"source", f.source}, {"method", f.method},
                      {"path", f.path},     {"status", f.status},
                      {"decision", f.denied.empty() ? "allow" : "deny"}};
  if (!f.object.empty()) e["object"] = f.object;
  if (!f.denied.empty()) e["reason"] = f.denied;
  if (f.caller == nullptr) {
    e["auth"] = {{"method", "none"}, {"failure", std::string(auth::AuthFailureName(f.failure))}};
    return e;
  }
  const auth::Caller& c = *f.caller;
  e["user"] = IdentityJson(c.who);
  if (c.actor) e["impersonated_by"] = IdentityJson(*c.actor);
  nlohmann::json how = {{"method", std::string(auth::AuthMethodName(c.method))}};
  if (c.method == auth::AuthMethod::kSocket) {
    how["uid"] = c.socket_uid;
    how["pid"] = c.socket_pid;
  } else if (c.method == auth::AuthMethod::kToken || c.method == auth::AuthMethod::kSession) {
    how["token"] = c.token_name;
  }
  e["auth"] = std::move(how);
  return e;
}

}  // namespace tarn::api
