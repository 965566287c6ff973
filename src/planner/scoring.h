// File: planner/scoring.h
//
// Internal to the planner. The alignment score of a GPU state: per-model
// precomputation (Table: mig::PlacementRules plus the cache identity), the
// pair and profile weights of one call's demand mix (Weights), and S(view),
// the weighted count of (profile, placement) pairs still creatable in a view
// (docs/planner.md, "The cost order").
//
// Thread-safety: Table and Weights are immutable after construction; the
// functions are pure.
#ifndef MIGD_PLANNER_SCORING_H_
#define MIGD_PLANNER_SCORING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "mig/catalog.h"
#include "mig/legality.h"
#include "planner/demand_mix.h"

namespace migd::planner::internal_planner {

// Occupancy of one GPU as far as legality is concerned.
using View = mig::Occupancy;

// The cached precomputation of one placement table.
struct Table {
  const mig::GpuModel* model = nullptr;
  // What the cache entry was built from; checked on every hit so that a
  // model freed and another allocated at the same address is noticed.
  const mig::GiProfile* profiles_data = nullptr;
  size_t profile_count = 0;
  uint32_t memory_slices = 0;
  mig::PlacementRules rules;  // slots() are the scored pairs

  // Whether this entry still describes `m` (same address, same table).
  bool Describes(const mig::GpuModel& m) const;
};

// kInvalidArgument if `m` cannot be planned on (see mig::PlacementRules).
StatusOr<std::unique_ptr<Table>> BuildTable(const mig::GpuModel& m);

// Pair weights of one table for one call.
struct Weights {
  std::vector<int64_t> weighted;  // per pair, from the demand mix
  std::vector<int64_t> uniform;   // per pair, all equal
  std::vector<int64_t> profile;   // per profile, from the demand mix (node term)
};

// Every pair of a profile in the mix's support (>= 0.1% of its weight on
// this table) weighs the same, other pairs 0, summing to ≈ kScoreScale;
// uniform weights when no mix entry resolves.
Weights BuildWeights(const Table& t, const DemandWeights& demand);

// S(view): the total weight of the pairs creatable in `v`. *placeable (if
// given) receives the profiles with at least one creatable pair.
int64_t Score(const Table& t, const std::vector<int64_t>& w, const View& v,
              uint32_t* placeable = nullptr);

// S(view) with the mix weights and with uniform weights, in one pass, and the
// profiles with at least one creatable pair.
struct ViewScores {
  int64_t weighted = 0;
  int64_t uniform = 0;
  uint32_t placeable = 0;
};
ViewScores Scores(const Table& t, const Weights& w, const View& v);

// Σ w_p over the profiles in `mask` (the node term's value).
int64_t ProfileValue(const std::vector<int64_t>& w, uint32_t mask);

}  // namespace migd::planner::internal_planner

#endif  // MIGD_PLANNER_SCORING_H_
