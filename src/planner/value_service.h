// File: planner/value_service.h
//
// ValueService: learns the demand online and keeps a ValueTable per GPU
// model solved for it, recomputed in the background when the demand drifts
// (docs/planner.md, "The value policy"). Decisions never wait: Values()
// returns the last table solved (nullptr before the first; the planner then
// uses its cost order), and solves run on a SolveExecutor.
//
// What is learned, from ObserveArrival() (one call per request that arrived):
//   - the mix: per requested profile name, instances counted with decay (half
//     life `half_life_arrivals` requests);
//   - the offered load ρ per GPU: Poisson arrivals see time averages, so the
//     Active compute found at arrivals estimates the carried load; dividing
//     by the compute-weighted acceptance gives the offered load.
// Drift of the estimate from the one a table was solved for:
//   max(total variation distance of the mixes, |ρ − ρ₀| / (4 ρ₀)),
// with ρ and ρ₀ at least 0.05 (the least load a table is solved for),
// and a table is re-solved when it exceeds `drift_threshold` (or when a
// profile present on a GPU is not in it).
//
// Example:
//   auto values = std::make_shared<ValueService>(ValueOptions{},
//                                                 std::make_unique<BackgroundExecutor>());
//   planner::Planner planner({.values = values});
//   StatusOr<Plan> plan = planner.MakePlan(input);
//   planner.ObserveArrival(input, plan.ok());
//
// Thread-safety: thread-safe (one internal mutex); solves run on the
// executor's thread. The service copies every model it solves for, so models
// may change or go away after a call.
#ifndef MIGD_PLANNER_VALUE_SERVICE_H_
#define MIGD_PLANNER_VALUE_SERVICE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "mig/catalog.h"
#include "planner/demand_mix.h"
#include "planner/solve_executor.h"
#include "planner/value_table.h"

namespace migd::planner {

struct PlanInput;

// How the values order candidates on a node of several GPUs. On one GPU they
// always lead (the choice is then B11's, optimal).
enum class MultiGpuValues {
  // The cost order's node term, opened GPUs and pinned loss lead; the values
  // break their ties. The default: on the placement benchmark the separable
  // approximation trails the cost order by up to 5.4 pp count acceptance on
  // 2-8 GPUs (docs/benchmarks/placement-value.md).
  kTieBreak,
  // The values lead: Σ_g h(s_g), each GPU's table solved for its share λ/N.
  kSeparable,
};

struct ValueOptions {
  Objective objective = Objective::kCount;
  MultiGpuValues multi_gpu = MultiGpuValues::kTieBreak;
  double drift_threshold = 0.05;
  double half_life_arrivals = 2000;  // requests
  // No values before this many requests were observed (Prime() excepted).
  int64_t min_arrivals = 50;
  SolveOptions solve;
};

// What the service has learned.
struct DemandEstimate {
  DemandWeights mix;     // profile name -> decayed instance count (relative)
  double load = 0;       // offered load per GPU (ρ)
  int64_t arrivals = 0;  // requests observed (not decayed)
};

struct ValueServiceCounters {
  uint64_t solves = 0;          // tables solved
  uint64_t solve_failures = 0;  // solves refused (see ValueTable::Solve)
  uint64_t drift_solves = 0;    // solves started because the estimate drifted
  uint64_t version = 0;         // bumped for every table published
  int64_t last_solve_ns = 0;
  int64_t max_solve_ns = 0;
  int64_t total_solve_ns = 0;
  size_t max_bytes = 0;  // largest table
  size_t max_states = 0;
};

class ValueService {
 public:
  ValueService(ValueOptions options, std::unique_ptr<SolveExecutor> executor);
  ~ValueService();
  ValueService(const ValueService&) = delete;
  ValueService& operator=(const ValueService&) = delete;

  // Learns from one request that arrived: its profiles, the Active compute of
  // the node it saw, and whether it was placed. Then starts a solve for every
  // model of `input` whose table is missing or has drifted.
  void ObserveArrival(const PlanInput& input, bool placed);

  // Sets the estimate (as if learned) and starts a solve for every model of
  // `models`; for `migctl plan` and tests.
  void Prime(const DemandWeights& mix, double load,
             const std::vector<const mig::GpuModel*>& models);

  // The table for `model`, or nullptr. When `needed` (bit p = profile p of
  // the model is present or requested) is not covered by the table, a solve
  // including those profiles is started and nullptr returned.
  std::shared_ptr<const ValueTable> Values(const mig::GpuModel& model, uint32_t needed);

  // Starts / stops the executor (SolveExecutor::Start/Stop): the daemon
  // starts it after the engine is up and stops it before the engine goes.
  // After Stop() the last tables keep serving and no solve runs again.
  // Idempotent; must not be called from a solve.
  void Start();
  void Stop();

  const ValueOptions& options() const { return options_; }
  DemandEstimate estimate() const;
  ValueServiceCounters counters() const;

 private:
  struct Entry {
    std::shared_ptr<const mig::GpuModel> model;  // the copy solved for
    // The caller's model last found equal to `model` (a fast path: the
    // engine passes the same objects call after call).
    const mig::GpuModel* seen = nullptr;
    const mig::GiProfile* seen_profiles = nullptr;
    size_t seen_count = 0;
    std::shared_ptr<const ValueTable> table;  // last published; may be null
    DemandWeights mix;                        // normalised mix solved for
    double load = 0;
    uint32_t extra = 0;          // profiles kept without demand in `table`
    uint32_t pending_extra = 0;  // ... in the solve in flight
    bool in_flight = false;
    bool failed = false;        // the last solve was refused (retried on drift)
    uint32_t failed_extra = 0;  // its extra profiles
  };

  // The estimate's normalised mix and load.
  DemandWeights NormalisedMixLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double LoadLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double DriftLocked(const Entry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Entry& EntryLocked(const mig::GpuModel& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartSolveLocked(Entry& e, uint32_t extra) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Publish(const std::string& key, const std::shared_ptr<const mig::GpuModel>& model,
               StatusOr<std::shared_ptr<const ValueTable>> table);

  const ValueOptions options_;
  mutable Mutex mu_;
  // Decayed sums.
  DemandWeights counts_ ABSL_GUARDED_BY(mu_);
  double active_fraction_sum_ ABSL_GUARDED_BY(mu_) = 0;
  double weight_sum_ ABSL_GUARDED_BY(mu_) = 0;
  double offered_compute_ ABSL_GUARDED_BY(mu_) = 0;
  double placed_compute_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t arrivals_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);  // by model key
  ValueServiceCounters counters_ ABSL_GUARDED_BY(mu_);
  // Last: destroyed first, so no solve runs while the members above go away.
  std::unique_ptr<SolveExecutor> executor_;
};

}  // namespace migd::planner

#endif  // MIGD_PLANNER_VALUE_SERVICE_H_
