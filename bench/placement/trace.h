// File: bench/placement/trace.h
//
// The Alibaba cluster-trace-gpu-v2023 pod lists (data/alibaba-gpu-v2023/,
// provenance in data/README.md) as request sequences for the placement
// benchmark: the CSV reader, the gpu_milli -> profile mappings, and the
// replay (trace order from a seed-dependent start, lifetimes from the trace
// capped at a quantile, Poisson or compressed trace arrival times at the
// offered load asked for).
//
// Thread-safety: plain functions and value types.
#ifndef MIGD_BENCH_PLACEMENT_TRACE_H_
#define MIGD_BENCH_PLACEMENT_TRACE_H_

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bench/placement/table.h"
#include "bench/placement/workload.h"

namespace migd::bench {

struct TracePod {
  std::string name;
  int num_gpu = 0;
  int gpu_milli = 0;
  std::string phase;   // Running, Succeeded, Failed, Pending; "" without the column
  bool timed = false;  // the file has creation_time and deletion_time
  int64_t creation = 0;
  int64_t deletion = 0;
  std::optional<int64_t> scheduled;  // empty for Pending pods and without the column
};

// Parses the CSV of any pod list of the dataset: a header is required and
// columns are found by name (extra columns ignored). name, num_gpu and
// gpu_milli are required; creation_time and deletion_time together make the
// pods timed (the multigpu* lists of the dataset have neither, nor pod_phase
// or scheduled_time); pod_phase and scheduled_time are read when present.
// kInvalidArgument names the line or column at fault.
StatusOr<std::vector<TracePod>> ParseAlibabaCsv(std::istream& in);
StatusOr<std::vector<TracePod>> ReadAlibabaCsv(const std::string& path);

enum class TraceMapping { kComputeCeil, kMemoryEighths };
StatusOr<TraceMapping> ParseTraceMapping(std::string_view name);
std::string_view TraceMappingName(TraceMapping m);

// Single-GPU share -> profile class key:
//   compute-ceil:   k = ceil(milli·7/1000); smallest of 1g,2g,3g,4g,7g with c_p ≥ k;
//   memory-eighths: k = ceil(milli·8/1000); smallest of 1g(1),2g(2),3g(4),7g(8) with m_p ≥ k.
// nullopt for milli ≤ 0; milli > 1000 maps like 1000.
std::optional<std::string> MapGpuMilli(int gpu_milli, TraceMapping mapping);

enum class TraceArrivals { kPoisson, kTrace };
StatusOr<TraceArrivals> ParseTraceArrivals(std::string_view name);

struct TraceSpec {
  TraceMapping mapping = TraceMapping::kComputeCeil;
  TraceArrivals arrivals = TraceArrivals::kPoisson;
  bool include_multi_gpu = true;        // k-GPU pods as k×7g (k ≤ GPUs); else skipped
  double lifetime_cap_quantile = 0.99;  // cap lifetimes at this quantile of single-GPU pods
  // Untimed pods: lifetimes drawn from this distribution (mean 1).
  LifetimeDist lifetime = LifetimeDist::kExponential;
  double load = 0.9;
  int gpus = 8;
  int events = 10000;
  uint64_t seed = 1;
};

// What the trace offers after filtering (for the report).
struct TraceSummary {
  int pods = 0, cpu_only = 0, single_gpu = 0, multi_gpu_used = 0, multi_gpu_skipped = 0;
  int pending = 0;
  bool timed = true;  // lifetimes from the trace (else drawn)
  double lifetime_cap = 0;
  std::vector<int> per_class;  // single-GPU pods per table class
};

// Pods with num_gpu ≥ 1 in creation order (ties by name; file order for
// untimed pods) as requests: profile by `mapping`; lifetime = deletion −
// creation (≥ 1 s; Pending rows included: offered load that waited until
// deletion), capped, or drawn from `spec.lifetime` for untimed pods; a k-GPU
// pod is a gang of k×7g (any GPUs, all or nothing). Starts at a seed-dependent
// row and wraps. Arrivals: Poisson at the rate giving `load` (kPoisson), or
// the trace's own creation gaps compressed to give `load` (kTrace; timed
// pods only, else kInvalidArgument).
StatusOr<std::vector<Request>> BuildTraceRequests(const GpuTable& table,
                                                  const std::vector<TracePod>& pods,
                                                  const TraceSpec& spec,
                                                  TraceSummary* summary = nullptr);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_TRACE_H_
