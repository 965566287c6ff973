// File: bench/latency/sections.h
//
// The sections of latency_bench, each run and written as Markdown:
//   ops        per operation (reuse, create, reclaim+create, release) at zero
//              latency with the record store synced and not, projected under
//              every scenario model, then (full runs) with the simulator
//              sleeping per the first model; the speed-up of reuse per model;
//   policies   the four policies on churn-steady, churn (bursts) and the
//              Alibaba mix: counts, time to ready under each scenario model,
//              and GI creates against the offline bound (churn_bound.h);
//   recovery   Manager::Create with G full GPUs;
//   footprint  RSS and heap of an 8-GPU Manager.
//
// Thread-safety: plain functions, one at a time (the rig sets MIGD_SIM_*).
#ifndef MIGD_BENCH_LATENCY_SECTIONS_H_
#define MIGD_BENCH_LATENCY_SECTIONS_H_

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/latency/harness.h"
#include "bench/latency/latency_model.h"

namespace migd::bench::latency {

struct BenchConfig {
  RigOptions base;
  bool quick = false;
  // The scenarios, in order: the first is the primary one (time to ready,
  // the sleeping ops run); every one is projected.
  std::vector<LatencyModel> scenarios;
  std::string trace_dir;  // Alibaba openb_pod_list_*.csv; empty: no Alibaba workload
  int churn_allocations = 2000;
  int trace_allocations = 2000;
  uint64_t seed = 1;
  std::vector<int> recovery_gpus = {1, 2, 4, 8};
  size_t bound_states = 2000;  // PositionalSearch frontier limit
  // Policies to run (default: all); the bound table needs destroy-on-release,
  // lazy and lazy+warm and shows "-" for a missing one.
  std::vector<std::string> policies;
  std::string dat_path;  // time-to-ready data for gnuplot ("" = none)
};

Status WriteOpsSection(const BenchConfig& cfg, std::ostream& md);
Status WritePoliciesSection(const BenchConfig& cfg, std::ostream& md);
Status WriteRecoverySection(const BenchConfig& cfg, std::ostream& md);
Status WriteFootprintSection(const BenchConfig& cfg, std::ostream& md);

// "0.412", "12.3", "1502": milliseconds with a precision that suits them.
std::string FormatMs(double ms);

}  // namespace migd::bench::latency

#endif  // MIGD_BENCH_LATENCY_SECTIONS_H_
