// File: k8s/dra/engine_snapshot.h
//
// SnapshotOf: the engine's state as the DRA pool builder sees it (pool.h):
// every managed GPU with its placement table, every tracked instance
// classified by who allocated it (claim_ids.h decides "the scheduler"),
// every foreign instance, the learned demand mix and the profile allowlist.
// Only engine::Manager's public API is used.
//
// Thread-safety: as Manager's List/Gpus (thread-safe). The snapshot points
// at the Manager's GPU models, which live as long as the Manager.
#ifndef MIGD_K8S_DRA_ENGINE_SNAPSHOT_H_
#define MIGD_K8S_DRA_ENGINE_SNAPSHOT_H_

#include "engine/instance_view.h"
#include "engine/manager.h"
#include "k8s/dra/pool.h"

namespace migd::k8s::dra {

NodeSnapshot SnapshotOf(const engine::Manager& manager);

// The occupancy of one tracked instance (pool.h).
Occupancy OccupancyOf(const engine::InstanceView& instance);

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_ENGINE_SNAPSHOT_H_
