// File: planner/rank.h
//
// Internal to the planner. Every candidate of a single-instance request
// costed on the input state, in the planner's decision order (the order of
// the greedy search: cost, then reuse before create before reclaim, lower GPU
// index, lower start), so that the first is exactly what MakePlan chooses.
// Behind Planner::RankPlacements (a device order for frontends) and
// Planner::ExplainChoices (`migctl plan`'s chosen and next-best candidate).
//
// Thread-safety: pure functions over the call's data.
#ifndef MIGD_PLANNER_RANK_H_
#define MIGD_PLANNER_RANK_H_

#include <vector>

#include "planner/plan_input.h"
#include "planner/planner.h"

namespace migd::planner::internal_planner {

// REQUIRES: canon has exactly one class with one member.
std::vector<RankedCandidate> RankCandidates(const Canonical& canon);

// `input` with every instance of `plan` but instance `i` done (reclaims
// removed, reuses and creates Active) and instance `i`'s request alone.
PlanInput WithOthersDone(const PlanInput& input, const Plan& plan, size_t i);

}  // namespace migd::planner::internal_planner

#endif  // MIGD_PLANNER_RANK_H_
