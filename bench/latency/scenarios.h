// File: bench/latency/scenarios.h
//
// The per-operation, recovery and footprint parts of the latency benchmark,
// engine-level: engine::Manager over NvmlDriver and the simulated library,
// one operation at a time.
//
//   RunOps       (a) reuse of an Idle instance, (b) create in free space,
//                (c) reclaim-then-create, (d) release, on one H100-80GB:
//                wall time per operation, NVML calls and record fsyncs per
//                operation. Under a latency model the simulator really sleeps,
//                and the modeled time (zero-latency wall + model) is reported
//                next to the measured one.
//   RunRecovery  Manager::Create (store open + recovery) with G GPUs fully
//                partitioned (7 × 1g.10gb each; 4 Active, 3 Idle), records for
//                all; also a full restart (NVML session + store + Manager).
//   RunFootprint RSS and heap of this process with an 8-GPU Manager, and the
//                heap the planner keeps after planning on every GPU.
//
// Thread-safety: plain functions; one at a time (they set MIGD_SIM_*).
#ifndef MIGD_BENCH_LATENCY_SCENARIOS_H_
#define MIGD_BENCH_LATENCY_SCENARIOS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/latency/harness.h"

namespace migd::bench::latency {

struct OpsSpec {
  int reuse_reps = 2000;   // reuse and release
  int create_reps = 200;   // create in free space
  int reclaim_reps = 200;  // reclaim-then-create
};

struct OpResult {
  std::string op;     // "reuse", "create", "reclaim+create", "release"
  std::string model;  // the simulator's (sleeping) latency model
  bool store_sync = true;
  Summary wall;                   // measured, ms
  std::vector<double> wall_ms;    // per repetition
  std::vector<CallCounts> calls;  // per repetition: its NVML calls
  double nvml_calls = 0;          // per operation (mean)
  uint64_t nvml_calls_max = 0;
  double fsyncs = 0;        // record-store fsyncs per operation (mean)
  HwOps hw;                 // total over the reps
  std::string stage_check;  // the stage the engine reported ("" if as expected)

  // wall + `model` over each repetition's NVML calls (use with a zero-latency
  // run; a sleeping run already holds its model in `wall`).
  Summary Modeled(const LatencyModel& model) const;
};

// Runs the four operations on "h100-80gb:1" with the simulator sleeping
// per `sleep` (a fresh rig). kInternal if an operation does not take the
// expected path.
StatusOr<std::vector<OpResult>> RunOps(const RigOptions& base, const LatencyModel& sleep,
                                       const OpsSpec& spec);

struct RecoveryResult {
  int gpus = 0;
  int instances = 0;        // tracked after recovery (Active + Idle)
  Summary create_ms;        // store open + Manager::Create
  uint64_t nvml_calls = 0;  // per Manager::Create
  std::string nvml_by_function;
  double full_restart_ms = 0;  // NVML session open + store + Manager::Create
  uint64_t full_restart_nvml_calls = 0;
};

StatusOr<RecoveryResult> RunRecovery(const RigOptions& base, int gpus, int reps);

struct FootprintResult {
  uint64_t rss_kb_before = 0;           // process, before the rig
  uint64_t rss_kb_idle = 0;             // with an 8-GPU Manager, 56 instances
  uint64_t heap_rig_bytes = 0;          // heap held by driver + store + Manager
  uint64_t heap_planner_bytes = 0;      // heap kept after one Plan per GPU and profile
  uint64_t heap_after_1000_allocs = 0;  // growth over 1000 reuse allocations/releases
  double cpu_s_per_1000_reuse = 0;      // CPU seconds per 1000 allocate+release (reuse)
};

StatusOr<FootprintResult> RunFootprint(const RigOptions& base);

}  // namespace migd::bench::latency

#endif  // MIGD_BENCH_LATENCY_SCENARIOS_H_
