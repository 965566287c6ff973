#include "mig/legality.h"

#include <algorithm>
#include <bit>

namespace migd::mig {

EngineVector ToEngineVector(const Engines& e) {
  return {e.copy_engines, e.decoders, e.encoders, e.jpeg, e.ofa};
}

Engines ToEngines(const EngineVector& v) { return Engines{v[0], v[1], v[2], v[3], v[4]}; }

StatusOr<PlacementRules> PlacementRules::Build(const GpuModel& m) {
  const std::string where = "model " + m.key;
  if (m.memory_slices == 0 || m.memory_slices > kMaxMemorySlices) {
    return InvalidArgumentError(where + " has " + std::to_string(m.memory_slices) +
                                " memory units (1.." + std::to_string(kMaxMemorySlices) +
                                " supported)");
  }
  if (m.gi_profiles.size() > kMaxRuleProfiles) {
    return InvalidArgumentError(where + " has more than " + std::to_string(kMaxRuleProfiles) +
                                " GI profiles");
  }
  PlacementRules r;
  r.model_ = &m;
  r.memory_slices_ = m.memory_slices;
  r.totals_ = ToEngineVector(m.engine_totals);
  for (size_t i = 0; i < m.gi_profiles.size(); ++i) {
    const GiProfile& p = m.gi_profiles[i];
    if (p.instance_count > kMaxInstanceCount) {
      return InvalidArgumentError(where + ": profile " + p.name + " has instanceCount " +
                                  std::to_string(p.instance_count) + " (at most " +
                                  std::to_string(kMaxInstanceCount) + " supported)");
    }
    r.caps_.push_back(p.instance_count);
    r.engines_.push_back(ToEngineVector(p.engines));
    for (const Placement& pl : p.placements) {
      if (pl.size == 0 || pl.end() > m.memory_slices) {
        return InvalidArgumentError(where + ": profile " + p.name + " placement " + pl.ToString() +
                                    " is outside the " + std::to_string(m.memory_slices) +
                                    " memory units");
      }
      r.slots_.push_back(Slot{static_cast<uint16_t>(i), pl.Mask(), pl});
      r.listed_ |= 1u << i;
    }
  }
  return r;
}

void Occupancy::Add(const PlacementRules& rules, size_t profile, uint32_t placement_mask) {
  mask |= placement_mask;
  ++counts[profile];
  const EngineVector& e = rules.engines(profile);
  for (size_t i = 0; i < used.size(); ++i) used[i] += e[i];
}

void Occupancy::Remove(const PlacementRules& rules, size_t profile, uint32_t placement_mask) {
  mask &= ~placement_mask;
  --counts[profile];
  const EngineVector& e = rules.engines(profile);
  for (size_t i = 0; i < used.size(); ++i) used[i] -= e[i];
}

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kNotListed:
      return "not listed";
    case Verdict::kOverlap:
      return "overlap";
    case Verdict::kInstanceCount:
      return "instanceCount reached";
    case Verdict::kEngines:
      return "engine budget exhausted";
  }
  return "unknown";
}

Verdict CheckAdd(const PlacementRules& rules, const Occupancy& occ, size_t profile,
                 const Placement& placement) {
  const std::vector<Placement>& listed = rules.model().gi_profiles[profile].placements;
  if (std::find(listed.begin(), listed.end(), placement) == listed.end()) {
    return Verdict::kNotListed;
  }
  if ((occ.mask & placement.Mask()) != 0) return Verdict::kOverlap;
  if (occ.counts[profile] >= rules.cap(profile)) return Verdict::kInstanceCount;
  if (!EnginesFit(occ.used, rules.engines(profile), rules.totals())) return Verdict::kEngines;
  return Verdict::kOk;
}

bool WithinLimits(const PlacementRules& rules, const Occupancy& occ, uint32_t profiles) {
  for (uint32_t bits = profiles; bits != 0; bits &= bits - 1) {
    const auto p = static_cast<size_t>(std::countr_zero(bits));
    if (occ.counts[p] > rules.cap(p)) return false;
  }
  return EnginesFit(occ.used, EngineVector{}, rules.totals());
}

uint32_t CountAndEnginesAllowed(const PlacementRules& rules, const Occupancy& occ) {
  uint32_t ok = 0;
  for (size_t p = 0; p < rules.profile_count(); ++p) {
    if (CountAndEnginesAllow(rules, occ, p)) ok |= 1u << p;
  }
  return ok;
}

}  // namespace migd::mig
