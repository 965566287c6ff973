// File: mig/layout.h
//
// Layout: the GIs present on one GPU, as (profile, placement) pairs, kept
// legal by the rules of mig/legality.h (listed placement, no overlap,
// instanceCount, engine budget), with messages that name the rule broken.
//
// Also: exhaustive enumeration of legal layouts, used by tests, the planner
// and benchmarks. Pure: no NVML, files or clock.
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
#include <memory>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "mig/catalog.h"
#include "mig/legality.h"
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
  uint32_t occupied_mask() const { return occupancy_.mask; }
  Engines engines_used() const { return ToEngines(occupancy_.used); }
  const Occupancy& occupancy() const { return occupancy_; }
  // Instances of the given profile id present now.
  uint32_t CountOf(GiProfileId id) const;

  // Whether `profile` could be created at `placement` now.
  // kInvalidArgument: the placement is not in the profile's list (or the
  //   profile is not of this model, or the model does not fit
  //   PlacementRules);
  // kResourceExhausted: overlap with an existing GI, instanceCount reached, or
  //   engine budget exhausted; the message says which.
  Status CanAdd(const GiProfile& profile, const Placement& placement) const;
  // CanAdd, then records the instance.
  Status Add(const GiProfile& profile, const Placement& placement);
  // Removes the instance of `profile` at exactly `placement`; kNotFound if absent.
  Status Remove(const GiProfile& profile, const Placement& placement);

  // How many more instances of `profile` could exist at the same time given
  // the current GIs: the minimum of the remaining
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
  // Index of `profile` in the model's table, or -1.
  int IndexOf(const GiProfile& profile) const;

  const GpuModel* model_;
  // Shared by copies (EnumerateLayouts copies a Layout per legal layout);
  // null when the model does not fit the compact form (rules_error_ says why).
  std::shared_ptr<const PlacementRules> rules_;
  Status rules_error_;
  std::vector<PlacedGi> instances_;
  Occupancy occupancy_;
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
