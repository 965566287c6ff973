// File: bench/placement/baselines.h
//
// The baselines of the placement benchmark, implemented inside it
// (never linked into migd):
//   B1  FF-low          first GPU by index, lowest legal start
//   B2  FF-high         first GPU by index, highest legal start (end-packing)
//   B3  HAMi v2.10      1g/3g from the highest start, others from the lowest
//   B4a HAMi PR #2855, PR text: (largest free run ↑, legal pairs ↑, start ↓),
//                       most-constrained-first DFS, 4096 tries
//   B4b HAMi PR #2855, merged: midpoint regions, reserved region,
//                       (emptyRegions ↑, zoneMismatch ↓, edgeDistance ↑, start ↓)
//   B5  template first-fit (Volcano, HAMi ≤ v2.9): HAMi legacy geometry list
//   B6  nos geometry greedy: maximal layouts keeping used instances
//   B8  best-fit pack: fullest GPU that can host, highest start
//   B9  FGD adapted to MIG: minimise ΔF, F(s) = free(s)·Σ_p w_p·[p not placeable]
//   B10 exhaustive myopic: maximise Σ w_p·[p placeable somewhere after]
//   B11 single-GPU MDP optimum (see mdp.h), as a policy for N = 1 (B11s: the
//       slice-weighted optimum)
// Common conventions: GPUs in index order, ties to lower GPU then
// lower start; multi-instance requests: a same-GPU request places its
// instances in order on one GPU and rolls back, then tries the next GPU; an
// any-GPU request places instance by instance (each by the baseline's rule)
// and is rejected as a whole if one fails. Baselines other than B5/B6 do not
// keep Idle instances (departure destroys).
//
// Thread-safety: one policy object per thread.
#ifndef MIGD_BENCH_PLACEMENT_BASELINES_H_
#define MIGD_BENCH_PLACEMENT_BASELINES_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/placement/sim.h"

namespace migd::bench {

// "B1" ... "B11", "B11s"; nullptr for an unknown name.
std::unique_ptr<Policy> MakeBaseline(std::string_view name);
// Every baseline name MakeBaseline knows, in report order.
std::vector<std::string> BaselineNames();
// Names of the baselines the goals compare against (B1–B10).
bool IsComparedBaseline(std::string_view name);

// B5's geometry list for a table: pair sets in configured order (HAMi legacy:
// 8-unit {7×1g}, {1g+3×2g}, {2×3g}, {7g}; 4-unit {4×1g}, {2×2g}, {4g}).
std::vector<uint32_t> TemplateGeometries(const GpuTable& table);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_BASELINES_H_
