// File: bench/placement/mdp.h
//
// B11, the single-GPU MDP optimum: states =
// the table's legal layouts (298 / 723), Poisson arrivals λ_p per class,
// exponential lifetimes (rate 1), must accept when a legal placement exists,
// action = placement, reward 1 per acceptance (count) or c_p (slice-weighted:
// c_p / μ with μ = 1). Solved by uniformisation and relative value iteration.
// The optimal gain bounds every online policy on one GPU in expectation.
//
// Thread-safety: plain functions; the policy object is per thread.
#ifndef MIGD_BENCH_PLACEMENT_MDP_H_
#define MIGD_BENCH_PLACEMENT_MDP_H_

#include <memory>
#include <vector>

#include "bench/placement/sim.h"

namespace migd::bench {

struct MdpResult {
  double gain = 0;        // optimal average reward per mean lifetime
  double acceptance = 0;  // gain / offered (count: Σλ; slice: Σ λ_p c_p)
  std::vector<double> h;  // relative values, h[empty] = 0
  int iterations = 0;
  bool converged = false;
};

// `rates[p]` = λ_p per mean lifetime. REQUIRES: rates.size() == table.num_profiles().
MdpResult SolveSingleGpuMdp(const GpuTable& table, const std::vector<double>& rates,
                            bool slice_weighted, double tolerance = 1e-10,
                            int max_iterations = 200000);

// The average reward of a fixed deterministic policy, by its stationary
// distribution (`choice[s * P + p]` = pair chosen for class p in state s, or
// -1 when p cannot be placed). Used to check SolveSingleGpuMdp by brute force.
double EvaluateStationaryPolicy(const GpuTable& table, const std::vector<double>& rates,
                                bool slice_weighted, const std::vector<int>& choice);

// B11 as a policy (N = 1, single-instance requests): the placement maximising
// the relative value of the next state, count-optimal ("B11") or
// slice-weighted-optimal ("B11s"). Needs RunContext::class_rates.
std::unique_ptr<Policy> MakeMdpPolicy(bool slice_weighted);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_MDP_H_
