#include "bench/latency/online_bound.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "base/status_macros.h"

namespace migd::bench::latency {
namespace {

using Key = std::pair<ClassCounts, ClassCounts>;

// Table-class counts of demand-class counts.
ClassCounts ToTable(const ClassCounts& demand, const std::vector<int>& cls) {
  ClassCounts t{};
  for (size_t k = 0; k < cls.size(); ++k) t[cls[k]] = demand[k];
  return t;
}

ClassCounts FromTable(const ClassCounts& table, const std::vector<int>& cls) {
  ClassCounts d{};
  for (size_t k = 0; k < cls.size(); ++k) d[k] = table[cls[k]];
  return d;
}

// Every count vector over the demand classes that fits the node (Fits is
// downward closed: a count that does not fit ends its class's loop).
void FittingCounts(RepackedNode& node, const std::vector<int>& cls, size_t k, ClassCounts& c,
                   std::vector<ClassCounts>& out) {
  if (k == cls.size()) {
    out.push_back(c);
    return;
  }
  for (c[k] = 0;; ++c[k]) {
    if (!node.Fits(ToTable(c, cls), ClassCounts{})) break;
    FittingCounts(node, cls, k + 1, c, out);
  }
  c[k] = 0;
}

}  // namespace

StatusOr<OnlineModel> OnlineModel::Build(const GpuTable& table, int gpus,
                                         const std::vector<double>& load, size_t max_states) {
  if (gpus < 1 || gpus > 8) {
    return InvalidArgumentError("online bound: 1..8 GPUs, got " + std::to_string(gpus));
  }
  if (load.size() != static_cast<size_t>(table.num_profiles())) {
    return InvalidArgumentError("online bound: " + std::to_string(load.size()) +
                                " loads for a table of " + std::to_string(table.num_profiles()) +
                                " classes");
  }
  OnlineModel m;
  for (size_t p = 0; p < load.size(); ++p) {
    if (!std::isfinite(load[p]) || load[p] < 0) {
      return InvalidArgumentError("online bound: the load of class " + table.profile(p).key +
                                  " must be a finite number >= 0");
    }
    if (load[p] > 0) {
      m.cls_.push_back(static_cast<int>(p));
      m.rate_.push_back(load[p]);
      m.total_rate_ += load[p];
    }
  }
  if (m.cls_.empty()) return InvalidArgumentError("online bound: no class has demand");
  const size_t K = m.cls_.size();
  RepackedNode node(table, gpus);
  std::vector<ClassCounts> counts;
  ClassCounts c{};
  FittingCounts(node, m.cls_, 0, c, counts);

  std::map<Key, uint32_t> index;
  for (const ClassCounts& total : counts) {
    ClassCounts a{};
    // Every split active + idle = total.
    while (true) {
      State s;
      s.active = a;
      for (size_t k = 0; k < K; ++k) {
        s.idle[k] = total[k] - a[k];
        s.total_active += a[k];
      }
      if (m.states_.size() >= max_states) {
        return ResourceExhaustedError("online bound: more than " + std::to_string(max_states) +
                                      " states");
      }
      index.emplace(Key{s.active, s.idle}, static_cast<uint32_t>(m.states_.size()));
      m.states_.push_back(std::move(s));
      size_t k = 0;
      while (k < K && a[k] == total[k]) a[k++] = 0;
      if (k == K) break;
      ++a[k];
    }
  }
  // The empty state is first: counts and splits start at zero.
  int max_active = 0;
  std::vector<ClassCounts> subsets;
  for (State& s : m.states_) {
    max_active = std::max(max_active, s.total_active);
    s.departure.assign(K, 0);
    s.arrival.resize(K);
    for (size_t k = 0; k < K; ++k) {
      if (s.active[k] > 0) {
        ClassCounts a = s.active, i = s.idle;
        --a[k];
        ++i[k];
        s.departure[k] = index.at(Key{a, i});
      }
      ClassCounts after = s.active;
      ++after[k];
      std::vector<Option>& opts = s.arrival[k];
      if (s.idle[k] > 0) {
        ClassCounts i = s.idle;
        --i[k];
        opts.push_back({index.at(Key{after, i}), false});
      }
      subsets.clear();
      node.MaximalIdleSubsets(ToTable(after, m.cls_), ToTable(s.idle, m.cls_), subsets);
      for (const ClassCounts& j : subsets) {
        const uint32_t next = index.at(Key{after, FromTable(j, m.cls_)});
        if (std::none_of(opts.begin(), opts.end(),
                         [&](const Option& o) { return o.create && o.next == next; })) {
          opts.push_back({next, true});
        }
      }
    }
  }
  // Strictly above every state's outflow: every state has a self-loop, so
  // the uniformised chain is aperiodic.
  m.nu_ = 1.05 * (m.total_rate_ + max_active);
  return m;
}

void OnlineModel::Sweep(const std::vector<double>& h, double price, std::vector<double>& th,
                        std::vector<int>& choice) const {
  const size_t K = cls_.size();
  for (size_t s = 0; s < states_.size(); ++s) {
    const State& st = states_[s];
    double sum = (nu_ - total_rate_ - st.total_active) * h[s];
    for (size_t k = 0; k < K; ++k) {
      if (st.active[k] > 0) sum += st.active[k] * h[st.departure[k]];
      double best = price + h[s];
      int pick = -1;
      const std::vector<Option>& opts = st.arrival[k];
      for (size_t o = 0; o < opts.size(); ++o) {
        const double v = (opts[o].create ? 1.0 : 0.0) + h[opts[o].next];
        if (v < best) {
          best = v;
          pick = static_cast<int>(o);
        }
      }
      sum += rate_[k] * best;
      choice[s * K + k] = pick;
    }
    th[s] = sum / nu_;
  }
}

void OnlineModel::Evaluate(const std::vector<int>& choice, double* creates,
                           double* refusals) const {
  const size_t K = cls_.size();
  const size_t n = states_.size();
  std::vector<double> pi(n, 0.0), next(n);
  pi[0] = 1.0;
  for (int sweep = 0; sweep < 1'000'000; ++sweep) {
    std::fill(next.begin(), next.end(), 0.0);
    for (size_t s = 0; s < n; ++s) {
      if (pi[s] == 0) continue;
      const State& st = states_[s];
      const double p = pi[s] / nu_;
      double stay = nu_ - total_rate_ - st.total_active;
      for (size_t k = 0; k < K; ++k) {
        if (st.active[k] > 0) next[st.departure[k]] += p * st.active[k];
        const int c = choice[s * K + k];
        if (c < 0) {
          stay += rate_[k];
        } else {
          next[st.arrival[k][static_cast<size_t>(c)].next] += p * rate_[k];
        }
      }
      next[s] += p * stay;
    }
    double diff = 0;
    for (size_t s = 0; s < n; ++s) diff += std::abs(next[s] - pi[s]);
    pi.swap(next);
    if (diff < 1e-13) break;
  }
  *creates = 0;
  *refusals = 0;
  for (size_t s = 0; s < n; ++s) {
    for (size_t k = 0; k < K; ++k) {
      const int c = choice[s * K + k];
      const double share = pi[s] * rate_[k] / total_rate_;  // PASTA
      if (c < 0) {
        *refusals += share;
      } else if (states_[s].arrival[k][static_cast<size_t>(c)].create) {
        *creates += share;
      }
    }
  }
}

StatusOr<OnlineSolution> OnlineModel::Solve(const OnlineSolveOptions& options) const {
  if (!(options.refusal_price >= 0) || !std::isfinite(options.refusal_price)) {
    return InvalidArgumentError("online bound: the refusal price must be a finite number >= 0");
  }
  if (!(options.tolerance > 0)) {
    return InvalidArgumentError("online bound: the tolerance must be > 0");
  }
  const size_t n = states_.size();
  std::vector<double> h(n, 0.0), th(n);
  std::vector<int> choice(n * cls_.size(), -1);
  OnlineSolution sol;
  sol.refusal_price = options.refusal_price;
  // Per-step gain to per-request cost.
  const double scale = nu_ / total_rate_;
  for (sol.sweeps = 1; sol.sweeps <= options.max_sweeps; ++sol.sweeps) {
    Sweep(h, options.refusal_price, th, choice);
    double lo = th[0] - h[0], hi = lo;
    for (size_t s = 0; s < n; ++s) {
      lo = std::min(lo, th[s] - h[s]);
      hi = std::max(hi, th[s] - h[s]);
    }
    sol.cost_lower = lo * scale;
    sol.cost_upper = hi * scale;
    const double ref = th[0];
    for (size_t s = 0; s < n; ++s) h[s] = th[s] - ref;
    if (sol.cost_upper - sol.cost_lower < options.tolerance) {
      sol.converged = true;
      break;
    }
  }
  sol.sweeps = std::min(sol.sweeps, options.max_sweeps);
  Evaluate(choice, &sol.creates, &sol.refusals);
  return sol;
}

StatusOr<CreatesBound> OnlineModel::CreatesLowerBound(double r, const std::vector<double>& prices,
                                                      const OnlineSolveOptions& options) const {
  if (prices.empty()) return InvalidArgumentError("online bound: no refusal price given");
  if (!(r >= 0 && r <= 1)) {
    return InvalidArgumentError("online bound: the refusal fraction must be in [0, 1]");
  }
  CreatesBound best;
  bool first = true;
  for (double price : prices) {
    OnlineSolveOptions o = options;
    o.refusal_price = price;
    MIGD_ASSIGN_OR_RETURN(OnlineSolution sol, Solve(o));
    const double bound = sol.cost_lower - price * r;
    if (first || bound > best.creates) {
      best = CreatesBound{bound, price, sol};
      first = false;
    }
  }
  best.creates = std::max(best.creates, 0.0);
  return best;
}

}  // namespace migd::bench::latency
