// See engine/engine_health.h.
#include "engine/engine_health.h"

#include <spdlog/spdlog.h>

namespace migd::engine {

void EngineHealth::MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId> ci,
                                         uint64_t xid) {
  MutexLock lock(registry_.mu());
  bool found = false;
  for (auto& [key, inst] : registry_.instances()) {
    if (inst.gpu != gpu || inst.gi() != gi) continue;
    if (ci && inst.ci() && *inst.ci() != *ci) continue;
    inst.unhealthy = true;
    inst.health_reason = "xid " + std::to_string(xid);
    found = true;
  }
  // An Xid on a GI migd does not track (foreign, or being created): nothing
  // to mark; the drift check sorts out what is there.
  if (!found) spdlog::warn("health: xid {} on an untracked GI {} of GPU {}", xid, gi.value(),
                           gpu.value());
}

void EngineHealth::MarkGpuUnhealthy(GpuIndex gpu, const std::string& reason) {
  MutexLock lock(registry_.mu());
  registry_.unhealthy_gpus()[gpu.value()] = reason;
  for (auto& [key, inst] : registry_.instances()) {
    if (inst.gpu != gpu) continue;
    inst.unhealthy = true;
    inst.health_reason = "GPU unhealthy: " + reason;
  }
}

}  // namespace migd::engine
