// File: bench/placement/summary.h
//
// The results document of placement_bench: the matrix's cells, the runs of
// one cell (every policy × seed on the same request sequences), and their
// JSON summary: per policy the mean ± CI of each metric, pooled per-profile
// acceptance, operations per accepted request, latency histograms; per cell
// the best compared baseline per metric, the paired differences of migd to
// every other policy, and the analytic single-GPU MDP optimum where defined.
//
// Thread-safety: plain functions and value types.
#ifndef MIGD_BENCH_PLACEMENT_SUMMARY_H_
#define MIGD_BENCH_PLACEMENT_SUMMARY_H_

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/placement/mdp.h"
#include "bench/placement/runner.h"
#include "bench/placement/sim.h"
#include "bench/placement/stats.h"
#include "bench/placement/trace.h"
#include "bench/placement/workload.h"

namespace migd::bench {

struct LatSet {
  LatHist single, multi, exhaustive, core_single, core_multi;
  void Add(const Allocator::Latencies& l);
  void Merge(const LatSet& o);
};

struct MatrixCell {
  std::string workload;  // mix name, "trace:<file>:<mapping>", "script:<name>"
  std::string kind;      // synthetic | trace | script
  Mix mix;
  double load = 0;
  int gpus = 1;
  const GpuTable* table = nullptr;
};

// Whether B11/B11s (and the analytic optimum) apply: synthetic
// single-instance mix, N = 1, exponential lifetimes.
bool B11Eligible(const MatrixSpec& spec, const MatrixCell& c);
// λ_p per mean lifetime of a single-instance synthetic mix.
std::vector<double> ClassRates(const MatrixCell& c);

// Every seed's run of one policy in one cell.
struct PolicyRuns {
  std::vector<std::optional<RunResult>> seeds;
  LatSet lat;
  double seconds = 0;
};

// The analytic optima per (workload, load), solved once.
using B11Cache = std::map<std::pair<std::string, double>, std::pair<MdpResult, MdpResult>>;

// The cell's JSON; `runs` is indexed like spec.policies.
nlohmann::json CellJson(const MatrixSpec& spec, const MatrixCell& c,
                        const std::vector<PolicyRuns>& runs, B11Cache& b11);

// The document's header fields (spec, tables, trace summary).
nlohmann::json DocHeader(const MatrixSpec& spec, int seeds, const std::map<bool, GpuTable>& tables,
                         const TraceSummary* trace_summary);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_SUMMARY_H_
