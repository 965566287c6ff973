// File: engine/events.h
//
// EngineListener: how the API (Watch), metrics and logs follow the Manager.
//
//   OnInstanceEvent  every state change of a tracked instance (one per
//                    transition, in order), plus kNone -> state for instances
//                    loaded by recovery (reason "recovery") and state -> kNone
//                    when an instance leaves the registry (reason "destroy"),
//                    and state -> same state (reason "marked-unhealthy") when
//                    the health monitor marks an instance, or (reason
//                    "health-cleared") when the operator clears its mark.
//   OnAllocation     once per Allocate call, after it returns.
//   OnReclaim        once per destroyed Idle instance, by why it was chosen.
//   OnGpuEvent       every GPU event the health monitor handled (ignored
//                    Xids included), with the action taken (HealthActionName).
//   OnHealthChange   a GPU or instances newly marked unhealthy (one call per
//                    event that marked anything), or their marks cleared by
//                    the operator (one call per clear that changed
//                    anything), so that front ends (device plugin, HAMi
//                    annotation, Watch) learn at once.
//
// Thread-safety: implementations must be thread-safe and must not call back
// into the Manager. OnInstanceEvent, OnGpuEvent and OnHealthChange are called with the Manager's registry lock
// held (that is what keeps events in transition order): it must only copy the
// event into its own queue and return.
#ifndef MIGD_ENGINE_EVENTS_H_
#define MIGD_ENGINE_EVENTS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "driver/gpu_events.h"
#include "engine/instance_state.h"
#include "engine/instance_view.h"

namespace migd::engine {

// Why a state change happened. Names (EventReasonName) are stable: they are
// label values and Watch's InstanceEvent.reason.
enum class EventReason {
  kAllocate,         // Creating/Idle -> Active, (none) -> Creating
  kRelease,          // Active -> Idle
  kReclaimPressure,  // Idle -> Reclaiming/Deleting/(none): a plan needed the space
  kReclaimTtl,       // ... idle TTL expired
  kReclaimCap,       // ... per-GPU idle cap
  kReclaimOperator,  // ... Reclaim RPC / migctl reclaim
  kRollback,         // a failed allocation undid this instance
  kDestroy,          // destroyed (Deleting/Creating/Error -> (none))
  kDestroyFailed,    // NVML refused the destroy (-> Error)
  kErrorRetry,       // the reconciler retries an Error instance
  kDrift,            // the hardware changed under migd (instance vanished)
  kWarmPool,         // created Idle for the warm pool
  kRecovery,         // loaded at startup
  kUnhealthy,        // Idle -> Reclaiming: the health monitor marked it
  kMarkedUnhealthy,  // state -> same state: the health monitor just marked it
  kHealthCleared,    // state -> same state: the operator cleared its mark
};

// "allocate", "release", "reclaim-pressure", "reclaim-ttl", "reclaim-cap",
// "reclaim-operator", "rollback", "destroy", "destroy-failed", "error-retry",
// "drift", "warm-pool", "recovery", "unhealthy", "marked-unhealthy",
// "health-cleared".
std::string_view EventReasonName(EventReason reason);

struct InstanceEvent {
  uint64_t sequence = 0;  // strictly increasing per Manager, from 1
  Clock::TimePoint time{};  // wall clock (Clock::Now)
  InstanceState from = InstanceState::kNone;
  InstanceState to = InstanceState::kNone;
  EventReason reason = EventReason::kAllocate;
  InstanceView instance;  // after the change (state == to)
};

// How an Allocate call ended, for metrics.
enum class AllocationPath {
  kNone,           // failed before anything was planned, or replayed
  kReuse,          // every instance reused
  kCreate,         // at least one created in free space, none after reclaim
  kReclaimCreate,  // at least one created after reclaiming Idle instances
};
std::string_view AllocationPathName(AllocationPath path);  // "none", "reuse", "create", "reclaim_create"

struct AllocationOutcome {
  std::string request_id;
  StatusCode code = StatusCode::kOk;
  AllocationPath path = AllocationPath::kNone;
  bool replayed = false;
  uint32_t instances = 0;
  // Monotonic time spent inside Manager::Allocate (planning, NVML, records,
  // CDI publication).
  std::chrono::nanoseconds duration{0};
};

// What one health event, or one operator clear, changed
// (engine/engine_health.h).
struct HealthChange {
  Clock::TimePoint time{};  // wall clock (Clock::Now)
  GpuIndex gpu;
  // false: marks were set (by the health monitor); true: marks were removed
  // (Manager::ClearGpuHealth).
  bool cleared = false;
  // The GPU's own mark was set (GPU lost, unattributed Xid) or, when
  // `cleared`, removed: its devices' health changed.
  bool gpu_changed = false;
  std::string reason;  // the mark's reason (as GpuView health_reason); empty when cleared
  // Instances newly marked unhealthy, or whose marks were cleared (after the
  // change).
  std::vector<InstanceView> instances;
};

class EngineListener {
 public:
  virtual ~EngineListener() = default;
  virtual void OnInstanceEvent(const InstanceEvent& event) = 0;
  virtual void OnAllocation(const AllocationOutcome& outcome) = 0;
  // `reason` is one of the kReclaim* reasons.
  virtual void OnReclaim(EventReason reason, const InstanceView& instance) = 0;
  // `action` is a HealthActionName (engine/health_monitor.h).
  virtual void OnGpuEvent(const driver::GpuEvent& event, std::string_view action) {
    (void)event;
    (void)action;
  }
  virtual void OnHealthChange(const HealthChange& change) { (void)change; }
};

// Forwards every call to each added listener, in the order added. Add all
// listeners before handing the fan-out to the Manager.
class ListenerFanout final : public EngineListener {
 public:
  void Add(EngineListener* listener) { listeners_.push_back(listener); }
  void OnInstanceEvent(const InstanceEvent& event) override {
    for (EngineListener* l : listeners_) l->OnInstanceEvent(event);
  }
  void OnAllocation(const AllocationOutcome& outcome) override {
    for (EngineListener* l : listeners_) l->OnAllocation(outcome);
  }
  void OnReclaim(EventReason reason, const InstanceView& instance) override {
    for (EngineListener* l : listeners_) l->OnReclaim(reason, instance);
  }
  void OnGpuEvent(const driver::GpuEvent& event, std::string_view action) override {
    for (EngineListener* l : listeners_) l->OnGpuEvent(event, action);
  }
  void OnHealthChange(const HealthChange& change) override {
    for (EngineListener* l : listeners_) l->OnHealthChange(change);
  }

 private:
  std::vector<EngineListener*> listeners_;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_EVENTS_H_
