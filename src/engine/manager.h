// File: engine/manager.h
//
// engine::Manager: the single authority on MIG instance state (DESIGN.md §1,
// §3, §4). It allocates instances (reusing Idle ones, creating in free space
// or after reclaiming Idle ones, as the planner decides), releases them to
// Idle, reclaims Idle ones on request, recovers its exact state at startup,
// and runs the reconciler (Error retries, record-removal retries, idle TTL,
// per-GPU idle cap, warm pool, drift detection, rediscovery of GPUs that were
// not manageable at startup).
//
// Data flow: Allocate -> planner::MakePlan over a snapshot of every GPU
// (occupants Active/Idle/Error/Foreign) -> execute under per-GPU locks:
//   reclaim:  record Deleting -> DestroyCi -> DestroyGi -> Remove record
//   create:   Put(intent) -> CreateGi(explicit placement) -> CreateCi
//             -> Put(committed, Active, owner) -> observer OnPublish
//   reuse:    Put(committed, Active, owner) -> observer OnPublish
// A failed allocation destroys what it created and returns reused instances
// to Idle. A destroy that NVML refuses leaves the instance in Error (record
// says Error): never reused, retried by the reconciler.
//
// NVML calls (NvmlDriver, measured with the simulator's counters): reuse 0,
// release 0, create 7 (CreateGi 2 + CreateCi 5), destroy 5 (DestroyCi 3 +
// DestroyGi 2). The first create of a GI profile on a GPU costs 17: the
// driver walks and caches that profile's CI profiles once. A reconcile pass
// adds one GetMigMode per GPU that is not managed (rediscovery).
//
// Example:
//   engine::ManagerOptions opts;
//   opts.boot_id = boot;
//   engine::RecordsOwnerSource owners;
//   MIGD_ASSIGN_OR_RETURN(auto mgr, engine::Manager::Create(opts, driver, *store,
//                                                           Clock::Real(), owners));
//   engine::AllocateRequest req{.request_id = "r1", .owner = store::Owner::Opaque("job-7"),
//                               .instances = {{.profile = "3g.40gb"}}};
//   MIGD_ASSIGN_OR_RETURN(engine::Allocation a, mgr->Allocate(req));
//   MIGD_RETURN_IF_ERROR(mgr->Release("r1"));   // Idle, GI/CI kept
//
// Thread-safety: all methods are thread-safe. The registry lock is never held
// across NVML, disk or observer calls; per-GPU locks serialise the mutations
// of one GPU (multi-GPU operations take them in GPU index order) and are held
// across that GPU's NVML and record calls only.
#ifndef MIGD_ENGINE_MANAGER_H_
#define MIGD_ENGINE_MANAGER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"
#include "driver/gpu_driver.h"
#include "engine/events.h"
#include "engine/instance_observer.h"
#include "engine/instance_view.h"
#include "engine/instance_state.h"
#include "engine/owner_source.h"
#include "mig/catalog.h"
#include "planner/demand_mix.h"
#include "planner/planner.h"
#include "store/record_store.h"

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
};

// One requested instance; see planner::InstanceRequest.
struct InstanceSpec {
  std::string profile;
  std::optional<GpuIndex> gpu;
  std::optional<mig::Placement> placement;
};

struct AllocateRequest {
  std::string request_id;  // required; Allocate is idempotent by it
  store::Owner owner;      // required (pod or opaque)
  std::vector<InstanceSpec> instances;  // non-empty; all or nothing
};


struct ForeignInstance {
  GpuIndex gpu;
  GpuUuid gpu_uuid;
  GiProfileId profile_id;
  std::string profile;
  mig::Placement placement;
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
  uint64_t drift_vanished = 0;
  uint64_t drift_foreign_appeared = 0;
  uint64_t drift_foreign_gone = 0;
  uint64_t reconcile_runs = 0;
  uint64_t reconcile_errors = 0;  // passes that returned an error
  uint64_t gpus_discovered = 0;  // GPUs the reconciler brought under management
};

struct RecoverySummary {
  uint64_t active = 0;
  uint64_t idle = 0;
  uint64_t error = 0;
  uint64_t foreign = 0;
  uint64_t adopted = 0;            // unknown pairs claimed (adopt flag) or owners without record
  uint64_t other_boot_discarded = 0;
  uint64_t intents_destroyed = 0;
  uint64_t intents_adopted = 0;
  uint64_t intents_removed = 0;    // nothing was created
  uint64_t deletions_finished = 0;
  uint64_t vanished_removed = 0;
  uint64_t orphan_gis_destroyed = 0;
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
  // GPUs brought under management by this pass (see ReconcileOnce).
  uint64_t gpus_discovered = 0;
  // Unmanaged GPUs this pass probed and left unmanaged (MIG not supported or
  // disabled, not accessible, probe or verification failed).
  uint64_t gpus_unmanaged = 0;
};

class Manager {
 public:
  // Recovers state (DESIGN.md §4) and returns a ready Manager. Order: the
  // GPUs and GI profiles from `driver` (one NVML session, opened by the
  // caller); the live layout of every MIG-enabled GPU; the records (other
  // boot ids discarded); owners from `owners`; adoption of owned instances;
  // verification of every record (UUID, GPU, profile, placement, GI id, CI id);
  // intents resolved; unknown instances preserved as foreign (or adopted).
  // Errors: kFailedPrecondition / kDataLoss naming the GPU, the instance and
  // the mismatch when anything cannot be verified — nothing on the hardware
  // has been changed then; kInvalidArgument for bad options; driver and store
  // errors.
  // REQUIRES: driver, store, clock, owners and observer (if given) outlive
  // the Manager. `observer` may be null (no-op).
  static StatusOr<std::unique_ptr<Manager>> Create(ManagerOptions options,
                                                   driver::GpuDriver& driver,
                                                   store::RecordStore& store, Clock& clock,
                                                   OwnerSource& owners,
                                                   InstanceObserver* observer = nullptr);
  ~Manager();  // stops the reconciler thread
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Allocates every instance of `request` or none. Idempotent: a request id
  // seen before returns the same allocation (replayed = true) if owner and
  // instance count match, else kAlreadyExists. kAborted while the same id is
  // in flight; kInvalidArgument for a bad request; kResourceExhausted when no
  // plan exists (the planner's message); driver/store errors otherwise
  // (everything created was destroyed, reused instances are Idle again).
  StatusOr<Allocation> Allocate(const AllocateRequest& request);

  // Makes every instance of the allocation Idle (GI/CI untouched, observer
  // not called, 0 NVML calls). kNotFound for an unknown id.
  Status Release(const std::string& request_id);
  // The same for one instance. OK if it is already Idle; kNotFound for an
  // unknown MIG UUID; kFailedPrecondition for an instance in another state.
  Status ReleaseInstance(const MigUuid& mig_uuid);

  // Operator reclaim: destroys every Idle instance matching `filter` (all if
  // empty). Active instances are never touched. Failed destroys are in
  // `failed` and in Error.
  StatusOr<ReclaimResult> Reclaim(const ReclaimFilter& filter);

  ManagerSnapshot List() const;
  // Every GPU NVML lists (MIG enabled or not), by index; `model` is set for
  // the managed ones. A GPU the reconciler brings under management later
  // (rediscovery, see ReconcileOnce) appears, or gets its model, from then on.
  std::vector<GpuView> Gpus() const;

  // Dry run: the plan Allocate would execute now (no state change, demand
  // mix not updated).
  StatusOr<planner::Plan> Plan(const std::vector<InstanceSpec>& instances) const;

  // One reconciler pass (see file comment). Returns the first hard error
  // (e.g. a driver listing failure); per-instance failures are counted.
  //
  // Rediscovery (first step of every pass): every GPU index that is not
  // managed (MIG not reported supported/enabled at startup, GPU skipped by
  // ListGpus for NO_PERMISSION, or an earlier takeover that failed: GI
  // profile table or layout unreadable, records unverifiable) is probed with
  // one GetMigMode call. Once it answers MIG-enabled, the GPU is
  // brought under management through the same verification recovery runs at
  // startup, for that GPU alone: its GI profile table, its live layout and
  // its records (the records are the owner source here: committed Active
  // records are the active owners). Anything that cannot be verified leaves
  // the GPU unmanaged, nothing changed (retried next pass); unknown GIs
  // become foreign (or adopted Idle with adoptExistingMIGInstances). Nothing
  // is created or destroyed by rediscovery: journaled leftovers that startup
  // would destroy (intents, interrupted deletions) are taken in Error (the
  // Error retry, step 1 of the same pass, destroys them as any Error
  // instance) and orphan GIs stay foreign.
  // One log line when a GPU becomes managed, one when its probe outcome
  // changes. A GPU skipped for NO_PERMISSION costs one GetMigMode per pass
  // (answered by the refused handle lookup); ListGpus runs only once it
  // answers. Rediscovery failures are not errors of the pass.
  StatusOr<ReconcileReport> ReconcileOnce();
  // Runs ReconcileOnce every options.reconcile_interval on a thread until
  // StopReconciler (prompt: wakes the thread). Idempotent.
  void StartReconciler();
  void StopReconciler();

  ManagerCounters counters() const;

  // Replaces the reloadable settings (ManagerOptions fields of the same
  // names). kInvalidArgument (nothing changed) for an unknown warm-pool or
  // allowlist profile or a non-positive TTL. Takes effect from the next
  // Allocate / reconcile pass; nothing is destroyed by the call itself.
  Status SetPolicy(const ManagerPolicy& policy);
  ManagerPolicy policy() const;
  const RecoverySummary& recovery_summary() const { return recovery_; }
  // The placement table built from NVML for `gpu`; nullptr if unknown or not
  // managed (yet). Once non-null it stays valid and unchanged.
  const mig::GpuModel* ModelOf(GpuIndex gpu) const;
  planner::DemandWeights DemandWeights() const;

 private:
  // One GPU index NVML knows (listed by ListGpus, or skipped by it for
  // NO_PERMISSION). The map of them is fixed after recovery, so it is read
  // without locks; an entry becomes managed at most once (recovery or
  // rediscovery): `info` and `model` are written under mu_ before `managed`
  // is set (release) and never change afterwards, so a reader that saw
  // `managed` (acquire) may read them without mu_.
  struct Gpu {
    driver::GpuInfo info;  // GUARDED_BY(mu_) while unmanaged; fixed once managed
    bool listed = false;  // GUARDED_BY(mu_): reported by Gpus()
    std::atomic<bool> managed{false};
    std::unique_ptr<mig::GpuModel> model;  // set before `managed`
    // Per-GPU mutation lock; exists for unmanaged entries too.
    std::unique_ptr<std::mutex> mutate_mu = std::make_unique<std::mutex>();
    std::vector<driver::GpuInstanceInfo> foreign;  // GUARDED_BY(mu_)
    // Recovery, then rediscovery only (reconcile_mu_): the last probe
    // outcome logged.
    std::string probe_outcome;
  };
  // What recovery verified for a set of GPUs, before anything was changed.
  struct Takeover;
  // A GPU recovery verifies: its NVML identity, table and live layout.
  struct ScopeGpu {
    const driver::GpuInfo* info = nullptr;
    const mig::GpuModel* model = nullptr;
    const std::vector<driver::GpuInstanceInfo>* live = nullptr;
  };
  struct Instance {
    store::RecordKey key;
    GpuIndex gpu;
    std::string profile;
    InstanceState state = InstanceState::kNone;
    bool committed = false;  // GI and CI exist and the record is committed
    std::optional<NvmlGiId> gi_id;
    std::optional<NvmlCiId> ci_id;
    MigUuid mig_uuid;
    store::Owner owner;
    std::string request_id;
    std::optional<Clock::TimePoint> last_used;
    Clock::TimePoint created_at{};
    bool busy = false;  // a release is writing its record
    bool published = false;
    // Why it entered Reclaiming (pressure, TTL, cap, operator); reported to
    // the listener once the destroy succeeds.
    std::optional<EventReason> reclaim_reason;
  };
  struct AllocationEntry {
    store::Owner owner;
    std::vector<store::RecordKey> keys;
  };

  Manager(ManagerOptions options, driver::GpuDriver& driver, store::RecordStore& store,
          Clock& clock, InstanceObserver* observer);

  Status Recover(OwnerSource& owners);
  // Verifies `records` (this boot's) and the owners `owned` against the live
  // layouts of `scope` (DESIGN.md §4) and decides what becomes of every
  // record and live GI; changes nothing. A record or owner of a GPU outside
  // `scope` fails. kFailedPrecondition naming GPU, instance and mismatch.
  StatusOr<Takeover> VerifyGpus(const std::map<uint32_t, ScopeGpu>& scope,
                                const std::vector<store::Record>& records,
                                const std::vector<OwnedInstance>& owned,
                                std::string_view owner_source) const;
  // Rediscovery (ReconcileOnce step 0) and its one-GPU takeover. REQUIRES:
  // reconcile_mu_ held.
  void Rediscover(ReconcileReport& report);
  // Empty when `g` is now managed; else why not (the outcome to log).
  std::string TakeOver(uint32_t g, const driver::MigModeInfo& mode);
  // REQUIRES: reconcile_mu_ held. Logs `outcome` for GPU entry `g` if it
  // differs from the last one logged.
  void NoteProbe(uint32_t g, Gpu& gpu, const std::string& outcome);
  bool Managed(const Gpu& gpu) const {
    return gpu.managed.load(std::memory_order_acquire);
  }

  // REQUIRES: mu_ held. Changes the state (CanTransition), logs one line and
  // emits one InstanceEvent.
  Status TransitionLocked(Instance& inst, InstanceState to, EventReason reason);
  void EmitLocked(InstanceState from, const Instance& inst, EventReason reason);
  // kPermissionDenied when a spec names a profile outside the allowlist.
  Status CheckAllowlistLocked(const std::vector<InstanceSpec>& specs) const;
  StatusOr<Allocation> AllocateImpl(const AllocateRequest& request);
  planner::PlanInput BuildPlanInputLocked(const std::vector<InstanceSpec>& specs) const;
  InstanceView ViewLocked(const Instance& inst) const;
  Instance* FindByUuidLocked(const std::string& uuid);

  // Execution helpers: called with the instance's GPU lock held, mu_ not held.
  // Create: intent -> GI -> CI -> commit (Active with owner). On error the
  // partial instance is destroyed (or left in Error); returns the error.
  // `as_idle` commits it Idle without owner (warm pool).
  Status CreateInstance(const store::RecordKey& key, const store::Owner& owner,
                        const std::string& request_id, bool as_idle);
  // Destroys the CI (if known) and the GI at `key` on the hardware. Without a
  // GI id, whatever GI of the key's profile sits at the key's placement.
  // NotFound counts as destroyed. CIs unknown to the caller are found on IN_USE.
  Status DestroyHw(GpuIndex gpu, const store::RecordKey& key, std::optional<NvmlGiId> gi,
                   std::optional<NvmlCiId> ci);
  // Destroys a tracked instance whose state is Reclaiming, Creating (rollback)
  // or Error (retry). On success it is removed from the registry; on failure
  // it is in Error with an Error record.
  Status DestroyInstance(const store::RecordKey& key);
  Status PutRecord(const Instance& inst, InstanceState state, store::RecordPhase phase);
  PublishedInstance PublishedLocked(const Instance& inst) const;
  // Reclaims Idle instances chosen by the caller (TTL, cap, operator).
  void ReclaimKeys(const std::vector<store::RecordKey>& keys, ReclaimResult* result);
  // Locks the per-GPU mutexes of `gpus` in index order.
  std::vector<std::unique_lock<std::mutex>> LockGpus(const std::set<uint32_t>& gpus);
  Status DetectDrift(ReconcileReport& report);
  void WarmPool(ReconcileReport& report);
  void ReconcilerLoop();
  int64_t NowTick() const;

  const ManagerOptions options_;
  driver::GpuDriver& driver_;
  store::RecordStore& store_;
  Clock& clock_;
  NoopInstanceObserver noop_observer_;
  InstanceObserver& observer_;
  // By GPU index: every index NVML reported at startup, managed or not. The
  // map's structure is fixed after recovery (see Gpu).
  std::map<uint32_t, Gpu> gpus_;
  RecoverySummary recovery_;

  mutable std::mutex mu_;
  std::map<store::RecordKey, Instance> instances_;  // GUARDED_BY(mu_)
  std::map<std::string, AllocationEntry> allocations_;  // GUARDED_BY(mu_)
  std::set<std::string> in_flight_;  // GUARDED_BY(mu_)
  mutable planner::Planner planner_;  // GUARDED_BY(mu_)
  planner::DemandMix demand_;  // GUARDED_BY(mu_)
  ManagerCounters counters_;  // GUARDED_BY(mu_)
  uint64_t creating_seq_ = 0;  // GUARDED_BY(mu_)
  uint64_t event_seq_ = 0;  // GUARDED_BY(mu_)
  ManagerPolicy policy_;  // GUARDED_BY(mu_)

  std::mutex reconcile_mu_;  // one ReconcileOnce at a time
  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool stop_ = false;  // GUARDED_BY(thread_mu_)
  std::thread thread_;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_MANAGER_H_
