// File: bench/placement/stats.h
//
// Statistics of the placement benchmark: the 95% confidence interval of a
// mean (Student t, used on paired per-seed differences under common random
// numbers) and a log-spaced latency histogram with quantiles and a CDF.
//
// Thread-safety: value types and pure functions.
#ifndef MIGD_BENCH_PLACEMENT_STATS_H_
#define MIGD_BENCH_PLACEMENT_STATS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace migd::bench {

// Two-sided 95% Student t quantile for `df` degrees of freedom.
double TQuantile975(int df);

struct MeanCi {
  double mean = 0;
  double half_width = 0;  // 95% CI = mean ± half_width (0 with one sample)
  int n = 0;
};
MeanCi Summarise(const std::vector<double>& x);

// {"mean", "ci", "n", "values"} of `x`.
nlohmann::json MeanCiJson(const std::vector<double>& x);
// {"mean", "ci", "n"} of the paired differences x[i] - y[i].
nlohmann::json PairedJson(const std::vector<double>& x, const std::vector<double>& y);

// Log-spaced latency histogram: 100 bins per decade from 1 ns.
class LatHist {
 public:
  void Add(int64_t ns);
  void Merge(const LatHist& o);
  // Upper edge of the bin holding quantile q (ns), at most the maximum seen.
  double Quantile(double q) const;
  // {"n", "p50_ns", "p99_ns", "max_ns"}.
  nlohmann::json ToJson() const;
  // [[upper edge ns, cumulative fraction], ...] over non-empty bins.
  nlohmann::json Cdf() const;
  uint64_t n() const { return n_; }

 private:
  static constexpr int kPerDecade = 100;
  std::vector<uint64_t> bins_ = std::vector<uint64_t>(10 * kPerDecade, 0);
  uint64_t n_ = 0;
  int64_t max_ = 0;
};

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_STATS_H_
