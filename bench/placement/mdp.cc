#include "bench/placement/mdp.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace migd::bench {

MdpResult SolveSingleGpuMdp(const GpuTable& t, const std::vector<double>& rates,
                            bool slice_weighted, double tolerance, int max_iterations) {
  const int S = t.num_states();
  const int P = t.num_profiles();
  const double total_rate = std::accumulate(rates.begin(), rates.end(), 0.0);
  const double uniform = total_rate + t.max_instances() + 1.0;
  std::vector<double> reward(P);
  double offered = 0;
  for (int p = 0; p < P; ++p) {
    reward[p] = slice_weighted ? t.profile(p).compute : 1.0;
    offered += rates[p] * reward[p];
  }
  // Transitions.
  std::vector<std::vector<std::vector<int>>> arrive(S, std::vector<std::vector<int>>(P));
  std::vector<std::vector<int>> depart(S);
  for (int s = 0; s < S; ++s) {
    for (int i = 0; i < t.num_pairs(); ++i) {
      if (t.state(s).pair_set >> i & 1u) {
        depart[s].push_back(t.Remove(s, i));
      } else if (const int n = t.Add(s, i); n >= 0) {
        arrive[s][t.pair(i).profile].push_back(n);
      }
    }
  }
  MdpResult r;
  std::vector<double> h(S, 0.0), th(S, 0.0);
  for (r.iterations = 1; r.iterations <= max_iterations; ++r.iterations) {
    double lo = 1e300, hi = -1e300;
    for (int s = 0; s < S; ++s) {
      double v = 0;
      for (int p = 0; p < P; ++p) {
        if (rates[p] <= 0) continue;
        if (arrive[s][p].empty()) {
          v += rates[p] * h[s];
        } else {
          double best = -1e300;
          for (int n : arrive[s][p]) best = std::max(best, reward[p] + h[n]);
          v += rates[p] * best;
        }
      }
      for (int n : depart[s]) v += h[n];
      v += (uniform - total_rate - static_cast<double>(depart[s].size())) * h[s];
      th[s] = v / uniform;
      lo = std::min(lo, th[s] - h[s]);
      hi = std::max(hi, th[s] - h[s]);
    }
    const double ref = th[t.empty_state()];
    for (int s = 0; s < S; ++s) h[s] = th[s] - ref;
    r.gain = uniform * 0.5 * (lo + hi);
    if ((hi - lo) * uniform < tolerance) {
      r.converged = true;
      break;
    }
  }
  r.h = std::move(h);
  r.acceptance = offered > 0 ? r.gain / offered : 0;
  return r;
}

double EvaluateStationaryPolicy(const GpuTable& t, const std::vector<double>& rates,
                                bool slice_weighted, const std::vector<int>& choice) {
  const int S = t.num_states();
  const int P = t.num_profiles();
  // Generator Q (row = from state); solve π Q = 0 with Σ π = 1.
  std::vector<std::vector<double>> q(S, std::vector<double>(S, 0.0));
  for (int s = 0; s < S; ++s) {
    for (int p = 0; p < P; ++p) {
      const int pair = choice[static_cast<size_t>(s) * P + p];
      if (pair >= 0 && rates[p] > 0) q[s][t.Add(s, pair)] += rates[p];
    }
    for (int i = 0; i < t.num_pairs(); ++i) {
      if (t.state(s).pair_set >> i & 1u) q[s][t.Remove(s, i)] += 1.0;
    }
    double out = 0;
    for (int n = 0; n < S; ++n) {
      if (n != s) out += q[s][n];
    }
    q[s][s] = -out;
  }
  // A = Qᵀ with the last row replaced by ones; A π = e_last.
  std::vector<std::vector<double>> a(S, std::vector<double>(S + 1, 0.0));
  for (int i = 0; i < S; ++i) {
    for (int j = 0; j < S; ++j) a[i][j] = q[j][i];
  }
  for (int j = 0; j < S; ++j) a[S - 1][j] = 1.0;
  a[S - 1][S] = 1.0;
  for (int c = 0; c < S; ++c) {
    int piv = c;
    for (int i = c + 1; i < S; ++i) {
      if (std::abs(a[i][c]) > std::abs(a[piv][c])) piv = i;
    }
    std::swap(a[c], a[piv]);
    if (std::abs(a[c][c]) < 1e-300) continue;
    for (int i = 0; i < S; ++i) {
      if (i == c) continue;
      const double f = a[i][c] / a[c][c];
      if (f == 0) continue;
      for (int j = c; j <= S; ++j) a[i][j] -= f * a[c][j];
    }
  }
  double gain = 0;
  for (int s = 0; s < S; ++s) {
    const double pi = std::abs(a[s][s]) < 1e-300 ? 0 : a[s][S] / a[s][s];
    for (int p = 0; p < P; ++p) {
      if (choice[static_cast<size_t>(s) * P + p] >= 0) {
        gain += pi * rates[p] * (slice_weighted ? t.profile(p).compute : 1.0);
      }
    }
  }
  return gain;
}

namespace {

class MdpPolicy : public Policy {
 public:
  explicit MdpPolicy(bool slice_weighted) : slice_(slice_weighted) {}
  std::string name() const override { return slice_ ? "B11s" : "B11"; }
  Status Reset(const RunContext& ctx) override {
    table_ = ctx.table;
    if (ctx.gpus != 1) return InvalidArgumentError("B11 is defined for one GPU only");
    if (ctx.class_rates.size() != static_cast<size_t>(table_->num_profiles())) {
      return InvalidArgumentError("B11 needs the per-class arrival rates (synthetic workloads)");
    }
    if (ctx.class_rates != rates_ || h_.empty()) {
      rates_ = ctx.class_rates;
      h_ = SolveSingleGpuMdp(*table_, rates_, slice_).h;
    }
    return OkStatus();
  }
  std::optional<Decision> Decide(const ClusterState& cs, const Request& req) override {
    if (req.profiles.size() != 1 || cs.num_gpus() != 1) return std::nullopt;
    const int s = cs.gpus[0].state;
    int best = -1;
    double best_h = 0;
    for (int pair : table_->profile(req.profiles[0]).pairs) {
      const int n = table_->Add(s, pair);
      if (n < 0) continue;
      if (best < 0 || h_[n] > best_h + 1e-12) {
        best = pair;
        best_h = h_[n];
      }
    }
    if (best < 0) return std::nullopt;
    Decision d;
    d.ops.push_back({OpKind::kCreate, 0, best, 0});
    return d;
  }

 private:
  bool slice_;
  const GpuTable* table_ = nullptr;
  std::vector<double> rates_;
  std::vector<double> h_;
};

}  // namespace

std::unique_ptr<Policy> MakeMdpPolicy(bool slice_weighted) {
  return std::make_unique<MdpPolicy>(slice_weighted);
}

}  // namespace migd::bench
