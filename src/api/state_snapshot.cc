#include "api/state_snapshot.h"

#include <algorithm>

#include "api/json_views.h"

namespace tarn::api {

int64_t LifetimeRemaining(int64_t deadline_ms, int64_t now_wall_ms) {
  if (deadline_ms <= 0) return -1;
  return std::max<int64_t>(0, (deadline_ms - now_wall_ms + 999) / 1000);
}

service::AssemblyStatus AssemblyView::Status(int64_t now_wall_ms) const {
  service::AssemblyStatus s = status_;
  s.lifetime_remaining_s = LifetimeRemaining(s.lifetime_deadline_ms, now_wall_ms);
  return s;
}

std::shared_ptr<const std::string> AssemblyView::Json(int64_t now_wall_ms) const {
  const int64_t lifetime = LifetimeRemaining(status_.lifetime_deadline_ms, now_wall_ms);
  {
    std::lock_guard lock(mu_);
    if (rendered_ && rendered_lifetime_ == lifetime) return rendered_;
  }
  service::AssemblyStatus s = status_;
  s.lifetime_remaining_s = lifetime;
  auto text = std::make_shared<const std::string>(ServiceJson(s).dump());
  std::lock_guard lock(mu_);
  rendered_ = text;
  rendered_lifetime_ = lifetime;
  return text;
}

const AssemblyView* StateSnapshot::Find(const std::string& user, const std::string& name) const {
  auto it = by_key.find(user + "/" + name);
  return it == by_key.end() ? nullptr : assemblies[it->second].get();
}

const InstanceRun* StateSnapshot::Run(const std::string& user, const std::string& name,
                                      const std::string& instance) const {
  auto it = runs.find(user + "/" + name + "/" + instance);
  return it == runs.end() ? nullptr : &it->second;
}

SnapshotPublisher::SnapshotPublisher() : current_(std::make_shared<const StateSnapshot>()) {}

void SnapshotPublisher::Publish(const service::Manager& m) {
  const std::shared_ptr<const StateSnapshot> previous = Current();
  auto next = std::make_shared<StateSnapshot>();
  next->generation = previous->generation + 1;
  for (service::AssemblyStatus& a : m.List("")) {
    const std::string key = a.user + "/" + a.name;
    const uint64_t serial = m.LastEventSerial(a.user, a.name);
    std::shared_ptr<const AssemblyView> old;
    if (auto it = previous->by_key.find(key); it != previous->by_key.end()) {
      old = previous->assemblies[it->second];
    }
    const bool same_status = old != nullptr && old->status() == a;
    std::shared_ptr<const std::vector<service::Event>> events;
    if (old != nullptr && old->last_event_serial() == serial) {
      events = old->events();
    } else {
      auto list = m.Events(a.user, a.name);
      events = std::make_shared<const std::vector<service::Event>>(
          list.ok() ? std::move(*list) : std::vector<service::Event>());
    }
    for (const service::ComponentStatus& c : a.components) {
      for (const service::InstanceStatus& i : c.instances) {
        next->runs[key + "/" + i.name] = InstanceRun{m.InstanceContainer(a.user, a.name, i.name),
                                                     m.InstanceRunning(a.user, a.name, i.name)};
      }
    }
    next->by_key[key] = next->assemblies.size();
    if (same_status && events == old->events()) {
      next->assemblies.push_back(std::move(old));  // with the JSON it rendered
    } else {
      const uint64_t modified = same_status ? old->modify_index() : next->generation;
      next->assemblies.push_back(
          std::make_shared<const AssemblyView>(std::move(a), std::move(events), serial, modified));
    }
  }
  next->nodes = m.backend().Nodes();
  next->queues = m.backend().Queues();
  std::function<void(const StateSnapshot&)> notify;
  {
    std::lock_guard lock(mu_);
    current_ = next;
    notify = on_publish_;
  }
  if (notify) notify(*next);
}

void SnapshotPublisher::OnPublish(std::function<void(const StateSnapshot&)> f) {
  std::lock_guard lock(mu_);
  on_publish_ = std::move(f);
}

std::shared_ptr<const StateSnapshot> SnapshotPublisher::Current() const {
  std::lock_guard lock(mu_);
  return current_;
}

}  // namespace tarn::api
