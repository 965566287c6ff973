// File: bench/placement/runner.h
//
// The experiment matrix of placement_bench: cells (workload × load × GPUs) ×
// seeds × policies, run on worker threads, each (cell, seed) generating its
// request sequence once and running every policy on it (common random
// numbers); then per-cell summaries with 95% confidence intervals of paired
// (per-seed) differences, written as JSON (summary.h).
//
// Thread-safety: RunMatrix is called from one thread; it owns its workers.
#ifndef MIGD_BENCH_PLACEMENT_RUNNER_H_
#define MIGD_BENCH_PLACEMENT_RUNNER_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/placement/planner_policy.h"
#include "bench/placement/sim.h"
#include "bench/placement/stats.h"
#include "bench/placement/trace.h"
#include "bench/placement/workload.h"

namespace migd::bench {

struct MatrixSpec {
  std::string model = "a100-40gb";
  std::vector<std::string> policies;  // "migd", "migd-noidle", "B1".."B11", "B12", "B14"
  std::vector<std::string> mixes;     // synthetic (ignored with a trace or script)
  std::vector<double> loads;
  std::vector<int> gpus;
  int seeds = 10;
  uint64_t seed_base = 1;
  int events = 20000;
  LifetimeDist lifetime = LifetimeDist::kExponential;
  SimOptions sim;
  int jobs = 1;
  bool validate = false;
  PlannerPolicyOptions planner;
  // Trace workload (replaces mixes).
  std::optional<std::string> trace_path;
  TraceMapping trace_mapping = TraceMapping::kComputeCeil;
  TraceArrivals trace_arrivals = TraceArrivals::kPoisson;
  bool trace_multi_gpu = true;
  double trace_lifetime_cap = 0.99;
  // Adversarial script (replaces mixes, loads, GPUs; one seed).
  std::optional<std::string> script;
  bool progress = false;
};

// Allocator for a policy name, or nullptr if unknown.
std::unique_ptr<Allocator> MakeAllocator(const std::string& name,
                                         const PlannerPolicyOptions& planner, bool validate);
// Every policy name MakeAllocator knows.
std::vector<std::string> KnownPolicies();

// Runs the matrix; returns the results document (summary.h).
// kInvalidArgument on a bad spec, kInternal if a policy produced an illegal
// decision.
StatusOr<nlohmann::json> RunMatrix(const MatrixSpec& spec);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_RUNNER_H_
