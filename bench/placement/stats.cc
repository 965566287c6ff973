#include "bench/placement/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace migd::bench {

using Json = nlohmann::json;

double TQuantile975(int df) {
  static const double kTable[] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                                  2.306, 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                  2.120, 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                                  2.064, 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (df <= 0) return 0;
  if (df <= 30) return kTable[df];
  return 1.959964 + 2.4 / df;
}

MeanCi Summarise(const std::vector<double>& x) {
  MeanCi m;
  m.n = static_cast<int>(x.size());
  if (x.empty()) return m;
  m.mean = std::accumulate(x.begin(), x.end(), 0.0) / m.n;
  if (m.n < 2) return m;
  double ss = 0;
  for (double v : x) ss += (v - m.mean) * (v - m.mean);
  const double sd = std::sqrt(ss / (m.n - 1));
  m.half_width = TQuantile975(m.n - 1) * sd / std::sqrt(static_cast<double>(m.n));
  return m;
}

Json MeanCiJson(const std::vector<double>& x) {
  const MeanCi m = Summarise(x);
  return Json{{"mean", m.mean}, {"ci", m.half_width}, {"n", m.n}, {"values", x}};
}

Json PairedJson(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> d;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) d.push_back(x[i] - y[i]);
  const MeanCi m = Summarise(d);
  return Json{{"mean", m.mean}, {"ci", m.half_width}, {"n", m.n}};
}

void LatHist::Add(int64_t ns) {
  const double x = std::log10(static_cast<double>(std::max<int64_t>(ns, 1)));
  const size_t b = std::min<size_t>(bins_.size() - 1, static_cast<size_t>(x * kPerDecade));
  ++bins_[b];
  ++n_;
  max_ = std::max(max_, ns);
}

void LatHist::Merge(const LatHist& o) {
  for (size_t i = 0; i < bins_.size(); ++i) bins_[i] += o.bins_[i];
  n_ += o.n_;
  max_ = std::max(max_, o.max_);
}

double LatHist::Quantile(double q) const {
  if (n_ == 0) return 0;
  const uint64_t target = static_cast<uint64_t>(std::ceil(q * static_cast<double>(n_)));
  uint64_t acc = 0;
  for (size_t i = 0; i < bins_.size(); ++i) {
    acc += bins_[i];
    if (acc >= std::max<uint64_t>(target, 1)) {
      return std::min(std::pow(10.0, static_cast<double>(i + 1) / kPerDecade),
                      static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);
}

Json LatHist::ToJson() const {
  return Json{{"n", n_}, {"p50_ns", Quantile(0.5)}, {"p99_ns", Quantile(0.99)}, {"max_ns", max_}};
}

Json LatHist::Cdf() const {
  Json out = Json::array();
  uint64_t acc = 0;
  for (size_t i = 0; i < bins_.size(); ++i) {
    if (bins_[i] == 0) continue;
    acc += bins_[i];
    out.push_back(Json::array({std::pow(10.0, static_cast<double>(i + 1) / kPerDecade),
                               static_cast<double>(acc) / static_cast<double>(n_)}));
  }
  return out;
}

}  // namespace migd::bench
