#include "engine/capacity.h"

#include <algorithm>
#include <bit>
#include <tuple>

#include "mig/layout.h"

namespace migd::engine {

GpuCapacity ComputeCapacity(const GpuView& gpu, const ManagerSnapshot& snapshot) {
  GpuCapacity c;
  if (gpu.model == nullptr) return c;
  const mig::GpuModel& model = *gpu.model;
  c.memory_slices = model.memory_slices;
  mig::Layout layout(model);
  uint32_t idle = 0;
  uint32_t busy = 0;
  uint32_t foreign = 0;
  // Every GI present occupies its slices, whatever its state; Add's refusal
  // (a layout NVML allowed but our table calls illegal) must not hide them.
  auto place = [&](GiProfileId id, const mig::Placement& p) {
    const mig::GiProfile* prof = model.FindProfileById(id);
    if (prof != nullptr) (void)layout.Add(*prof, p);
  };
  for (const InstanceView& v : snapshot.instances) {
    if (v.gpu != gpu.info.index) continue;
    (v.state == InstanceState::kIdle ? idle : busy) |= v.placement.Mask();
    place(v.profile_id, v.placement);
  }
  for (const ForeignInstance& f : snapshot.foreign) {
    if (f.gpu != gpu.info.index) continue;
    foreign |= f.placement.Mask();
    place(f.profile_id, f.placement);
  }
  const uint32_t all_mask =
      model.memory_slices >= 32 ? ~0u : ((1u << model.memory_slices) - 1u);
  const uint32_t covered = (idle | busy | foreign) & all_mask;
  c.idle_slices = static_cast<uint32_t>(std::popcount(idle & all_mask));
  c.active_slices = static_cast<uint32_t>(std::popcount(busy & all_mask & ~idle));
  c.foreign_slices = static_cast<uint32_t>(std::popcount(foreign & all_mask & ~idle & ~busy));
  c.free_slices = model.memory_slices - static_cast<uint32_t>(std::popcount(covered));
  if (c.free_slices == 0) return c;

  uint32_t ideal = 0;  // P*: the largest size the free slice count allows
  uint32_t best = 0;   // the largest size creatable now
  uint64_t best_mem = 0;
  uint32_t best_compute = 0;
  for (const mig::GiProfile& p : model.gi_profiles) {
    const uint32_t size = p.placement_size();
    if (size == 0 || size > c.free_slices) continue;
    ideal = std::max(ideal, size);
    if (layout.RemainingCapacity(p) == 0) continue;
    // Ties: more memory, then more compute slices.
    if (std::tie(size, p.memory_mib, p.slice_count) > std::tie(best, best_mem, best_compute)) {
      best = size;
      best_mem = p.memory_mib;
      best_compute = p.slice_count;
      c.largest_free_profile = p.name;
    }
  }
  if (ideal == 0) return c;  // no profile is that small: nothing to lose
  c.fragmentation = 1.0 - static_cast<double>(best) / static_cast<double>(ideal);
  return c;
}

}  // namespace migd::engine
