// File: bench/latency/latency_model.h
//
// LatencyModel: what each NVML call costs in the latency benchmark, per
// function, in milliseconds. The models are configuration, not code: they
// are read from bench/latency/latency-models.json (the published A100
// figures, a lower per-call estimate from the same data, and HAMi's 1.5 s
// claim; docs/benchmarks/latency.md says how each was derived). A GPU
// hardware run adds its measured model to that file.
//
// A model is applied two ways: the simulated library sleeps per call
// (MIGD_SIM_LATENCY_MS, whole milliseconds), or a zero-latency run is
// projected: wall time + Σ over the NVML calls made of the model's cost
// (ModeledMs; exact, since the rig runs one operation at a time).
//
// Thread-safety: value types; LoadLatencyModels is a plain function.
#ifndef MIGD_BENCH_LATENCY_LATENCY_MODEL_H_
#define MIGD_BENCH_LATENCY_LATENCY_MODEL_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace migd::bench::latency {

// (function, result) -> count; as driver::sim_testing::CallCounts.
using CallCounts = std::map<std::pair<std::string, std::string>, uint64_t>;

struct LatencyModel {
  std::string name = "zero";
  std::string source;  // where the figures come from
  std::map<std::string, double> ms;

  static LatencyModel Zero();
  // "nvmlGpuInstanceDestroy=120,..." (MIGD_SIM_LATENCY_MS syntax, each value
  // rounded to whole milliseconds); empty for a model of zeros.
  std::string EnvValue() const;
  // Σ calls × cost over `delta`, in milliseconds.
  double ModeledMs(const CallCounts& delta) const;
  // The cost of one GI + CI create and of one CI + GI destroy.
  double CreateMs() const;
  double DestroyMs() const;
};

// Reads every model of `path` ({"models": [{"name", "source", "method",
// "ms": {function: ms}}]}). kInvalidArgument (file, JSON pointer, what was
// expected) for a malformed file, a negative or non-finite cost, a function
// name that is not an NVML one ("nvml" prefix), or a duplicate name; kNotFound
// if the file is missing.
StatusOr<std::vector<LatencyModel>> LoadLatencyModels(const std::string& path);

// The model named `name` ("zero" always exists); kNotFound naming the choices.
StatusOr<LatencyModel> FindLatencyModel(const std::vector<LatencyModel>& models,
                                        const std::string& name);

}  // namespace migd::bench::latency

#endif  // MIGD_BENCH_LATENCY_LATENCY_MODEL_H_
