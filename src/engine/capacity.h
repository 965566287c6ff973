// File: engine/capacity.h
//
// Per-GPU capacity figures shared by GetStatus, `migctl status` and metrics:
// how many memory slices are free, Idle, Active (or otherwise busy) and
// foreign, and a fragmentation score.
//
// Fragmentation: let F be the free slices (no instance, tracked or foreign,
// covers them) and P* the largest GI profile (by slice count, ties by memory)
// whose slice count is <= F. The score is 1 - s(best)/s(P*), where best is the
// largest profile that can actually be created now in the free space (a
// listed placement clear of every instance, within the profile's instance
// count and the GPU's engine budget). 0 when F is 0 or the free space admits
// a profile as large as its size allows; 1 when not even the smallest profile
// fits in F > 0 free slices.
//
// Thread-safety: pure functions.
#ifndef MIGD_ENGINE_CAPACITY_H_
#define MIGD_ENGINE_CAPACITY_H_

#include <cstdint>
#include <string>

#include "engine/instance_view.h"
#include "engine/manager_types.h"

namespace migd::engine {

struct GpuCapacity {
  uint32_t memory_slices = 0;  // 0 when MIG is not enabled (no table)
  uint32_t free_slices = 0;
  uint32_t idle_slices = 0;
  uint32_t active_slices = 0;  // Active, Creating, Reclaiming, Deleting, Error
  uint32_t foreign_slices = 0;
  double fragmentation = 0.0;
  std::string largest_free_profile;  // largest profile creatable now ("" if none)
};

// `snapshot` is Manager::List(); only the instances and foreign GIs of
// `gpu.info.index` are considered.
GpuCapacity ComputeCapacity(const GpuView& gpu, const ManagerSnapshot& snapshot);

}  // namespace migd::engine

#endif  // MIGD_ENGINE_CAPACITY_H_
