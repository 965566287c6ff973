// File: engine/verifier.h
//
// VerifyTakeover: recovery's verification. Given the live layouts of some
// GPUs, this boot's records of them and the instances active owners hold, it
// decides what becomes of every record and every live GI — and changes
// nothing. The rules (docs/engine.md, "Recovery"):
//
//   owners      each reported MIG UUID must exist on a GPU in scope and match
//               what the source knows (parent GPU, placement, GI id, CI id);
//               one owner per instance.
//   intent      nothing at its placement: remove the record; a GI there is
//               ours (its ids must match the intent's): destroy it, or adopt
//               it (committed) when owned or adopt_complete_intents allows.
//   committed   GI id, profile, placement, CI id and MIG UUID must match the
//               live layout; a vanished instance's record is removed (an
//               Active one fails); Reclaiming/Deleting finish their destroy;
//               Error stays Error; owned -> Active, else Idle.
//   owned, no   adopted Active (e.g. realised by HAMi).
//   record
//   unknown GI  foreign, or with adopt_existing: a complete pair adopted Idle,
//               a CI-less GI on a GPU without live allocation an orphan to
//               destroy.
//
// Any contradiction is kFailedPrecondition "recovery stopped, nothing on the
// hardware was changed: GPU <uuid> instance <…>: <mismatch>".
//
// Thread-safety: a pure function of its arguments.
#ifndef MIGD_ENGINE_VERIFIER_H_
#define MIGD_ENGINE_VERIFIER_H_

#include <cstdint>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "driver/gpu_driver.h"
#include "engine/manager_types.h"
#include "engine/owner_source.h"
#include "engine/tracked_instance.h"
#include "mig/catalog.h"
#include "store/record.h"

namespace migd::engine {

// A GPU recovery verifies: its NVML identity, table and live layout (not
// owned; must outlive the call).
struct ScopeGpu {
  const driver::GpuInfo* info = nullptr;
  const mig::GpuModel* model = nullptr;
  const std::vector<driver::GpuInstanceInfo>* live = nullptr;
};

struct VerifyOptions {
  bool adopt_existing_mig_instances = false;
  bool adopt_complete_intents = false;
  Clock::TimePoint now{};  // last_used of instances that become Idle now
};

// What verification decided, before anything was changed.
struct Takeover {
  std::vector<TrackedInstance> restore;  // the record is right as it is
  std::vector<TrackedInstance> rewrite;  // Put a committed record with the instance's state
  std::vector<TrackedInstance> destroy;  // destroy, then remove the record
  std::vector<store::RecordKey> remove;  // records to remove (nothing to destroy)
  std::map<uint32_t, std::vector<driver::GpuInstanceInfo>> foreign;
  std::vector<std::pair<uint32_t, driver::GpuInstanceInfo>> orphans;
  RecoverySummary counts;  // all but other_boot_discarded and orphan_gis_destroyed
};

// Verifies `records` (this boot's) and `owned` against `scope` (by GPU
// index). A record or owner of a GPU outside `scope` fails. `owner_source`
// names the source in messages.
StatusOr<Takeover> VerifyTakeover(const std::map<uint32_t, ScopeGpu>& scope,
                                  const std::vector<store::Record>& records,
                                  const std::vector<OwnedInstance>& owned,
                                  std::string_view owner_source, const VerifyOptions& options);

}  // namespace migd::engine

#endif  // MIGD_ENGINE_VERIFIER_H_
