// File: mig/legality.h
//
// The one legality model of GPU instances (GIs) on a MIG GPU. A set of GIs
// may coexist on one GPU iff
//   1. every placement is listed for its profile (the GPU's placement table,
//      nvmlDeviceGetGpuInstancePossiblePlacements_v2),
//   2. no two placements overlap on the memory-slice axis,
//   3. no profile has more GIs than its instanceCount
//      (nvmlGpuInstanceProfileInfo_t::instanceCount), and
//   4. the GIs' engines (copyEngineCount, decoderCount, encoderCount,
//      jpegCount, ofaCount) fit the GPU's engine budget
//      (GpuModel::engine_totals; this encodes +me / +me.all exclusivity).
// mig::Layout, the planner and the placement benchmark all decide legality
// through this file; nothing else restates the rules.
//
// PlacementRules holds those facts of one GpuModel in compact form (profile
// indices, placement bit masks, fixed-size engine vectors) for hot loops;
// Occupancy is what one GPU holds as far as the rules care.
//
// Example:
//   StatusOr<PlacementRules> rules = PlacementRules::Build(*h100);
//   Occupancy occ;
//   if (CheckAdd(*rules, occ, three_g, {4, 4}) == Verdict::kOk) occ.Add(*rules, three_g, 0xF0);
//
// Thread-safety: PlacementRules is immutable after Build; Occupancy is a
// value type.
#ifndef MIGD_MIG_LEGALITY_H_
#define MIGD_MIG_LEGALITY_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mig/catalog.h"
#include "mig/placement.h"

namespace migd::mig {

// Rules tables are limited by their bit sets: masks are uint32_t (memory
// units), per-profile sets are uint32_t (profiles), counts are uint8_t.
inline constexpr size_t kMaxRuleProfiles = 32;
inline constexpr uint32_t kMaxInstanceCount = 255;

// Copy engines, decoders, encoders, JPEG, OFA.
using EngineVector = std::array<uint32_t, 5>;
EngineVector ToEngineVector(const Engines& e);
Engines ToEngines(const EngineVector& v);

// used + need <= limit, component-wise.
inline bool EnginesFit(const EngineVector& used, const EngineVector& need,
                       const EngineVector& limit) {
  for (size_t i = 0; i < used.size(); ++i) {
    if (used[i] + need[i] > limit[i]) return false;
  }
  return true;
}

// One listed (profile, placement) of a table.
struct Slot {
  uint16_t profile = 0;  // index into GpuModel::gi_profiles
  uint32_t mask = 0;     // Placement::Mask()
  Placement placement;
};

class PlacementRules {
 public:
  // kInvalidArgument (naming `model`) if the table does not fit the compact
  // form: 0 or more than kMaxMemorySlices memory units, more than
  // kMaxRuleProfiles profiles, an instanceCount above kMaxInstanceCount, or a
  // placement outside the GPU.
  static StatusOr<PlacementRules> Build(const GpuModel& model);

  // The model built from; not owned (REQUIRES: outlives the rules).
  const GpuModel& model() const { return *model_; }
  size_t profile_count() const { return caps_.size(); }
  uint32_t memory_slices() const { return memory_slices_; }
  // Every listed placement, in profile order, then ascending start.
  const std::vector<Slot>& slots() const { return slots_; }
  uint32_t cap(size_t profile) const { return caps_[profile]; }
  const EngineVector& engines(size_t profile) const { return engines_[profile]; }
  const EngineVector& totals() const { return totals_; }
  // Bit p: profile p has at least one listed placement.
  uint32_t listed_profiles() const { return listed_; }

 private:
  PlacementRules() = default;

  const GpuModel* model_ = nullptr;
  uint32_t memory_slices_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint32_t> caps_;
  std::vector<EngineVector> engines_;
  EngineVector totals_{};
  uint32_t listed_ = 0;
};

// What one GPU holds, as far as legality is concerned.
struct Occupancy {
  uint32_t mask = 0;                               // occupied memory units
  std::array<uint8_t, kMaxRuleProfiles> counts{};  // GIs per profile
  EngineVector used{};                             // engines of every GI

  // REQUIRES: `profile` < rules.profile_count(); Remove: present.
  void Add(const PlacementRules& rules, size_t profile, uint32_t placement_mask);
  void Remove(const PlacementRules& rules, size_t profile, uint32_t placement_mask);
  friend bool operator==(const Occupancy&, const Occupancy&) = default;
};

// Why a GI can or cannot be added.
enum class Verdict {
  kOk,
  kNotListed,      // rule 1
  kOverlap,        // rule 2
  kInstanceCount,  // rule 3
  kEngines,        // rule 4
};
std::string_view VerdictName(Verdict v);  // "ok", "not listed", ...

// Whether `profile` at `placement` may be added to `occ`; the first rule
// broken, in the order above.
Verdict CheckAdd(const PlacementRules& rules, const Occupancy& occ, size_t profile,
                 const Placement& placement);

// Rules 3 and 4 for one more GI of `profile` (the placement aside).
inline bool CountAndEnginesAllow(const PlacementRules& rules, const Occupancy& occ,
                                 size_t profile) {
  return occ.counts[profile] < rules.cap(profile) &&
         EnginesFit(occ.used, rules.engines(profile), rules.totals());
}

// Rules 3 and 4 for what `occ` already holds, for the profiles in the bit
// set `profiles` (used after several GIs were added without checks, e.g. a
// joint plan being costed).
bool WithinLimits(const PlacementRules& rules, const Occupancy& occ, uint32_t profiles);

// Bit p: one more GI of profile p is allowed by rules 3 and 4.
uint32_t CountAndEnginesAllowed(const PlacementRules& rules, const Occupancy& occ);

}  // namespace migd::mig

#endif  // MIGD_MIG_LEGALITY_H_
