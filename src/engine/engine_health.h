// File: engine/engine_health.h
//
// EngineHealth: the Manager's HealthSink (engine/health_monitor.h).
// It marks TrackedInstance::unhealthy and the GPU table's unhealthy GPUs under
// the registry lock, and asks the reconciler for a drift pass of a GPU on a
// MIG configuration change. Each newly marked instance gets an InstanceEvent
// (reason kMarkedUnhealthy, Registry::AnnounceMark). Each event that marks something new is told to
// the EngineListener (OnHealthChange, with the registry lock held, like
// OnInstanceEvent), and every event handled to OnGpuEvent. The lifecycle rules that read the marks:
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

#include "base/clock.h"
#include "engine/events.h"
#include "engine/health_monitor.h"
#include "engine/registry.h"

namespace migd::engine {

class EngineHealth final : public HealthSink {
 public:
  // `request_drift` runs a drift check of one GPU (the reconciler's); it is
  // called without the registry lock. `listener` may be null; not owned.
  EngineHealth(Registry& registry, Clock& clock, EngineListener* listener,
               std::function<void(GpuIndex)> request_drift)
      : registry_(registry),
        clock_(clock),
        listener_(listener),
        request_drift_(std::move(request_drift)) {}

  void MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId> ci,
                             uint64_t xid) override;
  void MarkGpuUnhealthy(GpuIndex gpu, const std::string& reason) override;
  void OnMigConfigChange(GpuIndex gpu) override { request_drift_(gpu); }
  void OnEvent(const driver::GpuEvent& event, HealthAction action) override;

 private:
  // Tells the listener, if anything was newly marked.
  void Announce(HealthChange change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_.mu());

  Registry& registry_;
  Clock& clock_;
  EngineListener* const listener_;
  const std::function<void(GpuIndex)> request_drift_;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_ENGINE_HEALTH_H_
