// File: bench/latency/policy.h
//
// The side-by-side part of the latency benchmark: one workload
// (a sequence of allocate / release operations) played against the same
// engine::Manager and simulated NVML library under four policies:
//
//   destroy-on-release  HAMi v2.10: Release, then destroy the released
//                       instances at once (Manager::Reclaim filtered by the
//                       instance's GPU and profile; under this policy no other
//                       Idle instance exists, so the filter is exact).
//   whole-gpu           mig-parted / nos: a GPU's layout is applied as a
//                       whole. An allocation that an Idle instance serves is a
//                       reuse; any other changes the layout of the GPU the
//                       planner picks: every non-Active instance on it is
//                       destroyed and the target layout (the new instance plus
//                       the destroyed Idle ones that still fit) is created
//                       before the pod is ready. Release leaves it Idle.
//   lazy                migd: Release -> Idle, reuse, reclaim under pressure.
//   lazy+warm           migd with ManagerOptions::warm_pool, filled by the
//                       reconciler pass (off the request path).
//
// Every policy gets the same reconciler passes (Manager::ReconcileOnce every
// 30 s of workload time, at most one between two operations); their NVML
// calls and GI/CI operations are reported apart from the request path.
//
// Time to ready = wall time of the allocation (whole-gpu: including the
// layout re-creation) with the simulator at zero latency, plus a latency
// model over the NVML calls it made (PolicyResult::ReadyMs).
//
// Thread-safety: plain functions.
#ifndef MIGD_BENCH_LATENCY_POLICY_H_
#define MIGD_BENCH_LATENCY_POLICY_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bench/latency/harness.h"

namespace migd::bench::latency {

struct Op {
  enum class Kind { kAllocate, kRelease };
  Kind kind = Kind::kAllocate;
  int64_t id = 0;                     // allocation id (request id "a<id>")
  std::vector<std::string> profiles;  // kAllocate: one instance per profile
  double time = 0;                    // workload seconds
};

struct Workload {
  std::string name;
  std::string gpus;                           // MIGD_SIM_GPUS
  std::vector<Op> ops;                        // in time order
  std::map<std::string, uint32_t> warm_pool;  // for lazy+warm
  // Offered concurrency per profile (arrival rate × mean lifetime) when the
  // workload is Markovian: one instance per request, Poisson arrivals per
  // profile, exponential lifetimes (online_bound.h). Empty otherwise.
  std::map<std::string, double> markov_load;
};

struct ChurnSpec {
  int allocations = 2000;  // total allocations (steady + bursts)
  uint64_t seed = 1;
  bool bursts = true;  // false: the steady part only ("churn-steady")
};
// Churn on 2 × H100-80GB: Poisson arrivals (0.7/s) of short-lived pods (mean
// 5 s, exponential) asking 1g.10gb / 2g.20gb / 3g.40gb with weights 6/3/1,
// plus (bursts) an autoscaling burst every 60 s: 6 × 1g.10gb within 1 s,
// living 20 s. Named "churn" with bursts, "churn-steady" without.
Workload ChurnWorkload(const ChurnSpec& spec);

struct TraceWorkloadSpec {
  std::string csv;         // openb_pod_list_*.csv
  int allocations = 2000;  // pods taken from the trace
  int gpus = 4;            // H100-80GB
  double load = 0.9;
  uint64_t seed = 1;
};
// The Alibaba cluster-trace-gpu-v2023 mix through bench/placement's loader
// (compute-ceil mapping, Poisson arrivals at `load`, k-GPU pods as k × 7g).
StatusOr<Workload> AlibabaWorkload(const TraceWorkloadSpec& spec);

enum class Policy { kDestroyOnRelease, kWholeGpu, kLazy, kLazyWarm };
std::string_view PolicyName(Policy p);
StatusOr<Policy> ParsePolicy(std::string_view name);
std::vector<Policy> AllPolicies();

struct PolicyResult {
  std::string workload;
  std::string policy;
  uint64_t allocations = 0;                // successful
  uint64_t failures = 0;                   // kResourceExhausted (skipped, with their release)
  std::set<int64_t> failed_ids;            // the allocations of `failures`
  std::map<std::string, uint64_t> stages;  // reuse / free / reclaim, per instance
  std::vector<double> wall_ms;             // per successful allocation, zero latency
  std::vector<CallCounts> alloc_calls;     // its NVML calls (same order)
  // GI/CI operations on the request path (allocations and releases).
  HwOps request_ops;
  // GI/CI operations of the reconciler passes (warm pool, drift checks).
  HwOps background_ops;
  uint64_t allocate_nvml_calls = 0;  // over successful allocations
  uint64_t release_nvml_calls = 0;
  uint64_t background_nvml_calls = 0;
  uint64_t reconcile_passes = 0;
  uint64_t record_fsyncs_per_reuse_sum = 0;  // fsyncs over reuse-only allocations
  uint64_t reuse_only_allocations = 0;
  uint64_t value_solves = 0;  // value-policy solves run (RigOptions::value_policy)
  double run_s = 0;

  // Time to ready per successful allocation under `model`: wall + the
  // model's cost over the allocation's NVML calls.
  std::vector<double> ReadyMs(const LatencyModel& model) const;
  // GI creates on the request path and in the background, per 1,000
  // successful allocations.
  double CreatesPer1000() const;
};

// Plays `w` under `p` on a fresh rig (`base` gives library, dir, sync;
// gpus and warm pool come from `w` and `p`). Errors other than
// kResourceExhausted from the engine abort the run.
StatusOr<PolicyResult> RunPolicy(const RigOptions& base, const Workload& w, Policy p);

}  // namespace migd::bench::latency

#endif  // MIGD_BENCH_LATENCY_POLICY_H_
