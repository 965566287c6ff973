// See engine/engine_health.h.
#include "engine/engine_health.h"

#include <spdlog/spdlog.h>

#include "engine/tracked_instance.h"

namespace migd::engine {

namespace {

// Whether a health change of `inst` rewrites its record (Active and Idle
// instances; the others are on their way out).
bool RecordsHealth(const TrackedInstance& inst) {
  return inst.state == InstanceState::kActive || inst.state == InstanceState::kIdle;
}

// Marks `inst`; keeps a copy in `marked` when its record is to be rewritten.
void Mark(TrackedInstance& inst, std::string reason, std::vector<TrackedInstance>& marked) {
  inst.unhealthy = true;
  inst.health_reason = std::move(reason);
  if (RecordsHealth(inst)) marked.push_back(inst);
}

}  // namespace

void EngineHealth::MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId> ci,
                                         uint64_t xid) {
  std::vector<TrackedInstance> marked;
  bool found = false;
  {
    MutexLock lock(registry_.mu());
    HealthChange change;
    change.gpu = gpu;
    change.reason = "xid " + std::to_string(xid);
    for (auto& [key, inst] : registry_.instances()) {
      if (inst.gpu != gpu || inst.gi() != gi) continue;
      if (ci && inst.ci() && *inst.ci() != *ci) continue;
      found = true;
      if (inst.unhealthy) continue;  // the first reason stays
      Mark(inst, change.reason, marked);
      registry_.AnnounceMark(inst);
      change.instances.push_back(ViewOf(inst));
    }
    Announce(std::move(change));
  }
  // An Xid on a GI migd does not track (foreign, or being created): nothing
  // to mark; the drift check sorts out what is there.
  if (!found) spdlog::warn("health: xid {} on an untracked GI {} of GPU {}", xid, gi.value(),
                           gpu.value());
  Persist(marked);
}

void EngineHealth::MarkGpuUnhealthy(GpuIndex gpu, const std::string& reason) {
  std::vector<TrackedInstance> marked;
  {
    MutexLock lock(registry_.mu());
    HealthChange change;
    change.gpu = gpu;
    change.reason = reason;
    change.gpu_changed = registry_.unhealthy_gpus().emplace(gpu.value(), reason).second;
    for (auto& [key, inst] : registry_.instances()) {
      if (inst.gpu != gpu || inst.unhealthy) continue;  // the first reason stays
      Mark(inst, "GPU unhealthy: " + reason, marked);
      registry_.AnnounceMark(inst);
      change.instances.push_back(ViewOf(inst));
    }
    Announce(std::move(change));
  }
  Persist(marked);
}

HealthClearResult EngineHealth::ClearGpu(GpuIndex gpu) {
  std::vector<TrackedInstance> cleared;
  HealthClearResult result;
  {
    MutexLock lock(registry_.mu());
    HealthChange change;
    change.gpu = gpu;
    change.cleared = true;
    change.gpu_changed = registry_.unhealthy_gpus().erase(gpu.value()) > 0;
    result.gpu_was_unhealthy = change.gpu_changed;
    for (auto& [key, inst] : registry_.instances()) {
      if (inst.gpu != gpu || !inst.unhealthy) continue;
      inst.unhealthy = false;
      inst.health_reason.clear();
      ++result.instances_cleared;
      if (RecordsHealth(inst)) cleared.push_back(inst);
      registry_.AnnounceMark(inst, EventReason::kHealthCleared);
      change.instances.push_back(ViewOf(inst));
    }
    Announce(std::move(change));
  }
  Persist(cleared);
  spdlog::info("health: GPU {} cleared by the operator (GPU mark: {}, {} instance marks)",
               gpu.value(), result.gpu_was_unhealthy ? "yes" : "no", result.instances_cleared);
  return result;
}

void EngineHealth::Persist(const std::vector<TrackedInstance>& marked) {
  for (const TrackedInstance& inst : marked) {
    // A failed write keeps the mark in memory (it still applies until a
    // restart) and is said; the next write of the record carries it.
    Status s = journal_.Write(inst, inst.state, store::RecordPhase::kCommitted);
    if (!s.ok()) spdlog::error("health: cannot record the mark of {}: {}", inst.key().ToString(),
                               s.ToString());
  }
}

void EngineHealth::OnEvent(const driver::GpuEvent& event, HealthAction action) {
  if (listener_ != nullptr) listener_->OnGpuEvent(event, HealthActionName(action));
}

void EngineHealth::Announce(HealthChange change) {
  if (listener_ == nullptr || (!change.gpu_changed && change.instances.empty())) return;
  change.time = clock_.Now();
  listener_->OnHealthChange(change);
}

}  // namespace migd::engine
