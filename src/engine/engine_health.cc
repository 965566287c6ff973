// See engine/engine_health.h.
#include "engine/engine_health.h"

#include <spdlog/spdlog.h>

#include "engine/tracked_instance.h"

namespace migd::engine {

void EngineHealth::MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId> ci,
                                         uint64_t xid) {
  MutexLock lock(registry_.mu());
  HealthChange change;
  change.gpu = gpu;
  change.reason = "xid " + std::to_string(xid);
  bool found = false;
  for (auto& [key, inst] : registry_.instances()) {
    if (inst.gpu != gpu || inst.gi() != gi) continue;
    if (ci && inst.ci() && *inst.ci() != *ci) continue;
    found = true;
    if (inst.unhealthy) continue;  // the first reason stays
    inst.unhealthy = true;
    inst.health_reason = change.reason;
    registry_.AnnounceMark(inst);
    change.instances.push_back(ViewOf(inst));
  }
  // An Xid on a GI migd does not track (foreign, or being created): nothing
  // to mark; the drift check sorts out what is there.
  if (!found) spdlog::warn("health: xid {} on an untracked GI {} of GPU {}", xid, gi.value(),
                           gpu.value());
  Announce(std::move(change));
}

void EngineHealth::MarkGpuUnhealthy(GpuIndex gpu, const std::string& reason) {
  MutexLock lock(registry_.mu());
  HealthChange change;
  change.gpu = gpu;
  change.reason = reason;
  change.gpu_unhealthy = registry_.unhealthy_gpus().emplace(gpu.value(), reason).second;
  for (auto& [key, inst] : registry_.instances()) {
    if (inst.gpu != gpu || inst.unhealthy) continue;
    inst.unhealthy = true;
    inst.health_reason = "GPU unhealthy: " + reason;
    registry_.AnnounceMark(inst);
    change.instances.push_back(ViewOf(inst));
  }
  Announce(std::move(change));
}

void EngineHealth::OnEvent(const driver::GpuEvent& event, HealthAction action) {
  if (listener_ != nullptr) listener_->OnGpuEvent(event, HealthActionName(action));
}

void EngineHealth::Announce(HealthChange change) {
  if (listener_ == nullptr || (!change.gpu_unhealthy && change.instances.empty())) return;
  change.time = clock_.Now();
  listener_->OnHealthChange(change);
}

}  // namespace migd::engine
