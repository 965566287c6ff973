#include "planner/scoring.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "base/status_macros.h"
#include "planner/planner.h"

namespace migd::planner::internal_planner {

bool SameTable(const mig::GpuModel& a, const mig::GpuModel& b) {
  if (a.key != b.key || a.memory_slices != b.memory_slices ||
      a.compute_slices != b.compute_slices || !(a.engine_totals == b.engine_totals) ||
      a.gi_profiles.size() != b.gi_profiles.size()) {
    return false;
  }
  for (size_t i = 0; i < a.gi_profiles.size(); ++i) {
    const mig::GiProfile& x = a.gi_profiles[i];
    const mig::GiProfile& y = b.gi_profiles[i];
    if (x.name != y.name || x.instance_count != y.instance_count ||
        x.slice_count != y.slice_count || !(x.engines == y.engines) ||
        x.placements != y.placements) {
      return false;
    }
  }
  return true;
}

StatusOr<std::shared_ptr<const Table>> BuildTable(const mig::GpuModel& m) {
  auto model = std::make_shared<const mig::GpuModel>(m);
  MIGD_ASSIGN_OR_RETURN(mig::PlacementRules rules, mig::PlacementRules::Build(*model));
  return std::make_shared<const Table>(Table{std::move(model), std::move(rules)});
}

namespace {

// The support of the mix on `t`: listed profiles with at least kSupportShare
// of its weight (a profile asked for once long ago, decayed to a trace, does
// not count).
uint32_t Support(const Table& t, const std::vector<double>& raw) {
  const uint32_t listed = t.rules.listed_profiles();
  double total = 0.0;  // mix weight of the listed profiles
  for (size_t p = 0; p < raw.size(); ++p) {
    if (((listed >> p) & 1u) != 0) total += raw[p];
  }
  constexpr double kSupportShare = 1e-3;
  uint32_t support = 0;
  for (size_t p = 0; p < raw.size(); ++p) {
    if (((listed >> p) & 1u) != 0 && total > 0.0 && raw[p] >= kSupportShare * total) {
      support |= 1u << p;
    }
  }
  return support;
}

// Profiles (node term): the mix weight of the profiles in the support,
// normalised so that all of them placeable ≈ kScoreScale; every listed
// profile alike when nothing resolves.
std::vector<int64_t> ProfileWeights(const Table& t, const std::vector<double>& raw,
                                    uint32_t support) {
  const uint32_t listed = t.rules.listed_profiles();
  double support_total = 0.0;
  for (size_t p = 0; p < raw.size(); ++p) {
    if (((support >> p) & 1u) != 0) support_total += raw[p];
  }
  const int64_t nlisted = std::max(1, std::popcount(listed));
  std::vector<int64_t> out(raw.size(), 0);
  for (size_t p = 0; p < raw.size(); ++p) {
    if (support == 0) {
      if (((listed >> p) & 1u) != 0) out[p] = kScoreScale / nlisted;
    } else if (((support >> p) & 1u) != 0) {
      out[p] = std::llround(static_cast<double>(kScoreScale) * raw[p] / support_total);
    }
  }
  return out;
}

}  // namespace

Weights BuildWeights(const Table& t, const DemandWeights& demand) {
  const mig::GpuModel& m = *t.model;
  std::vector<double> raw(m.gi_profiles.size(), 0.0);
  for (const auto& [name, weight] : demand) {
    const mig::GiProfile* p = m.FindProfileByName(name);
    if (p != nullptr) raw[static_cast<size_t>(p - m.gi_profiles.data())] += weight;
  }
  const uint32_t support = Support(t, raw);
  const std::vector<mig::Slot>& pairs = t.rules.slots();
  Weights w;
  const auto n = static_cast<int64_t>(std::max<size_t>(pairs.size(), 1));
  w.uniform.assign(pairs.size(), kScoreScale / n);
  // Pairs: every pair of a profile in the support weighs the same (the mix
  // decides what counts, not how much: a rare large profile's few placements
  // must count as much as a common small one's, or slice-weighted acceptance
  // suffers); all pairs alike when nothing resolves.
  int64_t n_support = 0;
  for (const mig::Slot& pair : pairs) n_support += (support >> pair.profile) & 1u;
  if (n_support > 0) {
    for (const mig::Slot& pair : pairs) {
      w.weighted.push_back(((support >> pair.profile) & 1u) != 0 ? kScoreScale / n_support : 0);
    }
  } else {
    w.weighted = w.uniform;
  }
  w.profile = ProfileWeights(t, raw, support);
  return w;
}

int64_t Score(const Table& t, const std::vector<int64_t>& w, const View& v, uint32_t* placeable) {
  const uint32_t ok = mig::CountAndEnginesAllowed(t.rules, v);
  const std::vector<mig::Slot>& pairs = t.rules.slots();
  int64_t s = 0;
  uint32_t any = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const mig::Slot& pair = pairs[i];
    if ((pair.mask & v.mask) == 0 && ((ok >> pair.profile) & 1u) != 0) {
      s += w[i];
      any |= 1u << pair.profile;
    }
  }
  if (placeable != nullptr) *placeable = any;
  return s;
}

ViewScores Scores(const Table& t, const Weights& w, const View& v) {
  const uint32_t ok = mig::CountAndEnginesAllowed(t.rules, v);
  const std::vector<mig::Slot>& pairs = t.rules.slots();
  ViewScores out;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const mig::Slot& pair = pairs[i];
    if ((pair.mask & v.mask) == 0 && ((ok >> pair.profile) & 1u) != 0) {
      out.weighted += w.weighted[i];
      out.uniform += w.uniform[i];
      out.placeable |= 1u << pair.profile;
    }
  }
  return out;
}

int64_t ProfileValue(const std::vector<int64_t>& w, uint32_t mask) {
  int64_t v = 0;
  for (; mask != 0; mask &= mask - 1) v += w[static_cast<size_t>(std::countr_zero(mask))];
  return v;
}

}  // namespace migd::planner::internal_planner
