// File: bench/latency/churn_bound.h
//
// The offline reference for churn (docs/benchmarks/latency.md, "Churn against
// its bound"): the fewest GI creates (= CI creates: one CI per GI) that any
// policy could make on a workload's request sequence, knowing the whole
// future, under migd's placement rules (bench/placement's GpuTable: the legal
// layouts of mig::Layout, instance caps and engine budget included).
//
// The problem. Every served allocation needs, for its whole life, one
// instance of each profile it asks for, each at one legal (GPU, placement).
// An instance exists from its create to its destroy; while no allocation
// holds it, it is Idle and may be reused by a later allocation of its
// profile at no cost, or destroyed at no cost (destroys are not counted).
// At every instant the instances of a GPU (held and Idle) form a legal
// layout. Cost: the number of creates.
//
// Two computations, each exact for what it solves:
//   RelaxedLowerBound   the repack relaxation: positions are forgotten and
//                       the instances of the node may be re-packed for free
//                       at every instant, so a state is the vector of Idle
//                       instances per profile; a multiset is allowed iff it
//                       fits the node's GPUs in legal layouts
//                       (MultisetPacker). Every real schedule is a schedule
//                       of the relaxation with the same creates, so its
//                       optimum (a dynamic programme over the sequence,
//                       exact) is a lower bound on the real optimum.
//   PositionalSearch    the real problem: per GPU the placement of every
//                       held instance and the set of Idle ones. A forward
//                       dynamic programme over the sequence with the
//                       dominance rule "same held placements, a superset of
//                       Idle instances on every GPU, no more creates" (an
//                       Idle instance can always be destroyed for free), GPUs
//                       interchangeable (states are canonicalised). When the
//                       frontier never exceeds `max_states` the result is the
//                       exact optimum; otherwise the best `max_states` states
//                       (fewest creates, then most Idle slices) are kept and
//                       the result is the cost of a feasible schedule, an
//                       upper bound on the optimum.
// So LB <= OPT <= UB, and OPT = UB when the search was exact.
//
// Benchmark only (bench/ is not linked into migd).
//
// Thread-safety: plain functions.
#ifndef MIGD_BENCH_LATENCY_CHURN_BOUND_H_
#define MIGD_BENCH_LATENCY_CHURN_BOUND_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/latency/policy.h"
#include "bench/placement/table.h"

namespace migd::bench::latency {

// One event of the sequence, on profile classes of the table.
struct BoundEvent {
  bool allocate = true;
  int64_t id = 0;            // the allocation's id
  std::vector<int> classes;  // allocate: class per instance
};

struct BoundProblem {
  const GpuTable* table = nullptr;  // not owned
  int gpus = 1;
  std::vector<BoundEvent> events;  // in time order; releases of skipped ids dropped
  uint64_t allocations = 0;        // allocations in `events`
  uint64_t instances = 0;          // instances they ask for
};

// The GPU count of `w` (w.gpus is "<model>:<n>" with the table's model, n in
// 1..8) and the table class of profile `name`; kInvalidArgument naming the
// workload otherwise.
StatusOr<int> WorkloadGpus(const GpuTable& table, const Workload& w);
StatusOr<int> WorkloadClass(const GpuTable& table, const Workload& w, const std::string& name);

// Builds the problem of `w` on `table` (w.gpus must be "<model>:<n>" with the
// table's model), leaving out the allocations in `skip` (with their
// releases): those a policy could not serve. kInvalidArgument for a profile
// the table lacks or a GPU count outside 1..8.
StatusOr<BoundProblem> MakeBoundProblem(const GpuTable& table, const Workload& w,
                                        const std::set<int64_t>& skip);

struct RelaxedResult {
  uint64_t creates = 0;     // optimum of the relaxation: a lower bound
  uint64_t peak_sum = 0;    // Σ_p peak concurrency of p (a weaker bound, for reference)
  uint64_t max_states = 0;  // largest frontier
};
// kFailedPrecondition if an allocation cannot be placed even with the node
// re-packed (the sequence is not servable).
StatusOr<RelaxedResult> RelaxedLowerBound(const BoundProblem& problem);

struct PositionalResult {
  bool feasible = false;    // some schedule served every allocation
  bool exact = false;       // no state was ever dropped: creates is the optimum
  uint64_t creates = 0;     // with feasible: the best schedule's creates
  uint64_t max_states = 0;  // largest frontier (after pruning)
};
PositionalResult PositionalSearch(const BoundProblem& problem, size_t max_states);

}  // namespace migd::bench::latency

#endif  // MIGD_BENCH_LATENCY_CHURN_BOUND_H_
