// File: bench/placement/planner_policy.h
//
// The adapter that runs migd's product planner (src/planner, target
// migd_planner) inside the benchmark: each decision builds a
// planner::PlanInput from the simulated cluster (Active and Idle occupants,
// keys "<gpu>:<pair>", last-used ticks) and the request, calls
// planner::Planner::MakePlan, and turns the Plan (reuse / create / reclaim)
// into simulator ops. The demand mix is a planner::DemandMix fed with every
// requested instance, as the engine does.
//
// Same-GPU multi-instance requests: the planner plans across GPUs unless an
// instance names a GPU, so the adapter asks once per GPU with every instance
// pinned to it and keeps the plan of lowest planner::PlanScore (the
// planner's own cost; ties to the lower GPU). Any-GPU requests: one call.
//
// Latency: LastCoreNs() is the wall time of the MakePlan calls only (input
// building excluded); LastExhaustiveCallNs() lists the calls in which the
// planner ran its exhaustive search (planner counters), successful or not.
//
// Thread-safety: one object per thread (planner::Planner is not thread-safe).
#ifndef MIGD_BENCH_PLACEMENT_PLANNER_POLICY_H_
#define MIGD_BENCH_PLACEMENT_PLANNER_POLICY_H_

#include <memory>
#include <optional>
#include <string>

#include "bench/placement/sim.h"
#include "planner/planner.h"
#include "planner/value_table.h"

namespace migd::bench {

struct PlannerPolicyOptions {
  std::string name = "migd";
  bool keep_idle = true;  // departure -> Idle (the product's behaviour); false: destroy
  // The value policy (planner::ValueService) with this objective; false: the
  // planner's cost order alone.
  bool value_policy = true;
  planner::Objective objective = planner::Objective::kCount;
  // On several GPUs the values lead (planner::MultiGpuValues::kSeparable)
  // instead of breaking the cost order's ties.
  bool separable = false;
  double half_life = 10.0;  // DemandMix half-life in mean lifetimes (0: no decay)
  // planner.reuseMargin, as planner::PlannerOptions::reuse_margin and
  // reuse_margin_several_gpus (the default: "auto"; {} is off).
  planner::ReuseMargins reuse_margin = planner::kAutoReuseMargins;
  // Time every MakePlan call this many times and keep the fastest (filters
  // preemption on a busy machine; the planner is pure, so repeats return the
  // same plan). 1 = time the single real call.
  int latency_repeats = 1;
};

// Names: "migd" (value policy, count objective), "migd-slice" (value policy,
// slice-weighted objective), "migd-order" (the cost order alone, the planner
// before the value policy), "migd-noidle" (value policy, count, departures
// destroy). MakePlannerPolicy takes the name from the options.
std::unique_ptr<Policy> MakePlannerPolicy(const PlannerPolicyOptions& options);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_PLANNER_POLICY_H_
