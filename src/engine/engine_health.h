// File: engine/engine_health.h
//
// EngineHealth: the Manager's HealthSink (engine/health_monitor.h).
// It marks TrackedInstance::unhealthy and the GPU table's unhealthy GPUs under
// the registry lock, and asks the reconciler for a drift pass of a GPU on a
// MIG configuration change. Each newly marked instance gets an InstanceEvent
// (reason kMarkedUnhealthy, Registry::AnnounceMark). Each event that marks
// something new is told to the EngineListener (OnHealthChange, with the
// registry lock held, like OnInstanceEvent), and every event handled to
// OnGpuEvent; the operator's clear is announced the same way. An instance mark is written to the instance's record (Active
// and Idle ones; others are on their way out), so recovery restores it after
// a restart. The lifecycle rules that read the marks:
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
#include "engine/journal.h"
#include "engine/manager_types.h"
#include "engine/registry.h"

namespace migd::engine {

class EngineHealth final : public HealthSink {
 public:
  // `request_drift` runs a drift check of one GPU (the reconciler's); it is
  // called without the registry lock. `listener` may be null; not owned.
  EngineHealth(Registry& registry, RecordJournal& journal, Clock& clock,
               EngineListener* listener, std::function<void(GpuIndex)> request_drift)
      : registry_(registry),
        journal_(journal),
        clock_(clock),
        listener_(listener),
        request_drift_(std::move(request_drift)) {}

  void MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId> ci,
                             uint64_t xid) override;
  void MarkGpuUnhealthy(GpuIndex gpu, const std::string& reason) override;
  void OnMigConfigChange(GpuIndex gpu) override { request_drift_(gpu); }
  void OnEvent(const driver::GpuEvent& event, HealthAction action) override;

  // The operator's clear: the GPU's mark and the marks of every instance on
  // it, written to their records. Each cleared instance gets an
  // InstanceEvent (reason kHealthCleared); a clear that changed anything is
  // told to OnHealthChange (cleared = true). A GPU without marks: OK,
  // nothing changes, nothing is announced.
  HealthClearResult ClearGpu(GpuIndex gpu);

 private:
  // Tells the listener, if anything was newly marked.
  void Announce(HealthChange change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_.mu());
  // Writes the records of `marked` (copies taken under the registry lock).
  void Persist(const std::vector<TrackedInstance>& marked);

  Registry& registry_;
  RecordJournal& journal_;
  Clock& clock_;
  EngineListener* const listener_;
  const std::function<void(GpuIndex)> request_drift_;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_ENGINE_HEALTH_H_
