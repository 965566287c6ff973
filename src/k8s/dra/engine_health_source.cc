// See k8s/dra/engine_health_source.h.
#include "k8s/dra/engine_health_source.h"

#include <utility>

namespace migd::k8s::dra {

HealthSnapshot HealthFromViews(const std::vector<engine::GpuView>& gpus,
                               const std::vector<engine::InstanceView>& instances) {
  HealthSnapshot s;
  for (const engine::GpuView& g : gpus) {
    if (!g.unhealthy) continue;
    s.gpus[g.info.index] = HealthVerdict{Health::kUnhealthy, g.health_reason, 0};
  }
  for (const engine::InstanceView& i : instances) {
    // A Creating instance has no MIG UUID yet and no device to report.
    if (!i.unhealthy || i.mig_uuid.value().empty()) continue;
    s.instances[i.mig_uuid] = HealthVerdict{Health::kUnhealthy, i.health_reason, 0};
  }
  return s;
}

void EngineHealthSource::SetManager(const engine::Manager* manager) {
  {
    MutexLock lock(&mu_);
    manager_ = manager;
  }
  Notify();
}

HealthSnapshot EngineHealthSource::Snapshot() {
  const engine::Manager* manager = nullptr;
  {
    MutexLock lock(&mu_);
    manager = manager_;
  }
  // Outside mu_: the Manager's views take its registry lock, under which the
  // engine calls OnHealthChange (which takes mu_).
  if (manager == nullptr) return {};
  return HealthFromViews(manager->Gpus(), manager->List().instances);
}

uint64_t EngineHealthSource::AddListener(std::function<void()> on_change) {
  MutexLock lock(&mu_);
  const uint64_t handle = next_handle_++;
  listeners_.emplace(handle, std::move(on_change));
  return handle;
}

void EngineHealthSource::RemoveListener(uint64_t handle) {
  MutexLock lock(&mu_);
  listeners_.erase(handle);
}

void EngineHealthSource::OnInstanceEvent(const engine::InstanceEvent& event) {
  // Only an unhealthy instance's events can change a device's health: its
  // mark, its reclaim or destruction (the device is healthy again), its
  // recovery. Allocations of healthy instances send nothing to kubelet.
  if (event.instance.unhealthy || event.reason == engine::EventReason::kUnhealthy ||
      event.reason == engine::EventReason::kMarkedUnhealthy) {
    Notify();
  }
}

void EngineHealthSource::OnHealthChange(const engine::HealthChange&) { Notify(); }

uint64_t EngineHealthSource::notifications() const {
  MutexLock lock(&mu_);
  return notifications_;
}

void EngineHealthSource::Notify() {
  MutexLock lock(&mu_);
  ++notifications_;
  for (const auto& [handle, on_change] : listeners_) on_change();
}

}  // namespace migd::k8s::dra
