// File: bench/placement/workload.h
//
// Request sequences for the placement benchmark: synthetic Poisson mixes
// (single- and multi-instance) and the deterministic adversarial scripts;
// the Alibaba trace replay is in trace.h.
//
// Common random numbers: a sequence depends only on (workload, load, GPUs,
// events, seed), never on the policy; every policy of a cell runs on the very
// same vector<Request>. Arrival gaps, profiles and lifetimes come from three
// independent streams, so for one seed the profile and lifetime sequences are
// also identical across loads (only the arrival rate changes).
//
// Time unit: the mean lifetime (synthetic) or seconds (trace).
//
// Thread-safety: plain functions and value types.
#ifndef MIGD_BENCH_PLACEMENT_WORKLOAD_H_
#define MIGD_BENCH_PLACEMENT_WORKLOAD_H_

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bench/placement/table.h"

namespace migd::bench {

struct Request {
  int64_t id = 0;  // position in the sequence
  double arrival = 0;
  double lifetime = 1;
  std::vector<int> profiles;  // profile class per instance, in request order
  bool same_gpu = false;      // all instances on one GPU (else any GPUs, all-or-nothing)
  int source = -1;            // trace row, or -1
};

// Σ c_p over the request's instances.
int RequestCompute(const GpuTable& table, const Request& r);

// Small deterministic PRNG (splitmix64-seeded xoshiro256**): same numbers on
// every platform, unlike std::*_distribution.
class Rng {
 public:
  // Independent streams of one seed: a sequence draws its arrival gaps,
  // profiles, lifetimes and trace start offset from separate streams.
  static constexpr uint64_t kArrivals = 1;
  static constexpr uint64_t kProfiles = 2;
  static constexpr uint64_t kLifetimes = 3;
  static constexpr uint64_t kOffset = 4;

  Rng(uint64_t seed, uint64_t stream);
  uint64_t Next();
  double Uniform();  // in (0, 1)
  double Exponential(double mean);
  double Normal();  // Box-Muller
  // Index drawn with probability weights[i] / Σ weights.
  int Pick(const std::vector<double>& weights);

 private:
  uint64_t s_[4];
};

struct Bundle {
  std::vector<std::string> profiles;  // class keys
  bool same_gpu = false;
  double weight = 1;
};

struct Mix {
  std::string name;
  std::vector<std::pair<std::string, double>> weights;  // single-instance class -> weight
  std::vector<Bundle> bundles;                          // multi-instance requests
  double bundle_fraction = 0;                           // share of arrivals that are bundles
  bool needs_double_memory = false;
};

// "uniform", "small-heavy", "no-7g", "large-heavy", "bimodal", "uniform-dm"
// (with the double-memory 1g), "multi" (uniform singles + 1/3 bundles), or an
// explicit "1g:6,2g:3,3g:1". kInvalidArgument otherwise.
StatusOr<Mix> ParseMix(std::string_view spec);
std::vector<std::string> NamedMixes();

enum class LifetimeDist { kExponential, kLognormal };
StatusOr<LifetimeDist> ParseLifetime(std::string_view name);
// One lifetime with mean 1: Exp(1), or the lognormal fitted to the Alibaba
// single-GPU lifetimes (median 544 s, p90 6,005 s) rescaled to mean 1.
double DrawLifetime(Rng& rng, LifetimeDist dist);

struct SyntheticSpec {
  Mix mix;
  double load = 0.9;  // ρ = offered compute / (7N) (compute_slices · N)
  int gpus = 1;
  int events = 10000;  // arrivals
  uint64_t seed = 1;
  LifetimeDist lifetime = LifetimeDist::kExponential;
};

// Poisson arrivals at the rate giving `load`, lifetimes with mean 1.
// kInvalidArgument if a mix class is not in `table`.
StatusOr<std::vector<Request>> GenerateSynthetic(const GpuTable& table, const SyntheticSpec& spec);

// Per-class arrival weights of a mix on `table` (single-instance part only),
// normalised to sum 1; what B9/B10/B11 and the fragmentation metric use as w_p.
std::vector<double> MixClassWeights(const GpuTable& table, const Mix& mix);

// Empirical class weights of a request sequence (instances counted).
std::vector<double> EmpiricalClassWeights(const GpuTable& table,
                                          const std::vector<Request>& requests);

// ---- Adversarial scripts ----
// "dra933": 1 GPU; 7×1g, requests 2, 3, 4, 6 (0-based) depart, then 3g arrives
//            (first-fit leaves 1g at 0, 1, 5, as in
//            kubernetes-sigs/dra-driver-nvidia-gpu issue 933).
// "reverse": 2 GPUs, no departures; 1g×6, 2g×3, 3g×2, 4g, 7g (reverse size order is
//            "small first"), then 4g, 3g, 7g.
// "churn4g": 1 GPU (queue mode); 1g churn around a waiting 4g.
StatusOr<std::vector<Request>> AdversarialScript(const GpuTable& table, std::string_view name,
                                                 int* gpus);
std::vector<std::string> AdversarialScripts();

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_WORKLOAD_H_
