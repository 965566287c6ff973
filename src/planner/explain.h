// File: planner/explain.h
//
// Internal to the planner. The kResourceExhausted message when no plan
// exists: the first request instance that fits nowhere even alone, with the
// GPUs considered and what blocks each placement on each of them; or, when
// every instance fits alone, that the combination fails and where each would
// fit alone.
//
// Thread-safety: pure functions.
#ifndef MIGD_PLANNER_EXPLAIN_H_
#define MIGD_PLANNER_EXPLAIN_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "planner/gpu_context.h"
#include "planner/plan_input.h"
#include "planner/planner.h"

namespace migd::planner::internal_planner {

// Why class `c` has no action on GPU position `gi` in the input state, e.g.
// "GPU 0: 3g.40gb needs 0:4 or 4:4; 0:4 blocked by Active 1g.10gb@1, 4:4
// blocked by Foreign 2g.20gb@4".
std::string DescribeBlocked(const std::vector<Gpu>& gpus, size_t gi, const Class& c);

// The error for a request no search could place. `stats` are the searches'
// (the exhaustive search's option and state counts are quoted).
Status ExplainNoPlan(const PlanInput& input, const Canonical& canon, const PlanStats& stats);

}  // namespace migd::planner::internal_planner

#endif  // MIGD_PLANNER_EXPLAIN_H_
