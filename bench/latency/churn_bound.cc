#include "bench/latency/churn_bound.h"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "base/status_macros.h"
#include "bench/latency/repack.h"
#include "mig/catalog.h"

namespace migd::bench::latency {

StatusOr<int> WorkloadGpus(const GpuTable& table, const Workload& w) {
  const size_t colon = w.gpus.find(':');
  if (colon == std::string::npos || w.gpus.substr(0, colon) != table.model().key) {
    return InvalidArgumentError("workload " + w.name + " runs on '" + w.gpus +
                                "', not on the table's model " + table.model().key);
  }
  const int gpus = std::atoi(w.gpus.c_str() + colon + 1);
  if (gpus < 1 || gpus > 8) {
    return InvalidArgumentError("workload " + w.name + ": 1..8 GPUs, got '" + w.gpus + "'");
  }
  return gpus;
}

StatusOr<int> WorkloadClass(const GpuTable& table, const Workload& w, const std::string& name) {
  const mig::GiProfile* gi = table.model().FindProfileByName(name);
  const int c = gi == nullptr ? -1 : table.FindProfile(ProfileClassKey(*gi));
  if (c < 0) {
    return InvalidArgumentError("workload " + w.name + ": profile " + name +
                                " is not a class of the " + table.model().key + " table");
  }
  return c;
}

StatusOr<BoundProblem> MakeBoundProblem(const GpuTable& table, const Workload& w,
                                        const std::set<int64_t>& skip) {
  BoundProblem bp;
  bp.table = &table;
  MIGD_ASSIGN_OR_RETURN(bp.gpus, WorkloadGpus(table, w));
  std::map<std::string, int> class_of;
  for (const Op& op : w.ops) {
    if (skip.count(op.id) != 0) continue;
    BoundEvent e;
    e.allocate = op.kind == Op::Kind::kAllocate;
    e.id = op.id;
    for (const std::string& name : op.profiles) {
      auto it = class_of.find(name);
      if (it == class_of.end()) {
        MIGD_ASSIGN_OR_RETURN(const int c, WorkloadClass(table, w, name));
        it = class_of.emplace(name, c).first;
      }
      e.classes.push_back(it->second);
    }
    if (e.allocate) {
      ++bp.allocations;
      bp.instances += e.classes.size();
    }
    bp.events.push_back(std::move(e));
  }
  return bp;
}

namespace {

using Vec = ClassCounts;

struct CountState {
  Vec idle{};
  uint64_t cost = 0;
};

bool Geq(const Vec& a, const Vec& b, int n) {
  for (int p = 0; p < n; ++p) {
    if (a[p] < b[p]) return false;
  }
  return true;
}

// Keeps the states no other state dominates (no more creates, at least as
// many Idle instances of every class); one of equal ones.
std::vector<CountState> PruneCounts(std::vector<CountState> v, int n) {
  std::sort(v.begin(), v.end(), [](const CountState& a, const CountState& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    return a.idle > b.idle;
  });
  std::vector<CountState> out;
  for (const CountState& s : v) {
    bool dominated = false;
    for (const CountState& k : out) {
      if (k.cost <= s.cost && Geq(k.idle, s.idle, n)) {
        dominated = true;
        break;
      }
    }
    if (!dominated) out.push_back(s);
  }
  return out;
}

}  // namespace

StatusOr<RelaxedResult> RelaxedLowerBound(const BoundProblem& bp) {
  const int n = bp.table->num_profiles();
  RepackedNode relaxed(*bp.table, bp.gpus);
  RelaxedResult res;
  std::unordered_map<int64_t, std::vector<int>> live;
  Vec active{}, peak{};
  std::vector<CountState> frontier(1);
  std::vector<Vec> subsets;
  for (const BoundEvent& e : bp.events) {
    if (!e.allocate) {
      auto it = live.find(e.id);
      if (it == live.end()) continue;
      for (int p : it->second) {
        --active[p];
        for (CountState& s : frontier) ++s.idle[p];  // kept Idle (destroy later if needed)
      }
      live.erase(it);
      continue;
    }
    for (int p : e.classes) {
      std::vector<CountState> next;
      Vec after = active;
      ++after[p];
      for (const CountState& s : frontier) {
        if (s.idle[p] > 0) {
          CountState r = s;
          --r.idle[p];
          next.push_back(r);
        }
        if (relaxed.Fits(after, s.idle)) {
          next.push_back({s.idle, s.cost + 1});
        } else {
          subsets.clear();
          relaxed.MaximalIdleSubsets(after, s.idle, subsets);
          for (const Vec& j : subsets) next.push_back({j, s.cost + 1});
        }
      }
      frontier = PruneCounts(std::move(next), n);
      if (frontier.empty()) {
        return FailedPreconditionError("allocation " + std::to_string(e.id) +
                                       " does not fit the node even re-packed");
      }
      active = after;
      peak[p] = std::max(peak[p], active[p]);
      res.max_states = std::max<uint64_t>(res.max_states, frontier.size());
    }
    live[e.id] = e.classes;
  }
  res.creates = frontier.front().cost;
  for (const CountState& s : frontier) res.creates = std::min(res.creates, s.cost);
  for (int p = 0; p < n; ++p) res.peak_sum += static_cast<uint64_t>(peak[p]);
  return res;
}

namespace {

// A state of the positional search. pos[k] = (gpu << 5) | pair of live
// instance slot k (slots are global: every state holds the same live
// allocations); idle[g] = pairs of GPU g that hold an Idle instance.
struct PosState {
  std::vector<uint8_t> pos;
  std::vector<uint32_t> idle;
  uint64_t cost = 0;
  int idle_slices = 0;  // memory slices of the Idle instances (kept current)
  uint64_t hash = 0;    // of `pos`, set by Prune
};

constexpr int kPairBits = 5;

class Positional {
 public:
  Positional(const BoundProblem& bp, size_t max_states)
      : bp_(bp), t_(*bp.table), g_(bp.gpus), max_states_(max_states) {
    for (int i = 0; i < t_.num_pairs(); ++i) slices_.push_back(__builtin_popcount(t_.pair(i).mask));
  }

  PositionalResult Run() {
    PositionalResult res;
    res.exact = true;
    PosState start;
    start.idle.assign(static_cast<size_t>(g_), 0);
    frontier_.push_back(std::move(start));
    for (const BoundEvent& e : bp_.events) {
      if (e.allocate) {
        for (int p : e.classes) {
          Place(p);
          slots_.push_back(e.id);
          if (frontier_.empty()) return res;
          if (!Prune()) res.exact = false;
          res.max_states = std::max<uint64_t>(res.max_states, frontier_.size());
        }
      } else {
        Release(e.id);
        if (!Prune()) res.exact = false;
      }
    }
    res.feasible = true;
    res.creates = frontier_.front().cost;
    for (const PosState& s : frontier_) res.creates = std::min(res.creates, s.cost);
    return res;
  }

 private:
  uint32_t ActiveSet(const PosState& s, int g) const {
    uint32_t set = 0;
    for (uint8_t v : s.pos) {
      if ((v >> kPairBits) == g) set |= 1u << (v & ((1u << kPairBits) - 1));
    }
    return set;
  }
  uint32_t MaskOf(uint32_t pair_set) const {
    uint32_t m = 0;
    for (int i = 0; i < t_.num_pairs(); ++i) {
      if (pair_set & (1u << i)) m |= t_.pair(i).mask;
    }
    return m;
  }

  // Every way to place one instance of class `p` in every state.
  void Place(int p) {
    std::vector<PosState> next;
    for (const PosState& s : frontier_) {
      std::vector<uint32_t> active(static_cast<size_t>(g_));
      for (int g = 0; g < g_; ++g) active[g] = ActiveSet(s, g);
      for (int g = 0; g < g_; ++g) {
        // GPUs holding nothing, with the same Idle instances, are interchangeable.
        bool twin = false;
        for (int h = 0; h < g && !twin; ++h) {
          twin = active[h] == 0 && active[g] == 0 && s.idle[h] == s.idle[g];
        }
        if (twin) continue;
        const uint32_t held_mask = MaskOf(active[g]);
        for (int pair : t_.profile(p).pairs) {
          const uint32_t bit = 1u << pair;
          const uint8_t code = static_cast<uint8_t>((g << kPairBits) | pair);
          if (s.idle[g] & bit) {  // reuse
            PosState r = s;
            r.idle[g] &= ~bit;
            r.idle_slices -= slices_[pair];
            r.pos.push_back(code);
            next.push_back(std::move(r));
            continue;
          }
          const uint32_t m = t_.pair(pair).mask;
          if (held_mask & m) continue;
          uint32_t keep = 0;  // Idle pairs that do not overlap the new instance
          for (int i = 0; i < t_.num_pairs(); ++i) {
            if ((s.idle[g] & (1u << i)) && (t_.pair(i).mask & m) == 0) keep |= 1u << i;
          }
          for (uint32_t kept : LegalKeeps(active[g] | bit, keep)) {
            PosState c = s;
            c.idle_slices += SlicesOf(kept) - SlicesOf(s.idle[g]);
            c.idle[g] = kept;
            c.pos.push_back(code);
            c.cost += 1;
            next.push_back(std::move(c));
          }
        }
      }
    }
    frontier_ = std::move(next);
  }

  // The maximal subsets K of `keep` with (fixed | K) a legal layout. Usually
  // `keep` itself; instance caps or the engine budget may ask for more.
  std::vector<uint32_t> LegalKeeps(uint32_t fixed, uint32_t keep) const {
    if (t_.StateOf(fixed | keep) >= 0) return {keep};
    if (t_.StateOf(fixed) < 0) return {};
    std::vector<uint32_t> legal;
    for (uint32_t sub = keep;; sub = (sub - 1) & keep) {  // all subsets, larger first-ish
      if (t_.StateOf(fixed | sub) >= 0) {
        bool covered = false;
        for (uint32_t l : legal) covered = covered || (l & sub) == sub;
        if (!covered) legal.push_back(sub);
      }
      if (sub == 0) break;
    }
    // Subsets are visited in decreasing numeric order, not by inclusion:
    // drop any that a later one contains.
    std::vector<uint32_t> out;
    for (uint32_t a : legal) {
      bool dominated = false;
      for (uint32_t b : legal) dominated = dominated || (b != a && (b & a) == a);
      if (!dominated) out.push_back(a);
    }
    return out;
  }

  void Release(int64_t id) {
    std::vector<size_t> gone;
    for (size_t k = 0; k < slots_.size(); ++k) {
      if (slots_[k] == id) gone.push_back(k);
    }
    if (gone.empty()) return;
    for (PosState& s : frontier_) {
      for (size_t k : gone) {
        const uint8_t v = s.pos[k];
        const int pair = v & ((1 << kPairBits) - 1);
        s.idle[v >> kPairBits] |= 1u << pair;
        s.idle_slices += slices_[pair];
      }
      for (auto it = gone.rbegin(); it != gone.rend(); ++it) s.pos.erase(s.pos.begin() + *it);
    }
    for (auto it = gone.rbegin(); it != gone.rend(); ++it) slots_.erase(slots_.begin() + *it);
  }

  // Relabels GPUs in a canonical order (by held slots, then Idle set).
  void Canonicalize(PosState& s) const {
    std::vector<std::vector<int>> sig(static_cast<size_t>(g_));
    for (size_t k = 0; k < s.pos.size(); ++k) {
      sig[s.pos[k] >> kPairBits].push_back(static_cast<int>(k << kPairBits) |
                                           (s.pos[k] & ((1 << kPairBits) - 1)));
    }
    std::vector<int> order(static_cast<size_t>(g_));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      if (sig[a] != sig[b]) return sig[a] < sig[b];
      return s.idle[a] < s.idle[b];
    });
    std::vector<int> new_of(static_cast<size_t>(g_));
    std::vector<uint32_t> idle(static_cast<size_t>(g_));
    for (int i = 0; i < g_; ++i) {
      new_of[order[i]] = i;
      idle[i] = s.idle[order[i]];
    }
    for (uint8_t& v : s.pos) {
      v = static_cast<uint8_t>((new_of[v >> kPairBits] << kPairBits) |
                               (v & ((1 << kPairBits) - 1)));
    }
    s.idle = std::move(idle);
  }

  // Drops dominated states; keeps at most max_states_. False if it had to
  // drop non-dominated ones.
  bool Prune() {
    for (PosState& st : frontier_) {
      Canonicalize(st);
      st.hash = HashOf(st.pos);
    }
    // Equal held placements end up adjacent, cheapest and fullest first.
    std::vector<size_t> order(frontier_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [this](size_t a, size_t b) {
      const PosState& x = frontier_[a];
      const PosState& y = frontier_[b];
      if (x.hash != y.hash) return x.hash < y.hash;
      if (x.pos != y.pos) return x.pos < y.pos;
      if (x.cost != y.cost) return x.cost < y.cost;
      if (x.idle_slices != y.idle_slices) return x.idle_slices > y.idle_slices;
      return x.idle < y.idle;
    });
    std::vector<PosState> kept;
    // kept[group] heads the current group: the first state of a group is
    // never dominated (nothing cheaper precedes it), so it is always kept.
    size_t group = 0;
    for (size_t i : order) {
      PosState& st = frontier_[i];
      if (kept.empty() || kept[group].hash != st.hash || kept[group].pos != st.pos) {
        group = kept.size();
      }
      bool dominated = false;
      for (size_t k = group; k < kept.size() && !dominated; ++k) {
        const PosState& d = kept[k];
        if (d.cost > st.cost || d.idle_slices < st.idle_slices) continue;
        bool sup = true;
        for (int g = 0; g < g_ && sup; ++g) sup = (d.idle[g] & st.idle[g]) == st.idle[g];
        dominated = sup;
      }
      if (!dominated) kept.push_back(std::move(st));
    }
    bool complete = kept.size() <= max_states_;
    // The best first (fewest creates, then most Idle slices); deterministic.
    auto better = [](const PosState& a, const PosState& b) {
      if (a.cost != b.cost) return a.cost < b.cost;
      if (a.idle_slices != b.idle_slices) return a.idle_slices > b.idle_slices;
      if (a.pos != b.pos) return a.pos < b.pos;
      return a.idle < b.idle;
    };
    if (!complete) {
      std::nth_element(kept.begin(), kept.begin() + static_cast<long>(max_states_), kept.end(),
                       better);
      kept.resize(max_states_);
    }
    frontier_ = std::move(kept);
    return complete;
  }

  static uint64_t HashOf(const std::vector<uint8_t>& v) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (uint8_t b : v) h = (h ^ b) * 1099511628211ull;
    return h;
  }

  int SlicesOf(uint32_t pair_set) const {
    int n = 0;
    for (int i = 0; i < t_.num_pairs(); ++i) {
      if (pair_set & (1u << i)) n += slices_[i];
    }
    return n;
  }

  const BoundProblem& bp_;
  const GpuTable& t_;
  const int g_;
  const size_t max_states_;
  std::vector<int64_t> slots_;  // allocation id per live instance slot
  std::vector<PosState> frontier_;
  std::vector<int> slices_;  // memory slices per pair
};

}  // namespace

PositionalResult PositionalSearch(const BoundProblem& problem, size_t max_states) {
  return Positional(problem, std::max<size_t>(1, max_states)).Run();
}

}  // namespace migd::bench::latency
