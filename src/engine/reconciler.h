// File: engine/reconciler.h
//
// Reconciler: one pass keeps the node converging on the policy and on the
// hardware; a thread runs a pass every reconcile_interval. Steps, in order:
//
//   0. rediscovery of unmanaged GPUs (engine/rediscovery.h)
//   1. retry the destroy of every Error instance (fail closed until NVML agrees)
//   2. retry queued record removals and the observer's queued work
//   3. idle TTL: reclaim Idle instances unused for longer (warm-pool minimum kept)
//   4. per-GPU idle cap: reclaim the least recently used Idle instances
//   5. drift: tracked instances that vanished (an Idle one is forgotten, an
//      Active one stays for its owner), foreign GIs that appeared or went
//   6. warm pool: create Idle instances in free space only (never by
//      reclaiming, never at a request's cost)
//
// A reconcile pass adds one GetMigMode per GPU that is not managed.
//
// Thread-safety: thread-safe; one pass at a time (RunOnce serialises). Start
// and Stop may be called from any thread; Stop wakes the thread at once and
// joins it.
#ifndef MIGD_ENGINE_RECONCILER_H_
#define MIGD_ENGINE_RECONCILER_H_

#include <absl/base/thread_annotations.h>

#include <set>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "driver/gpu_driver.h"
#include "engine/allocator.h"
#include "engine/executor.h"
#include "engine/gpu_table.h"
#include "engine/instance_observer.h"
#include "engine/journal.h"
#include "engine/manager_types.h"
#include "engine/policy.h"
#include "engine/rediscovery.h"
#include "engine/registry.h"

namespace migd::engine {

// The Idle instances a pass reclaims for the TTL: those unused for at least
// `ttl` at `now`, least recently used first, keeping the warm pool's minimum
// of each profile. `idle` are the Idle, not busy instances.
std::vector<TrackedInstance*> SelectExpired(std::vector<TrackedInstance*> idle,
                                            const ManagerPolicy& policy, Clock::TimePoint now);
// The Idle instances beyond the per-GPU cap, least recently used first
// (ties by key).
std::vector<TrackedInstance*> SelectOverCap(std::vector<TrackedInstance*> idle, uint32_t cap);

class Reconciler {
 public:
  // Every reference must outlive the reconciler.
  Reconciler(Registry& registry, const GpuTable& gpus, const Policy& policy, Executor& executor,
             Allocator& allocator, Rediscovery& rediscovery, driver::GpuDriver& driver,
             RecordJournal& journal, InstanceObserver& observer, Clock& clock,
             Clock::Duration interval);
  ~Reconciler();  // stops the thread
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  // One pass (see the file comment). Returns the first hard error (a drift
  // listing failure); per-instance failures are counted in the report.
  StatusOr<ReconcileReport> RunOnce();
  // Runs RunOnce every interval on a thread until Stop. Idempotent; Start
  // after Stop starts a new thread.
  void Start();
  void Stop();

  // Asks for a drift check of `gpu` by the next pass (the thread's, woken at
  // once, or a RunOnce). At most one check per GPU is pending: a request for
  // a GPU already pending is coalesced into it (no pass of its own), so a
  // burst of MIG configuration changes (migd's own creates and destroys
  // included) costs one pass, not one per event. No NVML call, no registry
  // lock: safe on the health monitor's thread.
  void RequestDriftCheck(GpuIndex gpu);
  DriftCheckCounters drift_checks() const;
  // Blocks until at least `n` passes served pending drift checks (tests).
  void WaitForDriftPasses(uint64_t n) const;

 private:
  StatusOr<ReconcileReport> Pass();  // RunOnce's work, under pass_mu_
  void RetryErrors(ReconcileReport& report);
  void RetryRemovals(ReconcileReport& report);
  // Every unhealthy Idle instance (EngineHealth) is destroyed.
  void ReclaimUnhealthy(ReconcileReport& report);
  void ReclaimExpired(const ManagerPolicy& policy, ReconcileReport& report);
  void ReclaimOverCap(const ManagerPolicy& policy, ReconcileReport& report);
  // Marks `victims` Reclaiming for `reason`; returns their keys.
  std::vector<store::RecordKey> MarkReclaiming(const std::vector<TrackedInstance*>& victims,
                                               EventReason reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_.mu());
  Status DetectDrift(ReconcileReport& report);
  // Compares the tracked instances and foreign GIs of `gpu` with `live`.
  void DriftOfGpu(uint32_t gpu, const std::vector<driver::GpuInstanceInfo>& live,
                  ReconcileReport& report, std::vector<store::RecordKey>& vanished_idle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_.mu());
  void ForgetVanished(const std::vector<store::RecordKey>& keys);
  void FillWarmPool(const ManagerPolicy& policy, ReconcileReport& report);
  // One warm-pool create of `profile`; false when the pool stops for it.
  bool WarmOne(const std::string& profile, uint32_t target, ReconcileReport& report);
  void Loop();

  Registry& registry_;
  const GpuTable& gpus_;
  const Policy& policy_;
  Executor& executor_;
  Allocator& allocator_;
  Rediscovery& rediscovery_;
  driver::GpuDriver& driver_;
  RecordJournal& journal_;
  InstanceObserver& observer_;
  Clock& clock_;
  const Clock::Duration interval_;

  Mutex pass_mu_;   // one RunOnce at a time
  Mutex start_mu_;  // serialises Start and Stop
  std::thread thread_ ABSL_GUARDED_BY(start_mu_);
  mutable Mutex thread_mu_;
  mutable CondVar wake_;
  bool stop_ ABSL_GUARDED_BY(thread_mu_) = false;
  std::set<uint32_t> pending_drift_ ABSL_GUARDED_BY(thread_mu_);
  DriftCheckCounters drift_ ABSL_GUARDED_BY(thread_mu_);
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_RECONCILER_H_
