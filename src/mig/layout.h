// File: mig/layout.h
//
// Layout: the GIs present on one GPU, as (profile, placement) pairs, with the
// legality rules of mig-hardware.md §5.1-§5.4: the placement must be listed
// for the profile, must not overlap another GI, the profile's instanceCount
// must not be exceeded, and the GPU's engine budget (engineTotals) must cover
// the profile's engines (this encodes +me and +me.all exclusivity).
//
// Also: exhaustive enumeration of legal layouts (mig-hardware.md §4), used by
// tests, the planner and benchmarks. Pure: no NVML, files or clock.
//
// Example:
//   mig::Layout l(*model);
//   MIGD_RETURN_IF_ERROR(l.Add(*three_g, {4, 4}));
//   uint32_t free_1g = l.RemainingCapacity(*one_g);  // 4 on an 8-unit GPU
//
// Thread-safety: value type; not safe for concurrent mutation.
#ifndef MIGD_MIG_LAYOUT_H_
#define MIGD_MIG_LAYOUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "mig/catalog.h"
#include "mig/placement.h"

namespace migd::mig {

struct PlacedGi {
  const GiProfile* profile = nullptr;  // points into the GpuModel
  Placement placement;
  friend bool operator==(const PlacedGi& a, const PlacedGi& b) {
    return a.profile == b.profile && a.placement == b.placement;
  }
};

class Layout {
 public:
  // REQUIRES: `model` outlives the Layout.
  explicit Layout(const GpuModel& model);

  const GpuModel& model() const { return *model_; }
  const std::vector<PlacedGi>& instances() const { return instances_; }
  uint32_t occupied_mask() const { return occupied_; }
  const Engines& engines_used() const { return engines_used_; }
  // Instances of the given profile id present now.
  uint32_t CountOf(GiProfileId id) const;

  // Whether `profile` could be created at `placement` now.
  // kInvalidArgument: the placement is not in the profile's list (or the
  //   profile is not of this model);
  // kResourceExhausted: overlap with an existing GI, instanceCount reached, or
  //   engine budget exhausted; the message says which.
  Status CanAdd(const GiProfile& profile, const Placement& placement) const;
  // CanAdd, then records the instance.
  Status Add(const GiProfile& profile, const Placement& placement);
  // Removes the instance of `profile` at exactly `placement`; kNotFound if absent.
  Status Remove(const GiProfile& profile, const Placement& placement);

  // How many more instances of `profile` could exist at the same time given
  // the current GIs (mig-hardware.md §5.11): the minimum of the remaining
  // instanceCount, the largest set of pairwise-disjoint free legal placements,
  // and what the remaining engine budget allows.
  uint32_t RemainingCapacity(const GiProfile& profile) const;

  // True if no profile of `profiles` can be added anywhere.
  bool IsMaximal(const std::vector<const GiProfile*>& profiles) const;

  // e.g. "1g@0 1g@1 3g@4" (profile name without memory suffix, sorted by start).
  // A variant keeps its suffix ("1g+me@0", "2g-me@6"); the double-memory 1g
  // keeps its full name ("1g.20gb@6"), as "1g" alone would read as the base 1g.
  std::string ToString() const;

 private:
  const GpuModel* model_;
  std::vector<PlacedGi> instances_;
  uint32_t occupied_ = 0;
  Engines engines_used_;
};

// Returns every legal layout built from `profiles` (pointers into one model),
// including the empty layout, each exactly once (as a set of (profile,
// placement) pairs). REQUIRES: all profiles belong to `model`.
std::vector<Layout> EnumerateLayouts(const GpuModel& model,
                                     const std::vector<const GiProfile*>& profiles);

// The profiles of `model` whose variant is in `variants`, in catalogue order;
// {Variant::kBase} gives the base profiles (1g/2g/3g/4g/7g on 8-unit GPUs).
std::vector<const GiProfile*> ProfilesOfVariants(const GpuModel& model,
                                                 const std::vector<Variant>& variants);

}  // namespace migd::mig

#endif  // MIGD_MIG_LAYOUT_H_
