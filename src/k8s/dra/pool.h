// File: k8s/dra/pool.h
//
// The node's DRA pool as migd publishes it: which devices, which counter
// sets, and in which order (the allocator's first fit walks that order).
//
// Input: a NodeSnapshot, the engine's state reduced to what publishing needs
// (engine_snapshot.h builds it from a Manager). Every instance is one of
//   kClaimed    Active, or being created, for a ResourceClaim (request id
//               "dra-<uid>"): the scheduler allocated its device, so the
//               allocator subtracts its counters itself; the device stays
//               published, unchanged;
//   kIdle       released: reusable or reclaimable, so its slices stay in
//               the counter set and every device over them stays published;
//   kReleasing  being destroyed (Reclaiming, Deleting): treated as Idle;
//   kOther      not the scheduler's: foreign, Error, or Active for another
//               client (migd's own API). Published less: its memory slices
//               leave the counter set, its engines and instance count are
//               subtracted, and every device that no longer fits is left
//               out, so no published device can overlap it.
//
// BuildPool:
//   - one counter set per GPU with a placement table (device_table.h), less
//     the kOther instances;
//   - one device per legal (profile, placement) that fits that counter set
//     and whose profile the allowlist permits (empty = all);
//   - order: profiles smallest first (memory slices, then SMs, then memory,
//     then name; KEP-4815 recommends smallest first, or the largest device
//     is always taken), and within a profile the candidates of every GPU
//     ranked by RankPlacements (placement_ranking.h): an Idle instance of
//     the profile first, then the planner-preferred free placement, ...
//
// Thread-safety: BuildPool uses `planner` (not thread-safe).
#ifndef MIGD_K8S_DRA_POOL_H_
#define MIGD_K8S_DRA_POOL_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/ids.h"
#include "k8s/dra/device_table.h"
#include "mig/catalog.h"
#include "mig/placement.h"
#include "planner/demand_mix.h"
#include "planner/planner.h"

namespace migd::k8s::dra {

enum class Occupancy { kClaimed, kIdle, kReleasing, kOther };

struct SnapshotInstance {
  std::string profile;  // a profile name of the GPU's table
  mig::Placement placement;
  Occupancy occupancy = Occupancy::kOther;
  std::string key;        // MIG UUID (or any unique key)
  int64_t last_used = 0;  // Idle: unix seconds of the last release
  friend bool operator==(const SnapshotInstance&, const SnapshotInstance&) = default;
};

struct SnapshotGpu {
  GpuIndex index;
  GpuUuid uuid;
  std::string product_name;              // nvmlDeviceGetName
  std::string pci_bus_id;                // NVML form "00000000:17:00.0"; may be empty
  const mig::GpuModel* model = nullptr;  // placement table; must outlive the pool
  std::vector<SnapshotInstance> instances;
};

struct NodeSnapshot {
  std::vector<SnapshotGpu> gpus;  // GPUs without a model are skipped
  planner::DemandWeights demand;
  std::set<std::string> profile_allowlist;  // names or aliases; empty = all
};

struct PoolCounterSet {
  GpuIndex gpu;
  std::string name;
  Counters counters;
};

struct PoolDevice {
  std::string name;
  GpuIndex gpu;
  GpuUuid gpu_uuid;
  std::string product_name;
  std::string pci_bus_id;
  const mig::GiProfile* profile = nullptr;
  mig::Placement placement;
  std::string counter_set;
  Counters consumes;
  // What a Prepare would do now (RankPlacements); nullopt: blocked.
  std::optional<planner::Stage> stage;
};

struct Pool {
  std::vector<PoolCounterSet> counter_sets;  // by GPU index
  std::vector<PoolDevice> devices;           // in allocation priority order
};

Pool BuildPool(const NodeSnapshot& node, planner::Planner& planner);

// The planner's view of `node` (Claimed -> Active, Idle -> Idle,
// Releasing/Other -> Foreign), for ranking and tests.
planner::PlanInput PlannerView(const NodeSnapshot& node);

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_POOL_H_
