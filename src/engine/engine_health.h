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
// a restart; a GPU's own mark is written to the GpuMarkStore
// (store/gpu_mark_store.h) and restored by Restore before the Manager serves
// anything. The lifecycle rules that read the marks:
//   Allocator::Reservable      an unhealthy Idle instance is never reused
//   Allocator::Release         an unhealthy instance is destroyed, not kept Idle
//   Reconciler::ReclaimUnhealthy  unhealthy Idle instances are reclaimed; a
//                              mark that hits an Idle instance requests a
//                              pass at once (request_drift, coalesced)
//   plan_input                 an unhealthy GPU is not offered to the planner
//
// A GPU's mark has a cause (store::GpuMarkCause): kLost for a GPU that fell
// off the bus, which ClearRecoveredGpu may clear once it answers again;
// kFault otherwise.
//
// Thread-safety: called on the monitor's thread (and ClearGpu on an API
// thread); marks and clears are serialised by the class's own lock, taken
// before the registry lock and held across their disk writes, so that the
// disk ends as memory does.
#ifndef MIGD_ENGINE_ENGINE_HEALTH_H_
#define MIGD_ENGINE_ENGINE_HEALTH_H_

#include <functional>
#include <map>
#include <vector>
#include <string>

#include "base/clock.h"
#include "base/mutex.h"
#include "engine/events.h"
#include "engine/gpu_table.h"
#include "engine/health_monitor.h"
#include "engine/journal.h"
#include "engine/manager_types.h"
#include "engine/registry.h"
#include "store/gpu_mark_store.h"

namespace migd::engine {

class EngineHealth final : public HealthSink {
 public:
  // `request_drift` runs a drift check of one GPU (the reconciler's); it is
  // called without the registry lock. `listener` and `marks` may be null
  // (no GPU mark on disk then); not owned.
  EngineHealth(Registry& registry, const GpuTable& gpus, RecordJournal& journal,
               store::GpuMarkStore* marks, Clock& clock, EngineListener* listener,
               std::function<void(GpuIndex)> request_drift)
      : registry_(registry),
        gpus_(gpus),
        journal_(journal),
        marks_(marks),
        clock_(clock),
        listener_(listener),
        request_drift_(std::move(request_drift)) {}

  void MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId> ci,
                             uint64_t xid) override ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the GPU and its instances; a new GPU mark is written to the
  // GpuMarkStore (a failed write is logged: the mark holds until a restart).
  void MarkGpuUnhealthy(GpuIndex gpu, const std::string& reason) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // As MarkGpuUnhealthy, cause kLost. A fault mark later on the same GPU
  // makes its cause kFault (on disk too): no policy clears it then.
  void MarkGpuLost(GpuIndex gpu, const std::string& reason) override ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<LostGpu> LostGpus() override ABSL_LOCKS_EXCLUDED(mu_);
  // health.clearRecoveredGpus: removes the GPU's mark file, then its mark
  // in memory, if the GPU's only mark is still a loss; the marks of its
  // instances stay (an instance that lived through the loss is never
  // reused: Idle ones are reclaimed, Active ones destroyed on release).
  // Announced as a clear (OnHealthChange, cleared, gpu_changed); asks for a
  // drift check of the GPU. A failed removal is logged; the mark stays.
  void ClearRecoveredGpu(GpuIndex gpu) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnMigConfigChange(GpuIndex gpu) override { request_drift_(gpu); }
  void OnEvent(const driver::GpuEvent& event, HealthAction action) override;

  // The operator's clear: the GPU's mark and the marks of every instance on
  // it, written to their records. Each cleared instance gets an
  // InstanceEvent (reason kHealthCleared); a clear that changed anything is
  // told to OnHealthChange (cleared = true). A GPU without marks: OK,
  // nothing changes, nothing is announced. The GPU's mark file is removed
  // first: if that fails, the error is returned and nothing is cleared.
  StatusOr<HealthClearResult> ClearGpu(GpuIndex gpu) ABSL_LOCKS_EXCLUDED(mu_);

  // Recovery: applies the GPU marks of this boot (by GPU UUID; a GPU that
  // listing skipped, by the mark's index) and fails closed on a mark file
  // of a present GPU that cannot be read: that GPU is marked unhealthy with
  // a reason naming the file and the fix. Marks and problems of GPUs this
  // node does not have are logged and left on disk.
  void Restore(const store::GpuMarkLoad& load) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Marks the GPU and its instances in memory and their records;
  // `write_mark`: also the GPU's mark file. `uuid`: the GPU's, when known
  // from elsewhere than the table (a restored mark).
  void MarkGpu(GpuIndex gpu, const std::string& reason, store::GpuMarkCause cause,
               bool write_mark, const GpuUuid& uuid = GpuUuid())
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the GPU's mark file (logged on failure).
  void WriteMark(GpuIndex gpu, const GpuUuid& uuid, const std::string& reason,
                 store::GpuMarkCause cause) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The index of the listed GPU of `uuid`, if any.
  std::optional<uint32_t> IndexOf(const GpuUuid& uuid) const;
  // Tells the listener, if anything was newly marked.
  void Announce(HealthChange change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_.mu());
  // Writes the records of `marked` (copies taken under the registry lock).
  void Persist(const std::vector<TrackedInstance>& marked);

  Registry& registry_;
  const GpuTable& gpus_;
  RecordJournal& journal_;
  store::GpuMarkStore* const marks_;
  Clock& clock_;
  EngineListener* const listener_;
  const std::function<void(GpuIndex)> request_drift_;
  // Serialises marks and clears with their disk writes (guards the disk's
  // agreement with the registry's marks; acquired before the registry lock).
  Mutex mu_;
  // The GPUs whose only mark is a loss, with the UUID each had (may be
  // empty for a GPU never listed).
  std::map<uint32_t, GpuUuid> lost_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_ENGINE_HEALTH_H_
