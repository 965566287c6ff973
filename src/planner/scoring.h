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

// The precomputation of one placement table. Every GPU whose model has the
// same table (SameTable) shares one Table, whichever object its model is (the
// engine holds one model object per GPU): the searches compare Table pointers
// to find GPUs of one table (the node term, twins, one Weights per table).
struct Table {
  std::shared_ptr<const mig::GpuModel> model;  // a copy: rules point into it
  mig::PlacementRules rules;                   // slots() are the scored pairs
};

// Whether `a` and `b` describe the same placement table: key, slices, engine
// totals and every profile's name, instance cap, slices, engines and
// placements (the facts a Table and a ValueTable are built from).
bool SameTable(const mig::GpuModel& a, const mig::GpuModel& b);

// A Table built from a copy of `m`; kInvalidArgument if `m` cannot be planned
// on (see mig::PlacementRules).
StatusOr<std::shared_ptr<const Table>> BuildTable(const mig::GpuModel& m);

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
