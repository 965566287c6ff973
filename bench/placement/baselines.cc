#include "bench/placement/baselines.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>
#include <utility>

#include "bench/placement/mdp.h"

namespace migd::bench {
namespace {

using States = std::vector<int>;

struct Pick {
  int gpu = 0;
  int pair = 0;
};

Decision CreateDecision(const std::vector<Pick>& picks) {
  Decision d;
  for (size_t k = 0; k < picks.size(); ++k) {
    d.ops.push_back({OpKind::kCreate, picks[k].gpu, picks[k].pair, static_cast<int>(k)});
  }
  return d;
}

// Baselines without Idle instances: a per-instance rule over per-GPU states.
class RulePolicy : public Policy {
 public:
  Status Reset(const RunContext& ctx) override {
    ctx_ = ctx;
    table_ = ctx.table;
    return OnReset();
  }

  std::optional<Decision> Decide(const ClusterState& cs, const Request& req) override {
    States st(cs.num_gpus());
    for (int g = 0; g < cs.num_gpus(); ++g) st[g] = cs.gpus[g].state;
    if (req.profiles.size() == 1) {
      std::optional<Pick> p = PickOne(st, req.profiles[0], -1);
      if (!p) return std::nullopt;
      return CreateDecision({*p});
    }
    if (req.same_gpu) {
      for (int g : GpuOrder(st)) {
        std::optional<std::vector<int>> pairs = PlaceOnGpu(st, g, req.profiles);
        if (!pairs) continue;
        std::vector<Pick> picks;
        for (int pair : *pairs) picks.push_back({g, pair});
        return CreateDecision(picks);
      }
      return std::nullopt;
    }
    std::optional<std::vector<Pick>> picks = PlaceAnywhere(st, req.profiles);
    if (!picks) return std::nullopt;
    return CreateDecision(*picks);
  }

 protected:
  virtual Status OnReset() { return OkStatus(); }
  // The rule for one instance; only_gpu >= 0 restricts the GPU.
  virtual std::optional<Pick> PickOne(const States& st, int profile, int only_gpu) = 0;
  // GPU order for same-GPU requests.
  virtual std::vector<int> GpuOrder(const States& st) const {
    std::vector<int> order(st.size());
    std::iota(order.begin(), order.end(), 0);
    return order;
  }
  // All instances on GPU g, in request order, rolled back on failure.
  virtual std::optional<std::vector<int>> PlaceOnGpu(const States& st, int g,
                                                     const std::vector<int>& profiles) {
    States tmp = st;
    std::vector<int> pairs;
    for (int p : profiles) {
      std::optional<Pick> pick = PickOne(tmp, p, g);
      if (!pick) return std::nullopt;
      tmp[g] = t().Add(tmp[g], pick->pair);
      pairs.push_back(pick->pair);
    }
    return pairs;
  }
  // Instance by instance on any GPU; all or nothing.
  virtual std::optional<std::vector<Pick>> PlaceAnywhere(const States& st,
                                                         const std::vector<int>& profiles) {
    States tmp = st;
    std::vector<Pick> picks;
    for (int p : profiles) {
      std::optional<Pick> pick = PickOne(tmp, p, -1);
      if (!pick) return std::nullopt;
      tmp[pick->gpu] = t().Add(tmp[pick->gpu], pick->pair);
      picks.push_back(*pick);
    }
    return picks;
  }

  const GpuTable& t() const { return *table_; }
  int first_gpu(const States& /*st*/, int only_gpu) const { return only_gpu >= 0 ? only_gpu : 0; }
  int end_gpu(const States& st, int only_gpu) const {
    return only_gpu >= 0 ? only_gpu + 1 : static_cast<int>(st.size());
  }

  RunContext ctx_;
  const GpuTable* table_ = nullptr;
};

// B1, B2, B3: a fixed start order per profile.
class OrderPolicy : public RulePolicy {
 public:
  enum Kind { kLow, kHigh, kHami };
  explicit OrderPolicy(Kind kind) : kind_(kind) {}
  std::string name() const override { return kind_ == kLow ? "B1" : kind_ == kHigh ? "B2" : "B3"; }

 protected:
  Status OnReset() override {
    order_.clear();
    for (const ProfileClass& pc : t().profiles()) {
      std::vector<int> o = pc.pairs;  // ascending start
      const bool descending =
          kind_ == kHigh ||
          (kind_ == kHami && (pc.key.rfind("1g", 0) == 0 || pc.key.rfind("3g", 0) == 0));
      if (descending) std::reverse(o.begin(), o.end());
      order_.push_back(std::move(o));
    }
    return OkStatus();
  }
  std::optional<Pick> PickOne(const States& st, int profile, int only_gpu) override {
    for (int g = first_gpu(st, only_gpu); g < end_gpu(st, only_gpu); ++g) {
      if (!(t().state(st[g]).placeable >> profile & 1u)) continue;
      for (int pair : order_[profile]) {
        if (t().Add(st[g], pair) >= 0) return Pick{g, pair};
      }
    }
    return std::nullopt;
  }

 private:
  Kind kind_;
  std::vector<std::vector<int>> order_;
};

// B8: fullest GPU that can host, then highest legal start.
class BestFitPolicy : public RulePolicy {
 public:
  std::string name() const override { return "B8"; }

 protected:
  std::optional<Pick> PickOne(const States& st, int profile, int only_gpu) override {
    int best = -1;
    for (int g = first_gpu(st, only_gpu); g < end_gpu(st, only_gpu); ++g) {
      if (!(t().state(st[g]).placeable >> profile & 1u)) continue;
      if (best < 0 || t().state(st[g]).compute > t().state(st[best]).compute) best = g;
    }
    if (best < 0) return std::nullopt;
    const std::vector<int>& pairs = t().profile(profile).pairs;
    for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) {
      if (t().Add(st[best], *it) >= 0) return Pick{best, *it};
    }
    return std::nullopt;
  }
  std::vector<int> GpuOrder(const States& st) const override {
    std::vector<int> order(st.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return t().state(st[a]).compute > t().state(st[b]).compute;
    });
    return order;
  }
};

// B9: FGD adapted to MIG. F(s) = free(s) · Σ_p w_p·[p not placeable in s].
class FgdPolicy : public RulePolicy {
 public:
  std::string name() const override { return "B9"; }

 protected:
  Status OnReset() override {
    f_.assign(t().num_states(), 0.0);
    for (int s = 0; s < t().num_states(); ++s) {
      const StateInfo& si = t().state(s);
      double unplaceable = 0;
      for (int p = 0; p < t().num_profiles(); ++p) {
        if (!(si.placeable >> p & 1u)) unplaceable += ctx_.class_weights[p];
      }
      f_[s] = (t().compute_slices() - si.compute) * unplaceable;
    }
    return OkStatus();
  }
  std::optional<Pick> PickOne(const States& st, int profile, int only_gpu) override {
    std::optional<Pick> best;
    double best_delta = 0;
    for (int g = first_gpu(st, only_gpu); g < end_gpu(st, only_gpu); ++g) {
      if (!(t().state(st[g]).placeable >> profile & 1u)) continue;
      for (int pair : t().profile(profile).pairs) {
        const int next = t().Add(st[g], pair);
        if (next < 0) continue;
        const double delta = f_[next] - f_[st[g]];
        if (!best || delta < best_delta - 1e-12) {
          best = Pick{g, pair};
          best_delta = delta;
        }
      }
    }
    return best;
  }

 private:
  std::vector<double> f_;
};

// B10: exhaustive myopic. Maximise Σ_p w_p·[p placeable on some GPU after];
// ties: more legal pairs in total, then lower GPU, lower start. Joint for
// multi-instance requests.
class ExhaustivePolicy : public RulePolicy {
 public:
  std::string name() const override { return "B10"; }

 protected:
  Status OnReset() override {
    w_.assign(t().num_profiles(), 0);
    for (int p = 0; p < t().num_profiles(); ++p) {
      w_[p] = std::llround(ctx_.class_weights[p] * 1e9);
    }
    return OkStatus();
  }
  int64_t Value(uint32_t mask) const {
    int64_t v = 0;
    for (int p = 0; p < t().num_profiles(); ++p) {
      if (mask >> p & 1u) v += w_[p];
    }
    return v;
  }
  std::optional<Pick> PickOne(const States& st, int profile, int only_gpu) override {
    const int n = static_cast<int>(st.size());
    std::vector<uint32_t> prefix(n + 1, 0), suffix(n + 1, 0);
    int64_t legal_total = 0;
    for (int g = 0; g < n; ++g) {
      prefix[g + 1] = prefix[g] | t().state(st[g]).placeable;
      legal_total += t().state(st[g]).legal_pairs;
    }
    for (int g = n - 1; g >= 0; --g) suffix[g] = suffix[g + 1] | t().state(st[g]).placeable;
    std::optional<Pick> best;
    std::pair<int64_t, int64_t> best_key{0, 0};
    for (int g = first_gpu(st, only_gpu); g < end_gpu(st, only_gpu); ++g) {
      if (!(t().state(st[g]).placeable >> profile & 1u)) continue;
      const uint32_t others = prefix[g] | suffix[g + 1];
      for (int pair : t().profile(profile).pairs) {
        const int next = t().Add(st[g], pair);
        if (next < 0) continue;
        const std::pair<int64_t, int64_t> key{
            Value(others | t().state(next).placeable),
            legal_total - t().state(st[g]).legal_pairs + t().state(next).legal_pairs};
        if (!best || key > best_key) {
          best = Pick{g, pair};
          best_key = key;
        }
      }
    }
    return best;
  }
  std::optional<std::vector<Pick>> PlaceAnywhere(const States& st,
                                                 const std::vector<int>& profiles) override {
    States tmp = st;
    std::vector<Pick> cur, best;
    std::pair<int64_t, int64_t> best_key{-1, -1};
    Dfs(tmp, profiles, 0, -1, cur, best, best_key);
    if (best.empty()) return std::nullopt;
    return best;
  }

 public:
  std::optional<Decision> Decide(const ClusterState& cs, const Request& req) override {
    if (req.profiles.size() == 1 || !req.same_gpu) return RulePolicy::Decide(cs, req);
    // Same-GPU: joint over the GPU choice too.
    States st(cs.num_gpus());
    for (int g = 0; g < cs.num_gpus(); ++g) st[g] = cs.gpus[g].state;
    std::vector<Pick> cur, best;
    std::pair<int64_t, int64_t> best_key{-1, -1};
    for (int g = 0; g < cs.num_gpus(); ++g) Dfs(st, req.profiles, 0, g, cur, best, best_key);
    if (best.empty()) return std::nullopt;
    return CreateDecision(best);
  }

 private:
  void Dfs(States& st, const std::vector<int>& profiles, size_t k, int only_gpu,
           std::vector<Pick>& cur, std::vector<Pick>& best, std::pair<int64_t, int64_t>& best_key) {
    if (k == profiles.size()) {
      uint32_t mask = 0;
      int64_t legal = 0;
      for (int s : st) {
        mask |= t().state(s).placeable;
        legal += t().state(s).legal_pairs;
      }
      const std::pair<int64_t, int64_t> key{Value(mask), legal};
      if (best.empty() || key > best_key) {
        best = cur;
        best_key = key;
      }
      return;
    }
    const int p = profiles[k];
    for (int g = first_gpu(st, only_gpu); g < end_gpu(st, only_gpu); ++g) {
      for (int pair : t().profile(p).pairs) {
        // Identical consecutive instances: canonical order only.
        if (k > 0 && profiles[k - 1] == p &&
            std::make_pair(g, pair) < std::make_pair(cur.back().gpu, cur.back().pair)) {
          continue;
        }
        const int next = t().Add(st[g], pair);
        if (next < 0) continue;
        const int old = st[g];
        st[g] = next;
        cur.push_back({g, pair});
        Dfs(st, profiles, k + 1, only_gpu, cur, best, best_key);
        cur.pop_back();
        st[g] = old;
      }
    }
  }

  std::vector<int64_t> w_;
};

// B4a / B4b: HAMi PR #2855 scoring with a most-constrained-first DFS.
class HamiPrPolicy : public RulePolicy {
 public:
  explicit HamiPrPolicy(bool merged) : merged_(merged) {}
  std::string name() const override { return merged_ ? "B4b" : "B4a"; }

 protected:
  static constexpr int kBudget = 4096;

  Status OnReset() override {
    // Regions (B4b).
    int slices = 0;
    for (const PairInfo& pi : t().pairs()) slices = std::max<int>(slices, pi.start + pi.size);
    slices_ = slices;
    mid_ = slices / 2;
    split_ = true;
    for (const PairInfo& pi : t().pairs()) {
      if (static_cast<int>(pi.size) < slices && static_cast<int>(pi.start) < mid_ &&
          static_cast<int>(pi.start + pi.size) > mid_) {
        split_ = false;
      }
    }
    int in_low = 0, in_high = 0;
    for (const PairInfo& pi : t().pairs()) {
      if (static_cast<int>(pi.start + pi.size) <= mid_) ++in_low;
      if (static_cast<int>(pi.start) >= mid_) ++in_high;
    }
    reserved_high_ = in_high <= in_low;  // ties -> the later region
    low_mask_ = (1u << mid_) - 1u;
    high_mask_ = ((1u << slices) - 1u) & ~low_mask_;
    pair_key_.assign(t().num_pairs(), {0, 0});
    for (int i = 0; i < t().num_pairs(); ++i) {
      const PairInfo& pi = t().pair(i);
      const int start = static_cast<int>(pi.start), end = static_cast<int>(pi.start + pi.size);
      int mismatch = 0, edge = 0;
      if (split_) {
        if (end <= mid_) {
          mismatch = ((end - start) == mid_) != !reserved_high_ ? 1 : 0;
          edge = mid_ - end;
        } else if (start >= mid_) {
          mismatch = ((end - start) == slices - mid_) != reserved_high_ ? 1 : 0;
          edge = start - mid_;
        }
      }
      pair_key_[i] = {mismatch, edge};
    }
    return OkStatus();
  }

  // Larger is better.
  std::tuple<int, int, int, int> Score(int s, int pair) const {
    const int next = t().Add(s, pair);
    const StateInfo& n = t().state(next);
    const int start = static_cast<int>(t().pair(pair).start);
    if (!merged_) return {n.largest_free_run, n.legal_pairs, -start, 0};
    if (!split_) return {0, 0, 0, -start};
    const int empty = ((n.mask & low_mask_) == 0 ? 1 : 0) + ((n.mask & high_mask_) == 0 ? 1 : 0);
    return {empty, -pair_key_[pair].first, pair_key_[pair].second, -start};
  }

  std::vector<int> Ranked(int s, int profile) const {
    std::vector<int> c;
    for (int pair : t().profile(profile).pairs) {
      if (t().Add(s, pair) >= 0) c.push_back(pair);
    }
    std::stable_sort(c.begin(), c.end(), [&](int a, int b) { return Score(s, a) > Score(s, b); });
    return c;
  }

  std::optional<Pick> PickOne(const States& st, int profile, int only_gpu) override {
    for (int g = first_gpu(st, only_gpu); g < end_gpu(st, only_gpu); ++g) {
      if (!(t().state(st[g]).placeable >> profile & 1u)) continue;
      std::vector<int> c = Ranked(st[g], profile);
      if (!c.empty()) return Pick{g, c.front()};
    }
    return std::nullopt;
  }

  std::optional<std::vector<int>> PlaceOnGpu(const States& st, int g,
                                             const std::vector<int>& profiles) override {
    if (merged_) {
      int need = 0;
      for (int p : profiles) need += t().profile(p).memory;
      if (need > slices_ - __builtin_popcount(t().state(st[g]).mask & ((1u << slices_) - 1u))) {
        return std::nullopt;
      }
    }
    std::vector<int> assignment(profiles.size(), -1);
    int tries = 0;
    if (Dfs(st[g], profiles, assignment, &tries)) return assignment;
    return std::nullopt;
  }

 private:
  bool Dfs(int s, const std::vector<int>& profiles, std::vector<int>& assignment, int* tries) {
    int next_k = -1, next_free = 0;
    for (size_t k = 0; k < profiles.size(); ++k) {
      if (assignment[k] >= 0) continue;
      int free = 0;
      for (int pair : t().profile(profiles[k]).pairs) free += t().Add(s, pair) >= 0 ? 1 : 0;
      bool better = next_k < 0 || free < next_free;
      if (merged_ && next_k >= 0 && free == next_free) {
        const ProfileClass& a = t().profile(profiles[k]);
        const ProfileClass& b = t().profile(profiles[next_k]);
        better = a.memory != b.memory ? a.memory > b.memory : a.key < b.key;
      }
      if (better) {
        next_k = static_cast<int>(k);
        next_free = free;
      }
    }
    if (next_k < 0) return true;
    for (int pair : Ranked(s, profiles[next_k])) {
      if (++*tries > kBudget) return false;
      assignment[next_k] = pair;
      if (Dfs(t().Add(s, pair), profiles, assignment, tries)) return true;
      assignment[next_k] = -1;
    }
    return false;
  }

  bool merged_;
  int slices_ = 8, mid_ = 4;
  bool split_ = true, reserved_high_ = true;
  uint32_t low_mask_ = 0, high_mask_ = 0;
  std::vector<std::pair<int, int>> pair_key_;  // (zoneMismatch, edgeDistance)
};

// ---- B5 / B6: policies with pre-created (Idle) instances ----

// A request instance by instance on a scratch copy; instance k's ops are
// remapped to request instance k. Same-GPU requests try GPUs in index order.
template <typename F>
std::optional<Decision> SequentialDecide(const ClusterState& cs, const Request& req, F&& one) {
  auto attempt = [&](int only_gpu) -> std::optional<Decision> {
    if (req.profiles.size() == 1) return one(cs, req.profiles[0], only_gpu);
    ClusterState scratch = cs;
    Decision total;
    OpCounters ignored;
    for (size_t k = 0; k < req.profiles.size(); ++k) {
      std::optional<Decision> d = one(scratch, req.profiles[k], only_gpu);
      if (!d) return std::nullopt;
      Request single;
      single.id = req.id;
      single.profiles = {req.profiles[k]};
      if (!ApplyDecision(scratch, single, *d, &ignored).ok()) return std::nullopt;
      for (Op op : d->ops) {
        if (op.kind == OpKind::kCreate || op.kind == OpKind::kReuse)
          op.instance = static_cast<int>(k);
        total.ops.push_back(op);
      }
      total.clears += d->clears;
      total.plugin_restarts = std::max(total.plugin_restarts, d->plugin_restarts);
    }
    return total;
  };
  if (!req.same_gpu) return attempt(-1);
  for (int g = 0; g < cs.num_gpus(); ++g) {
    if (std::optional<Decision> d = attempt(g)) return d;
  }
  return std::nullopt;
}

bool Fits(const GpuTable& t, int requested, int got) {
  return t.profile(got).compute >= t.profile(requested).compute &&
         t.profile(got).memory >= t.profile(requested).memory;
}

// The slot of `pairs` (a pair set) for `profile`: exact class at the lowest
// start, else the smallest fitting class; -1 if none. `usable` filters pairs.
template <typename U>
int SlotFor(const GpuTable& t, uint32_t pairs, int profile, U&& usable) {
  int best = -1;
  for (int i = 0; i < t.num_pairs(); ++i) {
    if (!(pairs >> i & 1u) || !usable(i)) continue;
    const int got = t.pair(i).profile;
    if (!Fits(t, profile, got)) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const int bp = t.pair(best).profile;
    const auto key = [&](int p) {
      return std::make_tuple(p != profile, t.profile(p).memory, t.profile(p).compute);
    };
    if (key(got) < key(bp)) best = i;
  }
  return best;
}

// Destroys every Idle instance of GPU g, then creates `target` minus the
// Active pairs, handing `slot` to the request.
Decision Repartition(const ClusterState& cs, int g, uint32_t target, int slot) {
  const GpuTable& t = *cs.table;
  Decision d;
  for (const Instance& inst : cs.gpus[g].instances) {
    if (inst.idle) d.ops.push_back({OpKind::kDestroy, g, inst.pair, -1});
  }
  const uint32_t active = t.state(cs.gpus[g].active_state).pair_set;
  for (int i = 0; i < t.num_pairs(); ++i) {
    if (!(target >> i & 1u) || (active >> i & 1u)) continue;
    d.ops.push_back({i == slot ? OpKind::kCreate : OpKind::kCreateIdle, g, i, i == slot ? 0 : -1});
  }
  return d;
}

class TemplatePolicy : public Policy {
 public:
  std::string name() const override { return "B5"; }
  bool KeepsIdle() const override { return true; }
  Status Reset(const RunContext& ctx) override {
    table_ = ctx.table;
    templates_ = TemplateGeometries(*table_);
    if (templates_.empty()) return InvalidArgumentError("B5: no template geometry for this model");
    return OkStatus();
  }
  std::optional<Decision> Decide(const ClusterState& cs, const Request& req) override {
    return SequentialDecide(
        cs, req, [this](const ClusterState& s, int p, int only) { return One(s, p, only); });
  }

 private:
  std::optional<Decision> One(const ClusterState& cs, int profile, int only_gpu) const {
    const GpuTable& t = *table_;
    const int lo = only_gpu >= 0 ? only_gpu : 0;
    const int hi = only_gpu >= 0 ? only_gpu + 1 : cs.num_gpus();
    for (int g = lo; g < hi; ++g) {
      const GpuState& gs = cs.gpus[g];
      const uint32_t all = t.state(gs.state).pair_set;
      if (gs.active_state != t.empty_state()) {
        // Geometry locked: a free slot of it.
        const int slot = SlotFor(t, all, profile, [&](int i) {
          const Instance* inst = gs.Find(i);
          return inst != nullptr && inst->idle;
        });
        if (slot < 0) continue;
        Decision d;
        d.ops.push_back({OpKind::kReuse, g, slot, 0});
        return d;
      }
      // No Active instance: the first geometry containing the profile
      // (else the first with a larger fitting slot).
      int chosen = -1, slot = -1;
      for (int pass = 0; pass < 2 && chosen < 0; ++pass) {
        for (size_t k = 0; k < templates_.size(); ++k) {
          const int s = SlotFor(t, templates_[k], profile,
                                [&](int i) { return pass == 1 || t.pair(i).profile == profile; });
          if (s >= 0) {
            chosen = static_cast<int>(k);
            slot = s;
            break;
          }
        }
      }
      if (chosen < 0) return std::nullopt;  // no geometry can ever host it
      if (templates_[chosen] == all) {
        Decision d;
        d.ops.push_back({OpKind::kReuse, g, slot, 0});
        return d;
      }
      Decision d = Repartition(cs, g, templates_[chosen], slot);
      d.clears = gs.instances.empty() ? 0 : 1;
      return d;
    }
    return std::nullopt;
  }

  const GpuTable* table_ = nullptr;
  std::vector<uint32_t> templates_;
};

class NosPolicy : public Policy {
 public:
  std::string name() const override { return "B6"; }
  bool KeepsIdle() const override { return true; }
  Status Reset(const RunContext& ctx) override {
    table_ = ctx.table;
    return OkStatus();
  }
  std::optional<Decision> Decide(const ClusterState& cs, const Request& req) override {
    return SequentialDecide(
        cs, req, [this](const ClusterState& s, int p, int only) { return One(s, p, only); });
  }

 private:
  std::optional<Decision> One(const ClusterState& cs, int profile, int only_gpu) const {
    const GpuTable& t = *table_;
    const int lo = only_gpu >= 0 ? only_gpu : 0;
    const int hi = only_gpu >= 0 ? only_gpu + 1 : cs.num_gpus();
    // A free device of the profile: the pod is scheduled onto it.
    for (int g = lo; g < hi; ++g) {
      for (const Instance& inst : cs.gpus[g].instances) {
        if (inst.idle && t.pair(inst.pair).profile == profile) {
          Decision d;
          d.ops.push_back({OpKind::kReuse, g, inst.pair, 0});
          return d;
        }
      }
    }
    // Re-partition the first GPU with an allowed geometry (a maximal layout)
    // that keeps its used devices and provides the lacking profile; ties by
    // the layouts' lexicographic order.
    for (int g = lo; g < hi; ++g) {
      const uint32_t active = t.state(cs.gpus[g].active_state).pair_set;
      for (int m : t.maximal_states()) {
        const uint32_t set = t.state(m).pair_set;
        if ((set & active) != active) continue;
        int slot = -1;
        for (int pair : t.profile(profile).pairs) {
          if ((set >> pair & 1u) && !(active >> pair & 1u)) {
            slot = pair;
            break;
          }
        }
        if (slot < 0) continue;
        Decision d = Repartition(cs, g, set, slot);
        d.plugin_restarts = 1;
        return d;
      }
    }
    return std::nullopt;
  }

  const GpuTable* table_ = nullptr;
};

}  // namespace

std::vector<uint32_t> TemplateGeometries(const GpuTable& t) {
  std::vector<std::vector<std::pair<std::string, uint32_t>>> specs;
  if (t.memory_slices() == 8) {
    specs = {
        {{"1g", 0}, {"1g", 1}, {"1g", 2}, {"1g", 3}, {"1g", 4}, {"1g", 5}, {"1g", 6}},
        {{"2g", 0}, {"2g", 2}, {"2g", 4}, {"1g", 6}},
        {{"3g", 0}, {"3g", 4}},
        {{"7g", 0}},
    };
  } else if (t.memory_slices() == 4) {
    specs = {{{"1g", 0}, {"1g", 1}, {"1g", 2}, {"1g", 3}}, {{"2g", 0}, {"2g", 2}}, {{"4g", 0}}};
  } else if (t.memory_slices() == 12) {
    specs = {{{"1g", 0}, {"1g", 3}, {"1g", 6}, {"1g", 9}}, {{"2g", 0}, {"2g", 6}}, {{"4g", 0}}};
  }
  std::vector<uint32_t> out;
  for (const auto& spec : specs) {
    uint32_t set = 0;
    bool ok = true;
    for (const auto& [key, start] : spec) {
      const int pair = t.PairOf(t.FindProfile(key), start);
      if (pair < 0) {
        ok = false;
        break;
      }
      set |= 1u << pair;
    }
    if (ok && t.StateOf(set) >= 0) out.push_back(set);
  }
  return out;
}

std::vector<std::string> BaselineNames() {
  return {"B1", "B2", "B3", "B4a", "B4b", "B5", "B6", "B8", "B9", "B10", "B11", "B11s"};
}

bool IsComparedBaseline(std::string_view name) {
  return name == "B1" || name == "B2" || name == "B3" || name == "B4a" || name == "B4b" ||
         name == "B5" || name == "B6" || name == "B8" || name == "B9" || name == "B10";
}

std::unique_ptr<Policy> MakeBaseline(std::string_view name) {
  if (name == "B1") return std::make_unique<OrderPolicy>(OrderPolicy::kLow);
  if (name == "B2") return std::make_unique<OrderPolicy>(OrderPolicy::kHigh);
  if (name == "B3") return std::make_unique<OrderPolicy>(OrderPolicy::kHami);
  if (name == "B4a") return std::make_unique<HamiPrPolicy>(false);
  if (name == "B4b") return std::make_unique<HamiPrPolicy>(true);
  if (name == "B5") return std::make_unique<TemplatePolicy>();
  if (name == "B6") return std::make_unique<NosPolicy>();
  if (name == "B8") return std::make_unique<BestFitPolicy>();
  if (name == "B9") return std::make_unique<FgdPolicy>();
  if (name == "B10") return std::make_unique<ExhaustivePolicy>();
  if (name == "B11") return MakeMdpPolicy(false);
  if (name == "B11s") return MakeMdpPolicy(true);
  return nullptr;
}

}  // namespace migd::bench
