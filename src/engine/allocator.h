// File: engine/allocator.h
//
// Allocator: hands instances out and takes them back.
//
//   Allocate  validate -> replay (same request id) -> plan over a snapshot
//             (planner::MakePlan) and reserve, atomically under the registry
//             lock -> execute under the GPU locks: reclaims first (every
//             reserved one is destroyed, even after a failure), then each
//             instance reused (record Active, publish) or created
//             (Executor::Create) -> on failure roll back: destroy what this
//             request created, return reused instances to Idle.
//   Release   Active -> Idle (record rewritten; no NVML call, observer not
//             called).
//   Plan      the plan Allocate would execute now (no state change).
//
// It owns the planner and the learned demand mix, both guarded by the
// registry lock so that a plan and its reservations are one atomic step.
// With a value service (ManagerOptions::values) every Allocate that reaches
// the planner is reported to it as an arrival (Planner::ObserveArrival:
// counts and at most a solve handed to the service's executor, never run
// here), and the planner orders candidates by the last values solved (the
// cost order until the first).
//
// Thread-safety: thread-safe. Takes the registry lock for planning and
// bookkeeping only; NVML, record and observer calls run under GPU locks.
#ifndef MIGD_ENGINE_ALLOCATOR_H_
#define MIGD_ENGINE_ALLOCATOR_H_

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "engine/executor.h"
#include "engine/gpu_table.h"
#include "engine/journal.h"
#include "engine/manager_types.h"
#include "engine/policy.h"
#include "engine/registry.h"
#include "planner/demand_mix.h"
#include "planner/planner.h"

namespace migd::engine {

class Allocator {
 public:
  // Every reference must outlive the allocator.
  Allocator(Registry& registry, const GpuTable& gpus, const Policy& policy, Executor& executor,
            RecordJournal& journal, Clock& clock, int64_t demand_half_life_seconds,
            planner::PlannerOptions planner_options = {});
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // See Manager::Allocate (the Manager adds the listener's outcome).
  StatusOr<Allocation> Allocate(const AllocateRequest& request);
  // See Manager::Release and Manager::ReleaseInstance.
  Status Release(const std::string& request_id);
  Status ReleaseInstance(const MigUuid& mig_uuid);
  // See Manager::Plan.
  StatusOr<planner::Plan> Plan(const std::vector<InstanceSpec>& specs) const;
  // Warm pool: reserves a Creating placeholder for one more Idle `profile`
  // instance when fewer than `target` are Idle and the planner finds free
  // space for it (Idle instances count as taken: the pool adds, never
  // takes). Returns its GPU and key, or nullopt when the pool stops for
  // `profile`.
  struct WarmSlot {
    GpuIndex gpu;
    store::RecordKey key;
  };
  std::optional<WarmSlot> ReserveWarm(const std::string& profile, uint32_t target);
  planner::DemandWeights DemandWeights() const;

 private:
  struct Reused {
    store::RecordKey key;
    std::optional<Clock::TimePoint> last_used;
  };
  // What one Allocate reserved under the registry lock.
  struct Reservation {
    planner::Plan plan;
    std::vector<store::RecordKey> keys;  // per planned instance
    std::vector<Reused> reused;
    std::vector<store::RecordKey> created;   // Creating placeholders
    std::vector<store::RecordKey> reclaims;  // now Reclaiming
  };
  // How far execution got (for the rollback).
  struct Progress {
    std::set<store::RecordKey> created_done;
    std::set<store::RecordKey> reuse_written;
  };

  // The earlier allocation of the request's id (replayed = true), an
  // AlreadyExists error if it differs, or nullopt for a new id.
  std::optional<StatusOr<Allocation>> ReplayLocked(const AllocateRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_.mu());
  StatusOr<Reservation> ReserveLocked(const AllocateRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_.mu());
  // Checks every reclaim and reuse of `plan` and every key it creates at,
  // before anything is reserved.
  Status ValidatePlanLocked(const planner::Plan& plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_.mu());
  Status Execute(const AllocateRequest& request, const Reservation& r, Progress& progress);
  Status Reuse(const store::RecordKey& key, Progress& progress);
  void Rollback(const AllocateRequest& request, const Reservation& r, const Progress& progress);
  StatusOr<Allocation> Finish(const AllocateRequest& request, const Reservation& r,
                              const Status& failure);
  int64_t NowTick() const;

  Registry& registry_;
  const GpuTable& gpus_;
  const Policy& policy_;
  Executor& executor_;
  RecordJournal& journal_;
  Clock& clock_;
  mutable planner::Planner planner_ ABSL_GUARDED_BY(registry_.mu());
  planner::DemandMix demand_ ABSL_GUARDED_BY(registry_.mu());
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_ALLOCATOR_H_
