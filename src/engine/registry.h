// File: engine/registry.h
//
// Registry: what occupies the managed GPUs, as the Manager knows it — every
// tracked instance (TrackedInstance by key), the allocations by request id,
// the request ids in flight, the foreign GIs of each GPU — plus the engine's
// counters and the state machine: every state change goes through
// Transition, which checks CanTransition, logs one line and emits one
// InstanceEvent to the listener, in order.
//
// The registry lock (mu()) guards all of it. It is never held across NVML,
// disk or observer calls; the listener's OnInstanceEvent is called with it
// held (engine/events.h). Lock order: GPU locks, then this lock, then leaf
// locks (GpuTable's, Policy's).
//
// Thread-safety: thread-safe; every accessor requires mu().
#ifndef MIGD_ENGINE_REGISTRY_H_
#define MIGD_ENGINE_REGISTRY_H_

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "driver/gpu_driver.h"
#include "engine/events.h"
#include "engine/gpu_table.h"
#include "engine/manager_types.h"
#include "engine/tracked_instance.h"
#include "store/instance_identity.h"

namespace migd::engine {

class Registry {
 public:
  using Instances = std::map<store::RecordKey, TrackedInstance>;
  using Foreign = std::map<uint32_t, std::vector<driver::GpuInstanceInfo>>;

  // `listener` may be null; not owned, must outlive the registry.
  Registry(Clock& clock, EngineListener* listener);
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Mutex* mu() const ABSL_LOCK_RETURNED(mu_) { return &mu_; }

  Instances& instances() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return instances_; }
  const Instances& instances() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return instances_; }
  // Null if absent.
  TrackedInstance* Find(const store::RecordKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Null for an empty or unknown MIG UUID.
  TrackedInstance* FindByUuid(const std::string& mig_uuid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Changes the state (refused unless CanTransition), logs one line and
  // emits one InstanceEvent. kInternal for a refused transition.
  Status Transition(TrackedInstance& instance, InstanceState to, EventReason reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds `instance` in the state it has (a load, not a transition: recovery
  // and rediscovery) and announces it as (none) -> state with `reason`.
  void Load(const TrackedInstance& instance, EventReason reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Announces that `instance` was just marked unhealthy (or, with
  // kHealthCleared, that its mark was cleared): one InstanceEvent state ->
  // same state with `reason` (no log line: the health code logs it).
  void AnnounceMark(const TrackedInstance& instance,
                    EventReason reason = EventReason::kMarkedUnhealthy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `instance` (already transitioned to kNone).
  void Erase(const store::RecordKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::map<std::string, AllocationEntry>& allocations() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return allocations_;
  }
  // Adds the Active `instance` to the allocation AllocationIdOf names.
  void AddToAllocation(const TrackedInstance& instance) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `key` from allocation `id`, dropping the allocation once empty.
  void RemoveFromAllocation(const std::string& id, const store::RecordKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::set<std::string>& in_flight() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_; }
  Foreign& foreign() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return foreign_; }
  const Foreign& foreign() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return foreign_; }
  ManagerCounters& counters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return counters_; }
  // GPU index -> why it is unhealthy (engine/engine_health.h): no new
  // allocation there (BuildPlanInput leaves it out).
  std::map<uint32_t, std::string>& unhealthy_gpus() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return unhealthy_gpus_;
  }

  // Every instance (sorted by GPU index, then placement) and every foreign GI
  // of a managed GPU (Manager::List()).
  ManagerSnapshot Snapshot(const GpuTable& gpus) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  void Emit(InstanceState from, const TrackedInstance& instance, EventReason reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Emit without the log line.
  void Publish(InstanceState from, const TrackedInstance& instance, EventReason reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock& clock_;
  EngineListener* const listener_;
  mutable Mutex mu_;
  Instances instances_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, AllocationEntry> allocations_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> in_flight_ ABSL_GUARDED_BY(mu_);
  Foreign foreign_ ABSL_GUARDED_BY(mu_);
  ManagerCounters counters_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, std::string> unhealthy_gpus_ ABSL_GUARDED_BY(mu_);
  uint64_t event_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_REGISTRY_H_
