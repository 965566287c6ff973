// File: engine/manager.h
//
// engine::Manager: the single authority on MIG instance state. It allocates
// instances (reusing Idle ones, creating in free space or after reclaiming
// Idle ones, as the planner decides), releases them to Idle, reclaims Idle
// ones on request, recovers its exact state at startup, and runs the
// reconciler. docs/engine.md describes the data flow, the locks and
// the classes it delegates to:
//
//   GpuTable     GPUs, placement tables, per-GPU mutation locks
//   Registry     tracked instances, allocations, state machine, events
//   Policy       reloadable settings and the profile allowlist
//   Executor     one instance's create / destroy (NVML, record, observer)
//   Allocator    Allocate / Release / Plan (plan, reserve, execute, roll back)
//   Recovery     startup (verification by VerifyTakeover, then action)
//   Rediscovery  taking over GPUs that were not manageable at startup
//   Reconciler   Error retries, removals, idle TTL and cap, drift, warm pool
//   EngineHealth health marks (an unhealthy instance is never reused)
//
// NVML calls per operation (NvmlDriver, counted by the simulator): reuse 0,
// release 0, create 7, destroy 5; the first create of a GI profile on a GPU
// also reads that profile's CI profiles once.
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
// Thread-safety: all methods are thread-safe. No lock is held across NVML,
// disk or observer calls except a GPU's own mutation lock (multi-GPU
// operations take them in index order).
#ifndef MIGD_ENGINE_MANAGER_H_
#define MIGD_ENGINE_MANAGER_H_

#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"
#include "driver/gpu_driver.h"
#include "engine/events.h"
#include "engine/health_monitor.h"
#include "engine/instance_observer.h"
#include "engine/instance_state.h"
#include "engine/instance_view.h"
#include "engine/manager_types.h"
#include "engine/owner_source.h"
#include "mig/catalog.h"
#include "planner/demand_mix.h"
#include "planner/planner.h"
#include "store/gpu_mark_store.h"
#include "store/record_store.h"

namespace migd::engine {

class Allocator;
class EngineHealth;
class Executor;
class GpuTable;
class Policy;
class Reconciler;
class RecordJournal;
class Rediscovery;
class Registry;

class Manager {
 public:
  // Recovers state and returns a ready Manager: the GPUs and GI profiles
  // from `driver` (one NVML session, opened by the caller); the live layout
  // of every MIG-enabled GPU; the records (other boot ids discarded); owners
  // from `owners`; verification of every record and owner (UUID, GPU,
  // profile, placement, GI id, CI id); intents resolved; unknown instances
  // preserved as foreign (or adopted); the GPU health marks of this boot
  // (store/gpu_mark_store.h, <stateDir>/gpu-health) restored, another boot's
  // removed.
  // Errors: kFailedPrecondition / kDataLoss naming the GPU, the instance and
  // the mismatch when anything cannot be verified — nothing on the hardware
  // has been changed then; kInvalidArgument for bad options; driver and store
  // errors (GpuMarkStore's included: a gpu-health entry that is not a
  // directory is kFailedPrecondition naming it).
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
  // instances match, else kAlreadyExists. kAborted while the same id is in
  // flight; kInvalidArgument for a bad request; kPermissionDenied for a
  // profile outside the allowlist; kResourceExhausted when no plan exists
  // (the planner's message); driver/store errors otherwise (everything
  // created was destroyed, reused instances are Idle again).
  StatusOr<Allocation> Allocate(const AllocateRequest& request);

  // Makes every instance of the allocation Idle (GI/CI untouched, observer
  // not called, 0 NVML calls), except an unhealthy one (health_sink()),
  // which is destroyed instead. kNotFound for an unknown id.
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
  // the managed ones. A GPU rediscovery brings under management later
  // appears, or gets its model, from then on.
  std::vector<GpuView> Gpus() const;

  // Dry run: the plan Allocate would execute now (no state change, demand
  // mix not updated).
  StatusOr<planner::Plan> Plan(const std::vector<InstanceSpec>& instances) const;

  // One reconciler pass (engine/reconciler.h). Returns the first hard error
  // (e.g. a driver listing failure); per-instance failures are counted.
  // Rediscovery failures are not errors of the pass.
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

  // What a HealthMonitor (engine/health_monitor.h) tells the engine
  // (engine/engine_health.h): an unhealthy instance is never reused, is
  // destroyed on release and reclaimed when Idle; an unhealthy GPU takes no
  // new allocation; a MIG config change runs a reconciler pass (its drift
  // check). The monitor must be stopped before the Manager is destroyed.
  HealthSink& health_sink();
  // The MIG-change drift checks the sink asked for (one pending per GPU; a
  // pass of the reconciler thread, or ReconcileOnce, serves them).
  DriftCheckCounters drift_checks() const;
  // Clears the health marks of GPU `gpu` and of every instance on it,
  // durably (their records and the GPU's mark file). kNotFound for a GPU
  // this node does not have; a healthy GPU is OK (nothing changes); a mark
  // file that cannot be removed is its error (nothing cleared). Returns what
  // was cleared.
  StatusOr<HealthClearResult> ClearGpuHealth(GpuIndex gpu);
  // Blocks until at least `n` passes served drift checks (tests).
  void WaitForDriftPasses(uint64_t n) const;

 private:
  Manager(ManagerOptions options, driver::GpuDriver& driver, store::RecordStore& store,
          std::unique_ptr<store::GpuMarkStore> gpu_marks, Clock& clock,
          InstanceObserver* observer);

  const ManagerOptions options_;
  NoopInstanceObserver noop_observer_;
  InstanceObserver& observer_;
  RecoverySummary recovery_;
  std::unique_ptr<store::GpuMarkStore> gpu_marks_;
  // Declaration order is construction order; the reconciler (which uses all
  // of the others) is stopped first by ~Manager.
  std::unique_ptr<GpuTable> gpus_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<RecordJournal> journal_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Rediscovery> rediscovery_;
  std::unique_ptr<Reconciler> reconciler_;
  std::unique_ptr<EngineHealth> health_;
  Clock& clock_;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_MANAGER_H_
