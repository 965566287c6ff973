// File: bench/latency/online_bound.h
//
// The online reference for churn (docs/benchmarks/latency.md, "Churn against
// what an online policy can reach"). The offline bound (churn_bound.h) knows
// the future; migd does not. This computes what knowing the demand, but not
// the future, is worth: the fewest GI creates per request that any policy can
// expect when single-instance requests of class p arrive as a Poisson process
// of rate λ_p and live exponentially (mean 1 time unit) — churn-steady is such
// a workload. load[p] = λ_p · mean lifetime.
//
// The model is the repack relaxation of the node (repack.h), as a
// continuous-time Markov decision process. A state is (active, idle): the
// instances per class held by requests and the Idle ones, fitting the node
// re-packed. On an arrival of class p a policy may reuse an Idle p (free),
// create (one create; before it, destroy any Idle instances so that the node
// still fits; destroys are free), or refuse (price `refusal_price`); on a
// departure the instance becomes Idle. Destroying earlier, or creating ahead
// of demand (a warm pool), never lowers the creates: each can be postponed to
// the next create that needs the room or the first use of the instance, with
// the same creates and a node that fits. Every real policy, whatever it knows
// of the past, maps onto a policy of this process with the same creates and
// refusals (forget positions), so the optimum here bounds it from below.
//
// Solved by relative value iteration on the uniformised chain. The optimal
// average cost lies in [cost_lower, cost_upper] (Odoni's bounds, valid after
// every sweep), so cost_lower is a lower bound even when the iteration stops
// early. For a refusal fraction r, every online policy refusing at most r of
// the requests has, in expectation over the long run, at least
//   max over prices μ of  cost_lower(μ) − μ · r
// creates per request (Lagrangian duality): CreatesLowerBound.
//
// Benchmark only. Thread-safety: an OnlineModel is used by one thread.
#ifndef MIGD_BENCH_LATENCY_ONLINE_BOUND_H_
#define MIGD_BENCH_LATENCY_ONLINE_BOUND_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "bench/latency/repack.h"
#include "bench/placement/table.h"

namespace migd::bench::latency {

struct OnlineSolveOptions {
  double refusal_price = 1e3;  // μ, in creates
  double tolerance = 1e-7;     // stop when cost_upper - cost_lower (per request) is below
  int max_sweeps = 100000;
};

struct OnlineSolution {
  double refusal_price = 0;
  double cost_lower = 0;  // per request: creates + μ · refusals, optimal, bracketed
  double cost_upper = 0;
  // The stationary behaviour of the policy that is greedy in the final
  // values (optimal once the bracket has closed), per request.
  double creates = 0;
  double refusals = 0;
  int sweeps = 0;
  bool converged = false;  // the bracket closed within max_sweeps
};

struct CreatesBound {
  double creates = 0;  // per request: a lower bound for refusal fraction <= r
  double price = 0;    // the μ that gave it
  OnlineSolution at;   // the solution at that μ
};

class OnlineModel {
 public:
  // kInvalidArgument: `load` not one entry per class of the table, a
  // negative or non-finite entry, no positive entry, or gpus outside 1..8.
  // kResourceExhausted: more than `max_states` states.
  static StatusOr<OnlineModel> Build(const GpuTable& table, int gpus,
                                     const std::vector<double>& load,
                                     size_t max_states = 2'000'000);

  size_t num_states() const { return states_.size(); }

  // kInvalidArgument for a negative price or a non-positive tolerance.
  StatusOr<OnlineSolution> Solve(const OnlineSolveOptions& options) const;

  // The best bound over `prices` (each >= 0) for refusal fraction `r`.
  StatusOr<CreatesBound> CreatesLowerBound(double r, const std::vector<double>& prices,
                                           const OnlineSolveOptions& options) const;

 private:
  struct Option {
    uint32_t next = 0;
    bool create = false;
  };
  struct State {
    ClassCounts active{};
    ClassCounts idle{};
    int total_active = 0;
    std::vector<uint32_t> departure;           // per demand class k (a_k > 0), else unused
    std::vector<std::vector<Option>> arrival;  // per demand class k
  };

  OnlineModel() = default;
  // One sweep: th = T h, and per state the chosen option per class (-1:
  // refuse). Returns nothing; th and choice are filled.
  void Sweep(const std::vector<double>& h, double price, std::vector<double>& th,
             std::vector<int>& choice) const;
  // Stationary creates and refusals per request under `choice`.
  void Evaluate(const std::vector<int>& choice, double* creates, double* refusals) const;

  std::vector<int> cls_;      // demand class k -> table class
  std::vector<double> rate_;  // per demand class
  double total_rate_ = 0;
  double nu_ = 0;  // uniformisation rate
  std::vector<State> states_;
};

}  // namespace migd::bench::latency

#endif  // MIGD_BENCH_LATENCY_ONLINE_BOUND_H_
