// File: engine/tracked_instance.h
//
// TrackedInstance: the Manager's registry entry of one instance (its identity,
// state, owner, journal phase and bookkeeping), and the views derived from it.
// Internal to the engine; callers see InstanceView and PublishedInstance.
//
// Thread-safety: a plain value. Entries live in engine::Registry and are read
// and written under its lock; components work on copies outside it.
#ifndef MIGD_ENGINE_TRACKED_INSTANCE_H_
#define MIGD_ENGINE_TRACKED_INSTANCE_H_

#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "engine/events.h"
#include "engine/instance_observer.h"
#include "engine/instance_state.h"
#include "engine/instance_view.h"
#include "store/instance_identity.h"
#include "store/record.h"

namespace migd::engine {

struct TrackedInstance {
  // The slot always; GI id, CI id and MIG UUID once they exist (gi(), ci()).
  store::InstanceIdentity id;
  bool has_gi = false;
  bool has_ci = false;
  GpuIndex gpu;
  std::string profile;  // canonical name
  InstanceState state = InstanceState::kNone;
  bool committed = false;  // GI and CI exist and the record is committed
  store::Owner owner;
  std::string request_id;
  std::optional<Clock::TimePoint> last_used;
  Clock::TimePoint created_at{};
  bool busy = false;       // a release is writing its record
  bool published = false;  // the observer was told (OnPublish)
  // Why it entered Reclaiming (pressure, TTL, cap, operator); reported to the
  // listener once the destroy succeeds.
  std::optional<EventReason> reclaim_reason;
  // Marked by the health monitor (engine/engine_health.h): never reused;
  // destroyed on release; reclaimed when Idle. In the record ("unhealthy"),
  // so recovery restores it.
  bool unhealthy = false;
  std::string health_reason;

  const store::RecordKey& key() const { return id.key(); }
  std::optional<NvmlGiId> gi() const;
  std::optional<NvmlCiId> ci() const;
  void set_gi(std::optional<NvmlGiId> gi);
  void set_ci(std::optional<NvmlCiId> ci);
  // Forgets the owner and request (an Idle instance has neither).
  void ClearOwner();
};

// A registry entry for `record` (state from the record, not yet verified),
// on GPU index `gpu` with canonical profile name `profile`.
TrackedInstance TrackedFromRecord(const store::Record& record, GpuIndex gpu, std::string profile);

// The view the Manager hands out.
InstanceView ViewOf(const TrackedInstance& instance);
// What the observer is told; `gpu_minor` is the GPU's /dev/nvidia<minor>.
PublishedInstance PublishedOf(const TrackedInstance& instance, uint32_t gpu_minor);

// The allocation a request id names: its owner and the keys of its instances.
struct AllocationEntry {
  store::Owner owner;
  std::vector<store::RecordKey> keys;
};

// The allocation id of an Active instance: its request id, or
// "instance:<MIG UUID>" for one that has none (adopted, split out).
std::string AllocationIdOf(const TrackedInstance& instance);

}  // namespace migd::engine

#endif  // MIGD_ENGINE_TRACKED_INSTANCE_H_
