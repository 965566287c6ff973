// File: engine/engine_health.h
//
// EngineHealth: the Manager's HealthSink (engine/health_monitor.h).
// It marks TrackedInstance::unhealthy and the GPU table's unhealthy GPUs under
// the registry lock, and asks the reconciler for a drift pass of a GPU on a
// MIG configuration change. The lifecycle rules that read the marks:
//   Allocator::Reservable      an unhealthy Idle instance is never reused
//   Allocator::Release         an unhealthy instance is destroyed, not kept Idle
//   Reconciler::ReclaimUnhealthy  unhealthy Idle instances are reclaimed
//   plan_input                 an unhealthy GPU is not offered to the planner
//
// Thread-safety: called on the monitor's thread; takes the registry lock.
#ifndef MIGD_ENGINE_ENGINE_HEALTH_H_
#define MIGD_ENGINE_ENGINE_HEALTH_H_

#include <functional>
#include <string>

#include "engine/health_monitor.h"
#include "engine/registry.h"

namespace migd::engine {

class EngineHealth final : public HealthSink {
 public:
  // `request_drift` runs a drift check of one GPU (the reconciler's); it is
  // called without the registry lock.
  EngineHealth(Registry& registry, std::function<void(GpuIndex)> request_drift)
      : registry_(registry), request_drift_(std::move(request_drift)) {}

  void MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId> ci,
                             uint64_t xid) override;
  void MarkGpuUnhealthy(GpuIndex gpu, const std::string& reason) override;
  void OnMigConfigChange(GpuIndex gpu) override { request_drift_(gpu); }

 private:
  Registry& registry_;
  const std::function<void(GpuIndex)> request_drift_;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_ENGINE_HEALTH_H_
