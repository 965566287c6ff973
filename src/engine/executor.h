// File: engine/executor.h
//
// Executor: carries out one instance's create or destroy — the NVML calls,
// the record journal and the observer's publish/unpublish — in the order that
// makes every crash recoverable (store/record_store.h, "Crash contract"):
//
//   create:  Put(intent) -> CreateGi(explicit placement) -> CreateCi
//            -> Put(committed, Active or Idle) -> observer OnPublish
//   destroy: Put(Deleting) -> DestroyCi -> DestroyGi -> Remove record
//            -> observer OnUnpublish
//
// A create that fails destroys what it made (or leaves it in Error). A destroy
// that NVML refuses leaves the instance in Error with an Error record: never
// reused, retried by the reconciler (fail closed).
//
// Thread-safety: thread-safe. Create and Destroy REQUIRE the mutation lock of
// the instance's GPU (GpuTable::Lock) and NOT the registry lock; Reclaim
// takes the GPU locks itself.
#ifndef MIGD_ENGINE_EXECUTOR_H_
#define MIGD_ENGINE_EXECUTOR_H_

#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "driver/gpu_driver.h"
#include "engine/events.h"
#include "engine/gpu_table.h"
#include "engine/instance_observer.h"
#include "engine/journal.h"
#include "engine/manager_types.h"
#include "engine/registry.h"

namespace migd::engine {

class Executor {
 public:
  // Every reference must outlive the executor; `listener` may be null.
  Executor(driver::GpuDriver& driver, RecordJournal& journal, Registry& registry,
           const GpuTable& gpus, InstanceObserver& observer, Clock& clock,
           EngineListener* listener);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Creates the instance whose Creating placeholder is at `key`: committed
  // Active for `owner` and `request_id`, or Idle without owner when
  // `as_idle` (warm pool). The placeholder stays Creating (the caller makes
  // it Active or Idle). On error whatever was created is destroyed (the
  // placeholder is gone) or, if that fails, kept in Error.
  Status Create(const store::RecordKey& key, const store::Owner& owner,
                const std::string& request_id, bool as_idle);

  // Destroys the tracked instance at `key`, which must be Reclaiming,
  // Creating (rollback), Deleting or Error (retry). OK if it is not tracked.
  // On success it leaves the registry; on failure it is in Error with an
  // Error record, and the error is returned.
  Status Destroy(const store::RecordKey& key);

  // Destroys the CI (if known) and the GI at `key` on the hardware. Without a
  // GI id, whatever GI of the key's profile sits at the key's placement (a
  // create whose reply was lost). NOT_FOUND counts as destroyed only if the GI
  // is really gone; CIs unknown to the caller are found on IN_USE.
  Status DestroyHw(GpuIndex gpu, const store::RecordKey& key, std::optional<NvmlGiId> gi,
                   std::optional<NvmlCiId> ci);

  // Destroys the given Reclaiming instances, GPU by GPU under each GPU's lock.
  // `result` (may be null) gets each as it is after the attempt.
  void Reclaim(const std::vector<store::RecordKey>& keys, ReclaimResult* result);

  // Tells the observer about `instance` (with its GPU's minor).
  Status Publish(const TrackedInstance& instance);

 private:
  // Create's steps after the intent; each returns the error to report.
  StatusOr<driver::GpuInstanceInfo> CreateGi(const TrackedInstance& copy);
  StatusOr<driver::ComputeInstanceInfo> CreateCi(const TrackedInstance& copy, NvmlGiId gi);
  Status Commit(TrackedInstance& copy, bool as_idle);
  // Destroy's bookkeeping once the hardware is gone / refused.
  void Destroyed(const TrackedInstance& copy, InstanceState from);
  Status DestroyFailed(const TrackedInstance& copy, store::RecordPhase phase, const Status& why);

  driver::GpuDriver& driver_;
  RecordJournal& journal_;
  Registry& registry_;
  const GpuTable& gpus_;
  InstanceObserver& observer_;
  Clock& clock_;
  EngineListener* const listener_;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_EXECUTOR_H_
