// File: engine/manager_types.h
//
// The value types of engine::Manager's public API: options and reloadable
// policy, requests, results, snapshots, counters and reports. Manager
// (engine/manager.h) and the classes it delegates to share them.
//
// Thread-safety: plain values.
#ifndef MIGD_ENGINE_MANAGER_TYPES_H_
#define MIGD_ENGINE_MANAGER_TYPES_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "driver/gpu_driver.h"
#include "engine/events.h"
#include "engine/instance_view.h"
#include "mig/placement.h"
#include "planner/planner.h"
#include "planner/value_service.h"
#include "store/instance_identity.h"
#include "store/record.h"

namespace migd::engine {

// The settings that may change while the Manager runs (SIGHUP reload).
struct ManagerPolicy {
  std::optional<Clock::Duration> idle_ttl;
  std::optional<uint32_t> max_idle_per_gpu;
  std::map<std::string, uint32_t> warm_pool;
  std::set<std::string> profile_allowlist;
  friend bool operator==(const ManagerPolicy&, const ManagerPolicy&) = default;
};

struct ManagerOptions {
  // Boot id of this boot; records of other boots are discarded at startup.
  // Required (ReadBootId()).
  std::string boot_id;
  // adoptExistingMIGInstances: claim unknown complete GI/CI pairs as Idle,
  // destroy CI-less GIs on GPUs with no live allocation.
  bool adopt_existing_mig_instances = false;
  // Resolve a complete intent (GI + CI found) by committing it as Idle
  // instead of destroying it.
  bool adopt_complete_intents = false;
  // Optional Idle TTL; Idle instances unused for longer are reclaimed.
  std::optional<Clock::Duration> idle_ttl;
  // Optional per-GPU cap on Idle instances (least recently used go first).
  std::optional<uint32_t> max_idle_per_gpu;
  // Optional warm pool: profile name -> Idle instances to keep ready, created
  // only in free space (never by reclaiming, never at a request's cost).
  std::map<std::string, uint32_t> warm_pool;
  // Half-life of the learned demand mix, in seconds (0: no decay).
  int64_t demand_half_life_seconds = 3600;
  // Period of the reconciler thread (StartReconciler).
  Clock::Duration reconcile_interval = std::chrono::seconds(30);
  // migProfileAllowlist: profile names (canonical or alias) that Allocate
  // may hand out; empty = all. A request for another profile fails with
  // kPermissionDenied naming the profile and the list. Existing instances of
  // other profiles are untouched (and still reclaimable).
  std::set<std::string> profile_allowlist;
  // Optional listener (events, allocation outcomes, reclaims); not owned,
  // must outlive the Manager. See engine/events.h.
  EngineListener* listener = nullptr;
  // The planner's value policy (planner/value_service.h); null: the cost
  // order alone. Every Allocate that reaches the planner is an arrival it
  // learns from (Plan dry runs and warm-pool top-ups are not); solves run on
  // the service's executor, never on an Allocate. Shared: the caller starts
  // and stops the service (ValueService::Start/Stop).
  std::shared_ptr<planner::ValueService> values;
  // planner::PlannerOptions::reuse_margin and reuse_margin_several_gpus
  // (planner.reuseMargin, planner::ParseReuseMargin); Manager::Create refuses
  // a value planner::CheckReuseMargin refuses.
  std::optional<double> reuse_margin;
  std::optional<double> reuse_margin_several_gpus;
};

// One requested instance; see planner::InstanceRequest.
struct InstanceSpec {
  std::string profile;
  std::optional<GpuIndex> gpu;
  std::optional<mig::Placement> placement;
};

struct AllocateRequest {
  std::string request_id;               // required; Allocate is idempotent by it
  store::Owner owner;                   // required (pod or opaque)
  std::vector<InstanceSpec> instances;  // non-empty; all or nothing
};

// A GI that migd did not create and does not manage: its slot (parent GPU
// UUID, profile id, placement), GI id and whatever CIs it holds.
struct ForeignInstance : store::RecordKey {
  GpuIndex gpu;
  std::string profile;
  NvmlGiId gi_id;
  std::vector<driver::ComputeInstanceInfo> compute_instances;
};

struct Allocation {
  std::string request_id;
  store::Owner owner;
  std::vector<InstanceView> instances;  // in request order
  std::vector<planner::Stage> stages;   // per instance: reuse/free/reclaim (empty on replay)
  bool replayed = false;                // returned from an earlier identical request
};

struct ReclaimFilter {
  std::optional<GpuIndex> gpu;
  std::optional<std::string> profile;  // profile name
};

struct ReclaimResult {
  std::vector<InstanceView> destroyed;
  std::vector<InstanceView> failed;  // now in Error
};

// What Manager::ClearGpuHealth cleared.
struct HealthClearResult {
  size_t instances_cleared = 0;    // instance marks removed
  bool gpu_was_unhealthy = false;  // the GPU's own mark was removed
};

struct ManagerSnapshot {
  std::vector<InstanceView> instances;  // sorted by (GPU index, placement)
  std::vector<ForeignInstance> foreign;
};

struct ManagerCounters {
  uint64_t allocations = 0;
  uint64_t allocation_failures = 0;
  uint64_t creates = 0;
  uint64_t reuses = 0;
  uint64_t destroys = 0;
  uint64_t destroy_failures = 0;
  uint64_t rollbacks = 0;
  uint64_t releases = 0;
  uint64_t errors_cleaned = 0;
  uint64_t ttl_reclaims = 0;
  uint64_t cap_reclaims = 0;
  uint64_t warm_creates = 0;
  // Allocations whose plan kept an Idle instance only because of
  // planner.reuseMargin (planner::PlanStats::margin_reuses, greedy plans).
  uint64_t margin_reuses = 0;
  uint64_t drift_vanished = 0;
  uint64_t drift_foreign_appeared = 0;
  uint64_t drift_foreign_gone = 0;
  uint64_t reconcile_runs = 0;
  uint64_t reconcile_errors = 0;  // passes that returned an error
  uint64_t gpus_discovered = 0;   // GPUs the reconciler brought under management
};

struct RecoverySummary {
  uint64_t active = 0;
  uint64_t idle = 0;
  uint64_t error = 0;
  uint64_t foreign = 0;
  uint64_t adopted = 0;  // unknown pairs claimed (adopt flag) or owners without record
  uint64_t other_boot_discarded = 0;
  uint64_t intents_destroyed = 0;
  uint64_t intents_adopted = 0;
  uint64_t intents_removed = 0;  // nothing was created
  uint64_t deletions_finished = 0;
  uint64_t vanished_removed = 0;
  uint64_t orphan_gis_destroyed = 0;
};

// MIG-configuration-change drift checks (Reconciler::RequestDriftCheck).
struct DriftCheckCounters {
  uint64_t requested = 0;  // requests, one per MIG configuration change event
  uint64_t coalesced = 0;  // requests for a GPU already pending (no pass of their own)
  uint64_t passes = 0;     // reconciler passes that served pending requests
  uint64_t pending = 0;    // GPUs with a check pending now
};

struct ReconcileReport {
  uint64_t errors_cleaned = 0;
  uint64_t errors_remaining = 0;
  uint64_t ttl_reclaimed = 0;
  uint64_t cap_reclaimed = 0;
  uint64_t warm_created = 0;
  uint64_t drift_vanished = 0;
  uint64_t drift_foreign_appeared = 0;
  uint64_t pending_record_removals = 0;
  // GPUs brought under management by this pass (rediscovery).
  uint64_t gpus_discovered = 0;
  // Unmanaged GPUs this pass probed and left unmanaged (MIG not supported or
  // disabled, not accessible, probe or verification failed).
  uint64_t gpus_unmanaged = 0;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_MANAGER_TYPES_H_
