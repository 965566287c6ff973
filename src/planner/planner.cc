#include "planner/planner.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "base/status_macros.h"

namespace migd::planner {

namespace internal_planner {

// Masks are uint32_t and per-profile sets are uint32_t bit sets.
constexpr size_t kMaxUnits = 32;
constexpr size_t kMaxProfiles = 32;

// Copy engines, decoders, encoders, JPEG, OFA: mig::Engines as a vector, so
// the hot loops need no out-of-line calls.
using EngineVec = std::array<uint32_t, 5>;

inline EngineVec ToVec(const mig::Engines& e) {
  return {e.copy_engines, e.decoders, e.encoders, e.jpeg, e.ofa};
}

// used + need <= limit, component-wise.
inline bool Fits(const EngineVec& used, const EngineVec& need, const EngineVec& limit) {
  for (size_t i = 0; i < used.size(); ++i) {
    if (used[i] + need[i] > limit[i]) return false;
  }
  return true;
}

// One legal (profile, placement) of a table.
struct Pair {
  uint16_t profile = 0;  // index into model.gi_profiles
  uint32_t mask = 0;
  mig::Placement placement;
};

struct Table {
  const mig::GpuModel* model = nullptr;
  // What the cache entry was built from; checked on every hit so that a
  // model freed and another allocated at the same address is noticed.
  const mig::GiProfile* profiles_data = nullptr;
  size_t profile_count = 0;
  uint32_t memory_slices = 0;

  std::vector<Pair> pairs;         // profile order, then start
  std::vector<uint32_t> caps;      // instanceCount per profile
  std::vector<EngineVec> engines;  // per profile
  EngineVec totals{};              // the GPU's engine budget
};

}  // namespace internal_planner

namespace {

using internal_planner::EngineVec;
using internal_planner::Fits;
using internal_planner::kMaxProfiles;
using internal_planner::kMaxUnits;
using internal_planner::Pair;
using internal_planner::Table;

// ---------------------------------------------------------------------------
// Views and scores.

// Occupancy of one GPU as far as legality is concerned.
struct View {
  uint32_t mask = 0;
  std::array<uint8_t, kMaxProfiles> counts{};
  EngineVec used{};
};

void AddTo(View& v, const Table& t, uint16_t profile, uint32_t mask) {
  v.mask |= mask;
  ++v.counts[profile];
  for (size_t i = 0; i < v.used.size(); ++i) v.used[i] += t.engines[profile][i];
}

void RemoveFrom(View& v, const Table& t, uint16_t profile, uint32_t mask) {
  v.mask &= ~mask;
  --v.counts[profile];
  for (size_t i = 0; i < v.used.size(); ++i) v.used[i] -= t.engines[profile][i];
}

// Pair weights of one table for one call.
struct Weights {
  std::vector<int64_t> weighted;  // per pair, from the demand mix
  std::vector<int64_t> uniform;   // per pair, all equal
  std::vector<int64_t> profile;   // per profile, from the demand mix (node term)
};


// Profiles that could be created in `v` somewhere (instanceCount and engine
// budget allow one more), as a bit set.
uint32_t CreatableProfiles(const Table& t, const View& v) {
  uint32_t ok = 0;
  for (size_t p = 0; p < t.profile_count; ++p) {
    if (v.counts[p] < t.caps[p] && Fits(v.used, t.engines[p], t.totals)) ok |= 1u << p;
  }
  return ok;
}

// S(view): the total weight of the pairs creatable in `v`. *placeable (if
// given) receives the profiles with at least one creatable pair.
int64_t Score(const Table& t, const std::vector<int64_t>& w, const View& v,
              uint32_t* placeable = nullptr) {
  const uint32_t ok = CreatableProfiles(t, v);
  int64_t s = 0;
  uint32_t any = 0;
  for (size_t i = 0; i < t.pairs.size(); ++i) {
    const Pair& pair = t.pairs[i];
    if ((pair.mask & v.mask) == 0 && ((ok >> pair.profile) & 1u) != 0) {
      s += w[i];
      any |= 1u << pair.profile;
    }
  }
  if (placeable != nullptr) *placeable = any;
  return s;
}

// S(view) with the mix weights and with uniform weights, in one pass, and the
// profiles with at least one creatable pair.
struct ViewScores {
  int64_t weighted = 0;
  int64_t uniform = 0;
  uint32_t placeable = 0;
};
ViewScores Scores(const Table& t, const Weights& w, const View& v) {
  const uint32_t ok = CreatableProfiles(t, v);
  ViewScores out;
  for (size_t i = 0; i < t.pairs.size(); ++i) {
    const Pair& pair = t.pairs[i];
    if ((pair.mask & v.mask) == 0 && ((ok >> pair.profile) & 1u) != 0) {
      out.weighted += w.weighted[i];
      out.uniform += w.uniform[i];
      out.placeable |= 1u << pair.profile;
    }
  }
  return out;
}

// Σ w_p over the profiles in `mask` (the node term's value).
int64_t ProfileValue(const std::vector<int64_t>& w, uint32_t mask) {
  int64_t v = 0;
  for (; mask != 0; mask &= mask - 1) v += w[static_cast<size_t>(std::countr_zero(mask))];
  return v;
}

// ---------------------------------------------------------------------------
// The canonical per-GPU context.

struct Occ {
  const Occupant* src = nullptr;
  uint16_t profile = 0;
  uint32_t mask = 0;
  mig::Placement placement;
  OccupantState state = OccupantState::kActive;
};

struct Gpu {
  GpuIndex index;
  const mig::GpuModel* model = nullptr;
  const Table* table = nullptr;
  const Weights* weights = nullptr;
  std::vector<Occ> occ;    // ascending placement
  uint32_t hard_mask = 0;  // Active, Error, Foreign
  uint32_t idle_bits = 0;  // bit i: occ[i] is Idle
  View all;                // every occupant
  View hard;               // every occupant but the Idle ones
  int64_t fill = 0;        // memory units occupied before the request
  int64_t s_all_weighted = 0;
  int64_t s_all_uniform = 0;
  int64_t s_hard_weighted = 0;
  uint32_t hard_placeable = 0;  // profiles placeable with every Idle instance free
};

struct Create {
  uint16_t profile = 0;
  uint32_t mask = 0;
};

// What a (partial) plan does on one GPU.
struct Overlay {
  uint32_t create_mask = 0;
  uint32_t reused = 0;       // occ bits
  uint32_t reused_mask = 0;  // their slices
  uint32_t reclaimed = 0;    // occ bits
  uint32_t hosted = 0;       // request instances placed on this GPU
  uint32_t n_creates = 0;
  std::array<Create, kMaxUnits> creates{};
};

View ActualView(const Gpu& g, const Overlay& ov) {
  View v = g.all;
  for (uint32_t bits = ov.reclaimed; bits != 0; bits &= bits - 1) {
    const Occ& o = g.occ[static_cast<size_t>(std::countr_zero(bits))];
    RemoveFrom(v, *g.table, o.profile, o.mask);
  }
  for (uint32_t i = 0; i < ov.n_creates; ++i) {
    AddTo(v, *g.table, ov.creates[i].profile, ov.creates[i].mask);
  }
  return v;
}

// Idle instances count as free unless this plan reuses them.
View PinnedView(const Gpu& g, const Overlay& ov) {
  View v = g.hard;
  for (uint32_t bits = ov.reused; bits != 0; bits &= bits - 1) {
    const Occ& o = g.occ[static_cast<size_t>(std::countr_zero(bits))];
    AddTo(v, *g.table, o.profile, o.mask);
  }
  for (uint32_t i = 0; i < ov.n_creates; ++i) {
    AddTo(v, *g.table, ov.creates[i].profile, ov.creates[i].mask);
  }
  return v;
}

// Whether the created instances are legal in the actual view: instanceCount
// of every created profile and the GPU's engine budget.
bool CreatesLegal(const Gpu& g, const Overlay& ov, const View& actual) {
  if (ov.n_creates == 0) return true;
  if (!Fits(actual.used, EngineVec{}, g.table->totals)) return false;
  for (uint32_t i = 0; i < ov.n_creates; ++i) {
    const uint16_t p = ov.creates[i].profile;
    if (actual.counts[p] > g.table->caps[p]) return false;
  }
  return true;
}

// Idle instances not reused and not reclaimed that overlap the creates.
uint32_t MandatoryReclaims(const Gpu& g, const Overlay& ov) {
  uint32_t out = 0;
  const uint32_t open = g.idle_bits & ~ov.reused & ~ov.reclaimed;
  for (uint32_t bits = open; bits != 0; bits &= bits - 1) {
    const int i = std::countr_zero(bits);
    if ((g.occ[static_cast<size_t>(i)].mask & ov.create_mask) != 0) out |= 1u << i;
  }
  return out;
}

struct ReclaimCost {
  int64_t slices = 0;
  int64_t instances = 0;
  int64_t ticks = 0;
  uint32_t bits = 0;
  friend auto operator<=>(const ReclaimCost&, const ReclaimCost&) = default;
};

ReclaimCost CostOfReclaims(const Gpu& g, uint32_t bits) {
  ReclaimCost c;
  c.bits = bits;
  for (uint32_t b = bits; b != 0; b &= b - 1) {
    const Occ& o = g.occ[static_cast<size_t>(std::countr_zero(b))];
    c.slices += o.placement.size;
    c.instances += 1;
    c.ticks += o.src->last_used;
  }
  return c;
}

// When the creates of `ov` break instanceCount or the engine budget, the
// cheapest set of further Idle instances (not reused, not reclaimed) whose
// removal makes them legal: fewest slices, then fewest instances, then
// least recently used, then lowest placements. nullopt if none does.
// Only Idle instances that can help are tried: those of a created profile or
// holding engines.
std::optional<uint32_t> CheapestExtraReclaims(const Gpu& g, const Overlay& ov) {
  uint32_t created_profiles = 0;
  for (uint32_t i = 0; i < ov.n_creates; ++i) created_profiles |= 1u << ov.creates[i].profile;
  uint32_t helpful = 0;
  const EngineVec none{};
  for (uint32_t bits = g.idle_bits & ~ov.reused & ~ov.reclaimed; bits != 0; bits &= bits - 1) {
    const int i = std::countr_zero(bits);
    const Occ& o = g.occ[static_cast<size_t>(i)];
    if (((created_profiles >> o.profile) & 1u) != 0 || !(g.table->engines[o.profile] == none)) {
      helpful |= 1u << i;
    }
  }
  std::optional<ReclaimCost> best;
  // Every non-empty subset of `helpful` (at most one bit per occupant, and
  // occupants never overlap, so at most memory-units bits).
  for (uint32_t sub = helpful; sub != 0; sub = (sub - 1) & helpful) {
    Overlay trial = ov;
    trial.reclaimed |= sub;
    if (!CreatesLegal(g, trial, ActualView(g, trial))) continue;
    ReclaimCost c = CostOfReclaims(g, sub);
    if (!best.has_value() || c < *best) best = c;
  }
  if (!best.has_value()) return std::nullopt;
  return best->bits;
}

// The fields of CostOf() that need no scoring (destroyed, creates, ticks).
PlanScore CheapCostOf(const Gpu& g, const Overlay& ov) {
  PlanScore s;
  const ReclaimCost r = CostOfReclaims(g, ov.reclaimed);
  s.destroyed_slices = r.slices;
  s.destroyed_instances = r.instances;
  s.reclaimed_last_used_sum = r.ticks;
  s.creates = ov.n_creates;
  return s;
}

// The cost of everything `ov` does on `g`, relative to the input state,
// without the node term (node_loss = 0; it depends on every GPU).
// *pinned_placeable (if given) receives the profiles still placeable on `g`
// in the pinned view after `ov`.
PlanScore CostOf(const Gpu& g, const Overlay& ov, uint32_t* pinned_placeable = nullptr) {
  PlanScore s = CheapCostOf(g, ov);
  const ViewScores actual = Scores(*g.table, *g.weights, ActualView(g, ov));
  s.loss = g.s_all_weighted - actual.weighted;
  s.uniform_loss = g.s_all_uniform - actual.uniform;
  // Without Idle instances the pinned view is the actual view.
  uint32_t pl = actual.placeable;
  if (g.idle_bits == 0) {
    s.pin_loss = s.loss;
  } else {
    s.pin_loss = g.s_hard_weighted - Score(*g.table, g.weights->weighted, PinnedView(g, ov), &pl);
  }
  if (pinned_placeable != nullptr) *pinned_placeable = pl;
  s.fill = -g.fill * static_cast<int64_t>(ov.hosted);
  s.opened_gpus = g.hard_mask == 0 && ov.hosted > 0 ? 1 : 0;
  return s;
}


// ---------------------------------------------------------------------------
// Request classes and actions.

struct Action {
  bool reuse = false;
  uint16_t profile = 0;
  uint8_t occ = 0;  // reuse: index into Gpu::occ
  mig::Placement placement;
  uint32_t mask = 0;
};

// Identical request instances (same profile text, GPU and placement).
struct Class {
  std::string profile;
  std::optional<GpuIndex> gpu;
  std::optional<mig::Placement> placement;
  std::vector<size_t> members;               // request indices, ascending
  int rank = 0;                              // 0: GPU+placement, 1: placement, 2: GPU, 3: neither
  uint32_t size = 0;                         // placement size on the first eligible GPU
  uint32_t compute = 0;                      // compute slices on the first eligible GPU
  std::optional<size_t> pinned_gpu;          // position in the canonical GPU list
  std::vector<std::vector<Action>> actions;  // per GPU position; empty if not eligible
  std::vector<int> resolved;                 // per GPU position: profile index or -1
};

bool Exact(const Class& c) { return c.placement.has_value(); }

// Whether `a` can be added to `ov` (no overlap with this plan's creates or
// reuses; no Idle instance used twice or both reused and reclaimed).
bool Compatible(const Gpu& g, const Overlay& ov, const Action& a) {
  if (a.reuse) {
    const uint32_t bit = 1u << a.occ;
    if (((ov.reused | ov.reclaimed) & bit) != 0) return false;
    return (g.occ[a.occ].mask & ov.create_mask) == 0;
  }
  return (a.mask & (ov.create_mask | ov.reused_mask)) == 0;
}

void Apply(const Gpu& g, Overlay& ov, const Action& a) {
  ++ov.hosted;
  if (a.reuse) {
    ov.reused |= 1u << a.occ;
    ov.reused_mask |= g.occ[a.occ].mask;
    return;
  }
  ov.creates[ov.n_creates++] = Create{a.profile, a.mask};
  ov.create_mask |= a.mask;
}

// Reverts the last Apply(g, ov, a) (no reclaims settled in between).
void Undo(const Gpu& g, Overlay& ov, const Action& a) {
  --ov.hosted;
  if (a.reuse) {
    ov.reused &= ~(1u << a.occ);
    ov.reused_mask &= ~g.occ[a.occ].mask;
    return;
  }
  --ov.n_creates;
  ov.create_mask &= ~a.mask;
}

// Completes the reclaim set of an overlay whose creates were just added:
// mandatory reclaims, then (if allowed and needed) the cheapest extras.
// Returns false when the creates cannot be made legal.
bool SettleReclaims(const Gpu& g, Overlay& ov, bool allow_extras) {
  ov.reclaimed |= MandatoryReclaims(g, ov);
  if (CreatesLegal(g, ov, ActualView(g, ov))) return true;
  if (!allow_extras) return false;
  std::optional<uint32_t> extra = CheapestExtraReclaims(g, ov);
  if (!extra.has_value()) return false;
  ov.reclaimed |= *extra;
  return true;
}

// ---------------------------------------------------------------------------
// Messages.

std::string JoinIndices(const std::vector<Gpu>& gpus, const std::vector<size_t>& which) {
  std::string out;
  for (size_t i : which) {
    if (!out.empty()) out += ", ";
    out += std::to_string(gpus[i].index.value());
  }
  return out;
}

std::string_view StateLabel(OccupantState s) {
  switch (s) {
    case OccupantState::kActive:
      return "Active";
    case OccupantState::kIdle:
      return "Idle";
    case OccupantState::kError:
      return "Error";
    case OccupantState::kForeign:
      return "Foreign";
  }
  return "?";
}

std::string OccLabel(const Gpu& g, const Occ& o) {
  return std::string(StateLabel(o.state)) + " " + g.model->gi_profiles[o.profile].name + "@" +
         std::to_string(o.placement.start);
}

std::string EnginesText(const mig::Engines& e) {
  return "CE/DEC/ENC/JPG/OFA " + std::to_string(e.copy_engines) + "/" + std::to_string(e.decoders) +
         "/" + std::to_string(e.encoders) + "/" + std::to_string(e.jpeg) + "/" +
         std::to_string(e.ofa);
}

std::string PlacementsText(const std::vector<mig::Placement>& ps, std::string_view sep) {
  std::string out;
  for (const mig::Placement& p : ps) {
    if (!out.empty()) out += sep;
    out += p.ToString();
  }
  return out.empty() ? "none" : out;
}

// Why class `c` has no action on GPU `gi` in the input state.
std::string DescribeBlocked(const std::vector<Gpu>& gpus, size_t gi, const Class& c) {
  const Gpu& g = gpus[gi];
  const std::string head = "GPU " + std::to_string(g.index.value()) + ": ";
  if (c.resolved[gi] < 0) {
    return head + "no profile " + c.profile + " on " + g.model->key;
  }
  const mig::GiProfile& prof = g.model->gi_profiles[static_cast<size_t>(c.resolved[gi])];
  if (c.placement.has_value() && !prof.HasPlacement(*c.placement)) {
    return head + prof.name + " has no placement " + c.placement->ToString() + " on " +
           g.model->key;
  }
  std::vector<mig::Placement> wanted;
  if (c.placement.has_value()) {
    wanted.push_back(*c.placement);
  } else {
    wanted = prof.placements;
  }
  std::string out = head + prof.name + " needs " + PlacementsText(wanted, " or ");
  if (wanted.empty()) return out;
  std::string reasons;
  const auto p = static_cast<uint16_t>(c.resolved[gi]);
  for (const mig::Placement& pl : wanted) {
    std::string why;
    for (const Occ& o : g.occ) {
      if (o.state == OccupantState::kIdle || !o.placement.Overlaps(pl)) continue;
      if (!why.empty()) why += " + ";
      why += OccLabel(g, o);
    }
    if (!why.empty()) {
      why.insert(0, "blocked by ");
    } else {
      // Only Idle instances (reclaimable) or nothing overlap: the limit is
      // instanceCount or engines, counted without the reclaimable Idle ones
      // (exact placements may only reclaim those overlapping them).
      View v = g.hard;
      if (c.placement.has_value()) {
        v = g.all;
        for (const Occ& o : g.occ) {
          if (o.state == OccupantState::kIdle && o.placement.Overlaps(pl)) {
            RemoveFrom(v, *g.table, o.profile, o.mask);
          }
        }
      }
      mig::Engines free = g.model->engine_totals;
      const mig::Engines used{v.used[0], v.used[1], v.used[2], v.used[3], v.used[4]};
      free -= used;
      if (v.counts[p] >= g.table->caps[p]) {
        why = "instanceCount of " + prof.name + " reached (" + std::to_string(v.counts[p]) +
              " of " + std::to_string(g.table->caps[p]) + ")";
      } else if (!Fits(v.used, g.table->engines[p], g.table->totals)) {
        why = "engine budget exhausted (needs " + EnginesText(prof.engines) + ", free " +
              EnginesText(free) + ")";
      } else {
        why = "blocked";
      }
    }
    if (!reasons.empty()) reasons += ", ";
    reasons += pl.ToString() + " " + why;
  }
  return out + "; " + reasons;
}

// ---------------------------------------------------------------------------
// Validation and canonicalisation.

Status ValidateGpuTable(const mig::GpuModel& m, const std::string& where) {
  if (m.memory_slices == 0 || m.memory_slices > kMaxUnits) {
    return InvalidArgumentError(where + ": model " + m.key + " has " +
                                std::to_string(m.memory_slices) + " memory units (1.." +
                                std::to_string(kMaxUnits) + " supported)");
  }
  if (m.gi_profiles.size() > kMaxProfiles) {
    return InvalidArgumentError(where + ": model " + m.key + " has more than " +
                                std::to_string(kMaxProfiles) + " GI profiles");
  }
  for (const mig::GiProfile& p : m.gi_profiles) {
    if (p.instance_count > 255) {
      return InvalidArgumentError(where + ": profile " + p.name + " has instanceCount " +
                                  std::to_string(p.instance_count) + " (at most 255 supported)");
    }
    for (const mig::Placement& pl : p.placements) {
      if (pl.size == 0 || pl.end() > m.memory_slices) {
        return InvalidArgumentError(where + ": profile " + p.name + " placement " + pl.ToString() +
                                    " is outside the " + std::to_string(m.memory_slices) +
                                    " memory units of " + m.key);
      }
    }
  }
  return OkStatus();
}

std::unique_ptr<Table> BuildTable(const mig::GpuModel& m) {
  auto t = std::make_unique<Table>();
  t->model = &m;
  t->profiles_data = m.gi_profiles.data();
  t->profile_count = m.gi_profiles.size();
  t->memory_slices = m.memory_slices;
  t->totals = internal_planner::ToVec(m.engine_totals);
  for (size_t i = 0; i < m.gi_profiles.size(); ++i) {
    const mig::GiProfile& p = m.gi_profiles[i];
    t->caps.push_back(p.instance_count);
    t->engines.push_back(internal_planner::ToVec(p.engines));
    for (const mig::Placement& pl : p.placements) {
      t->pairs.push_back(Pair{static_cast<uint16_t>(i), pl.Mask(), pl});
    }
  }
  return t;
}

Weights BuildWeights(const Table& t, const DemandWeights& demand) {
  const mig::GpuModel& m = *t.model;
  std::vector<double> raw(m.gi_profiles.size(), 0.0);
  for (const auto& [name, weight] : demand) {
    const mig::GiProfile* p = m.FindProfileByName(name);
    if (p != nullptr) raw[static_cast<size_t>(p - m.gi_profiles.data())] += weight;
  }
  uint32_t listed = 0;  // profiles with pairs in the table
  for (const Pair& pair : t.pairs) listed |= 1u << pair.profile;
  double total = 0.0;  // mix weight of the listed profiles
  for (size_t p = 0; p < raw.size(); ++p) {
    if (((listed >> p) & 1u) != 0) total += raw[p];
  }
  // The support of the mix: listed profiles with at least kSupportShare of
  // its weight (a profile asked for once long ago, decayed to a trace, does
  // not count).
  constexpr double kSupportShare = 1e-3;
  uint32_t support = 0;
  for (size_t p = 0; p < raw.size(); ++p) {
    if (((listed >> p) & 1u) != 0 && total > 0.0 && raw[p] >= kSupportShare * total) {
      support |= 1u << p;
    }
  }
  Weights w;
  const auto n = static_cast<int64_t>(std::max<size_t>(t.pairs.size(), 1));
  w.uniform.assign(t.pairs.size(), kScoreScale / n);
  // Pairs: every pair of a profile in the support weighs the same (the mix
  // decides what counts, not how much: a rare large profile's few placements
  // must count as much as a common small one's, or slice-weighted acceptance
  // suffers); all pairs alike when nothing resolves.
  int64_t n_support = 0;
  for (const Pair& pair : t.pairs) n_support += (support >> pair.profile) & 1u;
  if (n_support > 0) {
    for (const Pair& pair : t.pairs) {
      w.weighted.push_back(((support >> pair.profile) & 1u) != 0 ? kScoreScale / n_support : 0);
    }
  } else {
    w.weighted = w.uniform;
  }
  // Profiles (node term): the mix weight of the profiles in the support,
  // normalised so that all of them placeable ≈ kScoreScale; every listed
  // profile alike when nothing resolves.
  double support_total = 0.0;
  for (size_t p = 0; p < raw.size(); ++p) {
    if (((support >> p) & 1u) != 0) support_total += raw[p];
  }
  const int64_t nlisted = std::max(1, std::popcount(listed));
  w.profile.assign(raw.size(), 0);
  for (size_t p = 0; p < raw.size(); ++p) {
    if (support == 0) {
      if (((listed >> p) & 1u) != 0) w.profile[p] = kScoreScale / nlisted;
    } else if (((support >> p) & 1u) != 0) {
      w.profile[p] = std::llround(static_cast<double>(kScoreScale) * raw[p] / support_total);
    }
  }
  return w;
}

}  // namespace

// ---------------------------------------------------------------------------
// Public helpers.

std::string_view OccupantStateName(OccupantState state) {
  switch (state) {
    case OccupantState::kActive:
      return "active";
    case OccupantState::kIdle:
      return "idle";
    case OccupantState::kError:
      return "error";
    case OccupantState::kForeign:
      return "foreign";
  }
  return "unknown";
}

StatusOr<OccupantState> ParseOccupantState(std::string_view name) {
  for (OccupantState s : {OccupantState::kActive, OccupantState::kIdle, OccupantState::kError,
                          OccupantState::kForeign}) {
    if (OccupantStateName(s) == name) return s;
  }
  return InvalidArgumentError("unknown instance state '" + std::string(name) +
                              "' (want active, idle, error or foreign)");
}

std::string_view StageName(Stage stage) {
  switch (stage) {
    case Stage::kReuse:
      return "reuse";
    case Stage::kFree:
      return "free";
    case Stage::kReclaim:
      return "reclaim";
  }
  return "unknown";
}

StatusOr<Stage> ParseStage(std::string_view name) {
  for (Stage s : {Stage::kReuse, Stage::kFree, Stage::kReclaim}) {
    if (StageName(s) == name) return s;
  }
  return InvalidArgumentError("unknown stage '" + std::string(name) +
                              "' (want reuse, free or reclaim)");
}

std::string_view SearchName(Search search) {
  return search == Search::kGreedy ? "greedy" : "exhaustive";
}

StatusOr<Search> ParseSearch(std::string_view name) {
  if (name == "greedy") return Search::kGreedy;
  if (name == "exhaustive") return Search::kExhaustive;
  return InvalidArgumentError("unknown search '" + std::string(name) +
                              "' (want greedy or exhaustive)");
}

PlanScore& PlanScore::operator+=(const PlanScore& o) {
  node_loss += o.node_loss;
  opened_gpus += o.opened_gpus;
  destroyed_slices += o.destroyed_slices;
  destroyed_instances += o.destroyed_instances;
  creates += o.creates;
  reclaimed_last_used_sum += o.reclaimed_last_used_sum;
  loss += o.loss;
  pin_loss += o.pin_loss;
  fill += o.fill;
  uniform_loss += o.uniform_loss;
  return *this;
}

PlanScore& PlanScore::operator-=(const PlanScore& o) {
  node_loss -= o.node_loss;
  opened_gpus -= o.opened_gpus;
  destroyed_slices -= o.destroyed_slices;
  destroyed_instances -= o.destroyed_instances;
  creates -= o.creates;
  reclaimed_last_used_sum -= o.reclaimed_last_used_sum;
  loss -= o.loss;
  pin_loss -= o.pin_loss;
  fill -= o.fill;
  uniform_loss -= o.uniform_loss;
  return *this;
}

std::vector<ReclaimedInstance> Plan::AllReclaims() const {
  std::vector<ReclaimedInstance> out;
  for (const InstancePlan& ip : instances) {
    out.insert(out.end(), ip.reclaim.begin(), ip.reclaim.end());
  }
  std::sort(out.begin(), out.end(), [](const ReclaimedInstance& a, const ReclaimedInstance& b) {
    return std::pair(a.gpu, a.placement) < std::pair(b.gpu, b.placement);
  });
  return out;
}

// ---------------------------------------------------------------------------
// The planning run.

namespace {

// Where a request instance went.
struct Assigned {
  size_t gpu = 0;  // canonical position
  Action action;
};

class Run {
 public:
  Run(const PlanInput& input, std::vector<Gpu> gpus, std::vector<Class> classes)
      : input_(input), gpus_(std::move(gpus)), classes_(std::move(classes)) {
    FindTwins();
  }

  StatusOr<Plan> Solve(PlannerCounters& counters);

 private:
  // Per-class instance counts, one byte per class (a request has at most 255
  // instances). A string so that it hashes; lookups only, never iterated.
  using Counts = std::string;
  static uint8_t At(const Counts& c, size_t i) { return static_cast<uint8_t>(c[i]); }
  static void Set(Counts& c, size_t i, uint32_t v) { c[i] = static_cast<char>(v); }

  struct Option {
    Counts hosted;  // per class
    uint32_t hosted_total = 0;
    Overlay ov;
    std::vector<std::pair<uint16_t, Action>> assignment;  // (class, action)
    PlanScore cost;
    size_t seen = 0;
  };
  struct Memo {
    bool feasible = false;
    PlanScore cost;
    size_t option = 0;  // index into options_[g]
  };
  // Options of one GPU as a trie over the counts of the classes eligible
  // there, so that a state visits only the options that fit its remaining
  // demand.
  struct TrieNode {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // (count, node), ascending count
    size_t option = 0;                                   // at depth == classes: the option
  };
  struct Result {
    std::vector<Overlay> overlays;   // per GPU
    std::vector<Assigned> assigned;  // per request instance
    PlanScore cost;
  };

  // Greedy: cheapest action per instance, instance by instance.
  std::optional<Result> Greedy();
  // The cheapest action for class `ci` given `overlays`, over all GPUs; the
  // returned overlay is the GPU's overlay with the action applied.
  struct Step {
    size_t gpu = 0;
    Action action;
    Overlay ov;
    PlanScore delta;
    uint32_t placeable = 0;  // the GPU's pinned placeable profiles after
  };
  std::optional<Step> BestStep(size_t ci, const std::vector<Overlay>& overlays,
                               const std::vector<PlanScore>& costs,
                               const std::vector<uint32_t>& placeable);
  // The node term of a plan whose GPUs keep `placeable` (pinned view).
  int64_t NodeLoss(const std::vector<uint32_t>& placeable) const;
  int64_t NodeLossOf(const std::vector<Overlay>& overlays) const;

  // Exhaustive: per-GPU options + dynamic programme over GPUs.
  std::optional<Result> Exhaustive();
  void Enumerate(size_t g, size_t class_pos, size_t action_start, Overlay& ov, Counts& hosted,
                 std::vector<std::pair<uint16_t, Action>>& assignment,
                 std::unordered_map<Counts, size_t>& index);
  void Record(size_t g, const Overlay& ov, const Counts& hosted,
              const std::vector<std::pair<uint16_t, Action>>& assignment,
              std::unordered_map<Counts, size_t>& index);
  void BuildTrie(size_t g);
  // The cheapest way for GPUs g.. to host `remaining`.
  const Memo& SolveFrom(size_t g, const Counts& remaining);
  void Walk(size_t g, uint32_t node, size_t level, const Counts& remaining, Counts& rest,
            Memo& best);

  // twin_[g]: the first GPU before g with the same table and the same
  // occupants (profile, placement, state, Idle tick; keys aside). Every
  // candidate on g then costs exactly what it costs on the twin, and the
  // twin wins the tie (lower index), so g need not be scored while neither
  // has been touched by the plan.
  void FindTwins();
  bool Untouched(const Overlay& ov) const { return ov.hosted == 0 && ov.reclaimed == 0; }

  Plan BuildPlan(const Result& r, Search search) const;
  Status Explain() const;

  const PlanInput& input_;
  std::vector<Gpu> gpus_;
  std::vector<Class> classes_;
  std::vector<std::optional<size_t>> twin_;
  PlanStats stats_;

  std::vector<std::vector<Option>> options_;            // per GPU, in DP order
  std::vector<std::vector<size_t>> eligible_;           // per GPU: classes with actions there
  std::vector<std::vector<TrieNode>> tries_;            // per GPU; node 0 is the root
  std::vector<std::vector<uint32_t>> suffix_capacity_;  // [g][class]: most GPUs g.. can host
  std::vector<uint32_t> class_units_;                   // least memory units per instance
  std::vector<uint64_t> suffix_units_;                  // [g]: units not Active/Error/Foreign
  std::vector<std::unordered_map<Counts, Memo>> memo_;
};

void Run::FindTwins() {
  twin_.assign(gpus_.size(), std::nullopt);
  auto same = [](const Gpu& a, const Gpu& b) {
    if (a.table != b.table || a.occ.size() != b.occ.size()) return false;
    for (size_t k = 0; k < a.occ.size(); ++k) {
      const Occ& x = a.occ[k];
      const Occ& y = b.occ[k];
      if (x.profile != y.profile || x.placement != y.placement || x.state != y.state) return false;
      if (x.state == OccupantState::kIdle && x.src->last_used != y.src->last_used) return false;
    }
    return true;
  };
  for (size_t g = 1; g < gpus_.size(); ++g) {
    for (size_t t = 0; t < g; ++t) {
      if (!twin_[t].has_value() && same(gpus_[g], gpus_[t])) {
        twin_[g] = t;
        break;
      }
    }
  }
}

int64_t Run::NodeLoss(const std::vector<uint32_t>& placeable) const {
  // Profiles are per table; the node term is defined over the first GPU's
  // table and applies only when every GPU shares it (mixed nodes: 0).
  uint32_t before = 0;
  uint32_t after = 0;
  for (size_t g = 0; g < gpus_.size(); ++g) {
    if (gpus_[g].table != gpus_[0].table) return 0;
    before |= gpus_[g].hard_placeable;
    after |= placeable[g];
  }
  const std::vector<int64_t>& w = gpus_[0].weights->profile;
  return ProfileValue(w, before) - ProfileValue(w, after);
}

int64_t Run::NodeLossOf(const std::vector<Overlay>& overlays) const {
  std::vector<uint32_t> placeable(gpus_.size());
  for (size_t g = 0; g < gpus_.size(); ++g) CostOf(gpus_[g], overlays[g], &placeable[g]);
  return NodeLoss(placeable);
}

std::optional<Run::Step> Run::BestStep(size_t ci, const std::vector<Overlay>& overlays,
                                       const std::vector<PlanScore>& costs,
                                       const std::vector<uint32_t>& placeable) {
  const Class& c = classes_[ci];
  const int64_t node_now = NodeLoss(placeable);
  std::vector<uint32_t> trial = placeable;
  std::optional<Step> best_any;
  // Pass 0: reuse; pass 1: create without reclaiming; pass 2: create with
  // reclaims. The node term and pin_loss lead the cost order, so a later
  // pass can win; every pass is scanned (equal costs: the earlier pass).
  for (int pass = 0; pass < 3; ++pass) {
    std::optional<Step> best;
    for (size_t g = 0; g < gpus_.size(); ++g) {
      const Gpu& gpu = gpus_[g];
      if (const std::optional<size_t> t = twin_[g]; t.has_value() && !c.actions[*t].empty() &&
                                                    Untouched(overlays[g]) &&
                                                    Untouched(overlays[*t])) {
        continue;  // scores exactly as its twin, which wins the tie
      }
      for (const Action& a : c.actions[g]) {
        if (a.reuse != (pass == 0)) continue;
        if (!Compatible(gpu, overlays[g], a)) continue;
        Overlay next = overlays[g];
        Apply(gpu, next, a);
        if (!a.reuse) {
          const uint32_t before = next.reclaimed;
          if (!SettleReclaims(gpu, next, !Exact(c))) continue;
          const bool reclaims = next.reclaimed != before;
          if (reclaims != (pass == 2)) continue;
        }
        ++stats_.candidates_examined;
        uint32_t pl = 0;
        PlanScore delta = CostOf(gpu, next, &pl);
        delta -= costs[g];
        trial[g] = pl;
        delta.node_loss = NodeLoss(trial) - node_now;
        trial[g] = placeable[g];
        if (!best.has_value() || delta < best->delta) best = Step{g, a, next, delta, pl};
      }
    }
    if (best.has_value() && (!best_any.has_value() || best->delta < best_any->delta)) {
      best_any = best;
    }
  }
  return best_any;
}

std::optional<Run::Result> Run::Greedy() {
  Result r;
  r.overlays.assign(gpus_.size(), Overlay{});
  r.assigned.assign(input_.request.size(), Assigned{});
  std::vector<PlanScore> costs(gpus_.size());
  std::vector<uint32_t> placeable(gpus_.size());
  for (size_t g = 0; g < gpus_.size(); ++g) placeable[g] = gpus_[g].hard_placeable;
  for (size_t ci = 0; ci < classes_.size(); ++ci) {
    for (size_t member : classes_[ci].members) {
      std::optional<Step> step = BestStep(ci, r.overlays, costs, placeable);
      if (!step.has_value()) return std::nullopt;
      r.overlays[step->gpu] = step->ov;
      step->delta.node_loss = 0;  // per-GPU costs carry no node term
      costs[step->gpu] += step->delta;
      placeable[step->gpu] = step->placeable;
      r.assigned[member] = Assigned{step->gpu, step->action};
    }
  }
  for (const PlanScore& c : costs) r.cost += c;
  r.cost.node_loss = NodeLoss(placeable);
  return r;
}

void Run::Record(size_t g, const Overlay& ov_in, const Counts& hosted,
                 const std::vector<std::pair<uint16_t, Action>>& assignment,
                 std::unordered_map<Counts, size_t>& index) {
  const Gpu& gpu = gpus_[g];
  Overlay ov = ov_in;
  bool allow_extras = false;
  for (const auto& [ci, a] : assignment) {
    if (!a.reuse && !Exact(classes_[ci])) allow_extras = true;
  }
  if (!SettleReclaims(gpu, ov, allow_extras)) return;
  ++stats_.exhaustive_options;
  std::vector<Option>& opts = options_[g];
  auto it = index.find(hosted);
  PlanScore cost = CostOf(gpu, ov);
  if (it != index.end()) {
    Option& old = opts[it->second];
    if (!(cost < old.cost)) return;
    old.ov = ov;
    old.assignment = assignment;
    old.cost = cost;
    return;
  }
  Option o;
  o.hosted = hosted;
  for (size_t ci = 0; ci < hosted.size(); ++ci) o.hosted_total += At(hosted, ci);
  o.ov = ov;
  o.assignment = assignment;
  o.cost = cost;
  o.seen = opts.size();
  index.emplace(hosted, opts.size());
  opts.push_back(std::move(o));
}

void Run::Enumerate(size_t g, size_t class_pos, size_t action_start, Overlay& ov, Counts& hosted,
                    std::vector<std::pair<uint16_t, Action>>& assignment,
                    std::unordered_map<Counts, size_t>& index) {
  Record(g, ov, hosted, assignment, index);
  const Gpu& gpu = gpus_[g];
  for (size_t ci = class_pos; ci < classes_.size(); ++ci) {
    const Class& c = classes_[ci];
    if (At(hosted, ci) >= c.members.size()) continue;
    const std::vector<Action>& acts = c.actions[g];
    for (size_t ai = (ci == class_pos ? action_start : 0); ai < acts.size(); ++ai) {
      const Action& a = acts[ai];
      if (!Compatible(gpu, ov, a)) continue;
      Apply(gpu, ov, a);
      Set(hosted, ci, At(hosted, ci) + 1u);
      assignment.emplace_back(static_cast<uint16_t>(ci), a);
      Enumerate(g, ci, ai + 1, ov, hosted, assignment, index);
      assignment.pop_back();
      Set(hosted, ci, At(hosted, ci) - 1u);
      Undo(gpu, ov, a);
    }
  }
}

void Run::BuildTrie(size_t g) {
  std::vector<TrieNode>& trie = tries_[g];
  trie.assign(1, TrieNode{});
  const std::vector<size_t>& levels = eligible_[g];
  for (size_t oi = 0; oi < options_[g].size(); ++oi) {
    uint32_t node = 0;
    for (size_t ci : levels) {
      const uint8_t v = At(options_[g][oi].hosted, ci);
      uint32_t next = 0;
      for (const auto& [count, child] : trie[node].children) {
        if (count == v) next = child;
      }
      if (next == 0) {
        next = static_cast<uint32_t>(trie.size());
        trie[node].children.emplace_back(v, next);
        trie.emplace_back();
      }
      node = next;
    }
    trie[node].option = oi;
  }
  for (TrieNode& t : trie) std::sort(t.children.begin(), t.children.end());
}

void Run::Walk(size_t g, uint32_t node, size_t level, const Counts& remaining, Counts& rest,
               Memo& best) {
  const std::vector<size_t>& levels = eligible_[g];
  if (level == levels.size()) {
    for (size_t ci : levels) {
      // A class pinned to this GPU must be done here.
      if (classes_[ci].pinned_gpu == g && At(rest, ci) != 0) return;
    }
    const size_t oi = tries_[g][node].option;
    const Memo& sub = SolveFrom(g + 1, rest);
    if (!sub.feasible) return;
    PlanScore total = options_[g][oi].cost;
    total += sub.cost;
    // Ties: the option first in DP order (see Exhaustive()).
    if (!best.feasible || total < best.cost || (total == best.cost && oi < best.option)) {
      best.feasible = true;
      best.cost = total;
      best.option = oi;
    }
    return;
  }
  const size_t ci = levels[level];
  for (const auto& [count, child] : tries_[g][node].children) {
    if (count > At(remaining, ci)) break;
    const uint32_t left = At(remaining, ci) - count;
    if (left > suffix_capacity_[g + 1][ci]) continue;  // the GPUs after g cannot take the rest
    Set(rest, ci, left);
    Walk(g, child, level + 1, remaining, rest, best);
  }
  Set(rest, ci, At(remaining, ci));
}

const Run::Memo& Run::SolveFrom(size_t g, const Counts& remaining) {
  auto found = memo_[g].find(remaining);
  if (found != memo_[g].end()) return found->second;
  ++stats_.exhaustive_states;
  Memo best;
  if (g == gpus_.size()) {
    best.feasible = std::all_of(remaining.begin(), remaining.end(), [](char n) { return n == 0; });
    return memo_[g].emplace(remaining, best).first->second;
  }
  // Necessary: every instance takes at least its class's memory units on a
  // GPU >= g outside Active/Error/Foreign instances, and classes not
  // eligible here must fit the GPUs after this one.
  uint64_t units = 0;
  bool possible = true;
  for (size_t ci = 0; ci < classes_.size(); ++ci) {
    units += uint64_t{At(remaining, ci)} * class_units_[ci];
    possible = possible && At(remaining, ci) <= suffix_capacity_[g][ci];
  }
  if (possible && units <= suffix_units_[g]) {
    Counts rest = remaining;
    Walk(g, 0, 0, remaining, rest, best);
  }
  return memo_[g].emplace(remaining, best).first->second;
}

std::optional<Run::Result> Run::Exhaustive() {
  const size_t n = gpus_.size();
  const size_t nc = classes_.size();
  options_.assign(n, {});
  eligible_.assign(n, {});
  tries_.assign(n, {});
  for (size_t g = 0; g < n; ++g) {
    for (size_t ci = 0; ci < nc; ++ci) {
      if (!classes_[ci].actions[g].empty()) eligible_[g].push_back(ci);
    }
    if (const std::optional<size_t> t = twin_[g]; t.has_value() && eligible_[g] == eligible_[*t]) {
      // Same table, occupants (hence occupant indices) and eligible classes:
      // the twin's options, already sorted, apply as they are.
      options_[g] = options_[*t];
      tries_[g] = tries_[*t];
      continue;
    }
    Overlay ov;
    Counts hosted(nc, '\0');
    std::vector<std::pair<uint16_t, Action>> assignment;
    std::unordered_map<Counts, size_t> index;
    Enumerate(g, 0, 0, ov, hosted, assignment, index);
    // DP order, which decides ties in cost: options hosting more first (so
    // lower GPU indices host more), then enumeration order (reuse before
    // create, lower starts first).
    std::stable_sort(options_[g].begin(), options_[g].end(), [](const Option& a, const Option& b) {
      return a.hosted_total > b.hosted_total;
    });
    BuildTrie(g);
  }
  suffix_capacity_.assign(n + 1, std::vector<uint32_t>(nc, 0));
  suffix_units_.assign(n + 1, 0);
  for (size_t g = n; g-- > 0;) {
    for (size_t ci = 0; ci < nc; ++ci) {
      uint32_t most = 0;
      for (const Option& o : options_[g]) most = std::max<uint32_t>(most, At(o.hosted, ci));
      suffix_capacity_[g][ci] = suffix_capacity_[g + 1][ci] + most;
    }
    suffix_units_[g] = suffix_units_[g + 1] + gpus_[g].model->memory_slices -
                       static_cast<uint64_t>(std::popcount(gpus_[g].hard_mask));
  }
  class_units_.assign(nc, 0);
  for (size_t ci = 0; ci < nc; ++ci) {
    uint32_t least = std::numeric_limits<uint32_t>::max();
    for (size_t g = 0; g < n; ++g) {
      if (classes_[ci].actions[g].empty()) continue;
      least = std::min(least, classes_[ci].actions[g].front().placement.size);
    }
    class_units_[ci] = least == std::numeric_limits<uint32_t>::max() ? 0 : least;
  }
  memo_.assign(n + 1, {});
  Counts demand(nc, '\0');
  for (size_t ci = 0; ci < nc; ++ci) Set(demand, ci, classes_[ci].members.size());
  if (!SolveFrom(0, demand).feasible) return std::nullopt;

  Result r;
  r.overlays.assign(n, Overlay{});
  r.assigned.assign(input_.request.size(), Assigned{});
  std::vector<size_t> next_member(nc, 0);
  Counts remaining = demand;
  for (size_t g = 0; g < n; ++g) {
    const Memo& m = SolveFrom(g, remaining);
    const Option& o = options_[g][m.option];
    r.overlays[g] = o.ov;
    r.cost += o.cost;
    for (const auto& [ci, a] : o.assignment) {
      r.assigned[classes_[ci].members[next_member[ci]++]] = Assigned{g, a};
    }
    for (size_t ci = 0; ci < nc; ++ci) Set(remaining, ci, At(remaining, ci) - At(o.hosted, ci));
  }
  r.cost.node_loss = NodeLossOf(r.overlays);
  return r;
}

Plan Run::BuildPlan(const Result& result, Search search) const {
  // Identical request instances receive their results in ascending (GPU,
  // start) order, whatever order the search produced them in.
  Result r = result;
  for (const Class& c : classes_) {
    std::vector<Assigned> got;
    for (size_t m : c.members) got.push_back(r.assigned[m]);
    std::sort(got.begin(), got.end(), [](const Assigned& a, const Assigned& b) {
      return std::tuple(a.gpu, a.action.placement, !a.action.reuse) <
             std::tuple(b.gpu, b.action.placement, !b.action.reuse);
    });
    for (size_t k = 0; k < c.members.size(); ++k) r.assigned[c.members[k]] = got[k];
  }
  Plan plan;
  plan.search = search;
  plan.score = r.cost;
  plan.stats = stats_;
  plan.instances.resize(input_.request.size());
  for (size_t i = 0; i < r.assigned.size(); ++i) {
    const Assigned& as = r.assigned[i];
    const Gpu& g = gpus_[as.gpu];
    const mig::GiProfile& prof = g.model->gi_profiles[as.action.profile];
    InstancePlan& ip = plan.instances[i];
    ip.gpu = g.index;
    ip.profile = prof.name;
    ip.profile_id = prof.id;
    if (as.action.reuse) {
      const Occ& o = g.occ[as.action.occ];
      ip.stage = Stage::kReuse;
      ip.placement = o.placement;
      ip.reuse_key = o.src->key;
    } else {
      ip.stage = Stage::kFree;
      ip.placement = as.action.placement;
    }
  }
  // Attribute each reclaimed instance to one request instance: the first (in
  // request order) whose create overlaps it; else (it was reclaimed for
  // instanceCount or engines) the first non-exact create on that GPU.
  std::vector<bool> exact(input_.request.size(), false);
  for (const Class& c : classes_) {
    for (size_t m : c.members) exact[m] = Exact(c);
  }
  for (size_t gi = 0; gi < gpus_.size(); ++gi) {
    const Gpu& g = gpus_[gi];
    const uint32_t reclaimed = r.overlays[gi].reclaimed;
    for (uint32_t bits = reclaimed; bits != 0; bits &= bits - 1) {
      const Occ& o = g.occ[static_cast<size_t>(std::countr_zero(bits))];
      std::optional<size_t> owner;
      std::optional<size_t> fallback;
      for (size_t i = 0; i < r.assigned.size(); ++i) {
        const Assigned& as = r.assigned[i];
        if (as.gpu != gi || as.action.reuse) continue;
        if (!owner.has_value() && (as.action.mask & o.mask) != 0) owner = i;
        if (!fallback.has_value() && !exact[i]) fallback = i;
      }
      if (!owner.has_value()) owner = fallback;
      if (!owner.has_value()) continue;  // unreachable: extras need a non-exact create
      plan.instances[*owner].reclaim.push_back(
          ReclaimedInstance{g.index, o.src->key, g.model->gi_profiles[o.profile].name, o.placement,
                            o.src->last_used});
    }
    for (size_t i = 0; i < r.assigned.size(); ++i) {
      const Assigned& as = r.assigned[i];
      if (as.gpu != gi || as.action.reuse) continue;
      bool overlaps = false;
      for (uint32_t bits = reclaimed; bits != 0; bits &= bits - 1) {
        if ((g.occ[static_cast<size_t>(std::countr_zero(bits))].mask & as.action.mask) != 0) {
          overlaps = true;
        }
      }
      if (overlaps || !plan.instances[i].reclaim.empty()) plan.instances[i].stage = Stage::kReclaim;
    }
  }
  plan.stage = Stage::kReuse;
  for (const InstancePlan& ip : plan.instances) plan.stage = std::max(plan.stage, ip.stage);
  return plan;
}

Status Run::Explain() const {
  // First: an instance that cannot be placed even alone.
  const std::vector<Overlay> empty(gpus_.size());
  for (size_t i = 0; i < input_.request.size(); ++i) {
    size_t ci = 0;
    while (std::find(classes_[ci].members.begin(), classes_[ci].members.end(), i) ==
           classes_[ci].members.end()) {
      ++ci;
    }
    const Class& c = classes_[ci];
    bool fits = false;
    std::vector<size_t> considered;
    for (size_t g = 0; g < gpus_.size(); ++g) {
      if (c.gpu.has_value() && gpus_[g].index != *c.gpu) continue;
      considered.push_back(g);
      for (const Action& a : c.actions[g]) {
        Overlay ov;
        Apply(gpus_[g], ov, a);
        if (a.reuse || SettleReclaims(gpus_[g], ov, !Exact(c))) fits = true;
      }
    }
    if (fits) continue;
    std::string msg = "no placement for " + c.profile;
    if (c.placement.has_value()) msg += "@" + c.placement->ToString();
    msg += " (request instance " + std::to_string(i) + "); considered GPU" +
           (considered.size() == 1 ? " " : "s ") + JoinIndices(gpus_, considered);
    for (size_t g : considered) msg += " | " + DescribeBlocked(gpus_, g, c);
    return ResourceExhaustedError(msg);
  }
  // Every instance fits alone: the combination is what fails.
  std::string names;
  std::string alone;
  for (size_t i = 0; i < input_.request.size(); ++i) {
    const InstanceRequest& req = input_.request[i];
    if (!names.empty()) names += ", ";
    names += req.profile;
    size_t ci = 0;
    while (std::find(classes_[ci].members.begin(), classes_[ci].members.end(), i) ==
           classes_[ci].members.end()) {
      ++ci;
    }
    const Class& c = classes_[ci];
    std::string spots;
    size_t listed = 0;
    size_t more = 0;
    for (size_t g = 0; g < gpus_.size(); ++g) {
      for (const Action& a : c.actions[g]) {
        Overlay ov;
        Apply(gpus_[g], ov, a);
        const bool ok = a.reuse || SettleReclaims(gpus_[g], ov, !Exact(c));
        if (!ok) continue;
        if (listed == 4) {
          ++more;
          continue;
        }
        ++listed;
        if (!spots.empty()) spots += ", ";
        const mig::Placement pl = a.reuse ? gpus_[g].occ[a.occ].placement : a.placement;
        spots += "GPU " + std::to_string(gpus_[g].index.value()) + " " + pl.ToString() + " (" +
                 (a.reuse ? "reuse" : (ov.reclaimed != 0 ? "reclaim" : "free")) + ")";
      }
    }
    if (more > 0) spots += " and " + std::to_string(more) + " more";
    alone += " | instance " + std::to_string(i) + " " + req.profile + ": " + spots;
  }
  std::vector<size_t> all(gpus_.size());
  for (size_t g = 0; g < all.size(); ++g) all[g] = g;
  return ResourceExhaustedError(
      "no joint placement for the " + std::to_string(input_.request.size()) + " instances (" +
      names + "): each fits alone but not all together; the exhaustive search over GPU" +
      (all.size() == 1 ? " " : "s ") + JoinIndices(gpus_, all) + " found no layout (" +
      std::to_string(stats_.exhaustive_options) + " per-GPU options, " +
      std::to_string(stats_.exhaustive_states) + " states). Alone they fit at:" + alone);
}

StatusOr<Plan> Run::Solve(PlannerCounters& counters) {
  std::optional<Result> greedy = Greedy();
  stats_.greedy_failed = !greedy.has_value();
  const bool multi = input_.request.size() > 1;
  std::optional<Result> exhaustive;
  // One instance: the greedy scan covered every candidate already. Several:
  // search jointly when greedy failed or had to reclaim.
  if (multi && (!greedy.has_value() || greedy->cost.destroyed_instances > 0)) {
    ++counters.exhaustive_runs;
    exhaustive = Exhaustive();
  }
  if (exhaustive.has_value() && (!greedy.has_value() || exhaustive->cost < greedy->cost)) {
    return BuildPlan(*exhaustive, Search::kExhaustive);
  }
  if (greedy.has_value()) return BuildPlan(*greedy, Search::kGreedy);
  return Explain();
}

}  // namespace

// ---------------------------------------------------------------------------
// Planner.

Planner::Planner() = default;
Planner::~Planner() = default;

void Planner::ClearCache() { tables_.clear(); }

StatusOr<const Table*> Planner::TableFor(const mig::GpuModel& model) {
  auto it = tables_.find(&model);
  if (it != tables_.end()) {
    const Table& t = *it->second;
    if (t.profiles_data == model.gi_profiles.data() &&
        t.profile_count == model.gi_profiles.size() && t.memory_slices == model.memory_slices) {
      ++counters_.table_cache_hits;
      return &t;
    }
    tables_.erase(it);
  }
  MIGD_RETURN_IF_ERROR(ValidateGpuTable(model, "model " + model.key));
  ++counters_.table_cache_misses;
  auto [pos, inserted] = tables_.emplace(&model, BuildTable(model));
  (void)inserted;
  return pos->second.get();
}

StatusOr<Plan> Planner::MakePlan(const PlanInput& input) {
  auto invalid = [this](Status s) {
    ++counters_.invalid;
    return s;
  };
  if (input.gpus.empty()) return invalid(InvalidArgumentError("gpus: no GPUs in the input"));
  if (input.request.empty()) {
    return invalid(InvalidArgumentError("request: no instances requested"));
  }
  for (const auto& [name, weight] : input.demand) {
    if (!std::isfinite(weight) || weight < 0.0) {
      return invalid(
          InvalidArgumentError("demand['" + name + "']: weight must be finite and >= 0"));
    }
  }

  // Canonical GPU order: ascending index.
  std::vector<size_t> order(input.gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return input.gpus[a].index < input.gpus[b].index; });

  // Reserved up front: Gpu::weights points into it.
  std::vector<std::pair<const Table*, Weights>> weights;
  weights.reserve(order.size());
  std::vector<Gpu> gpus;
  gpus.reserve(order.size());
  std::vector<std::pair<std::string_view, size_t>> keys;  // (key, GPU input position)
  for (size_t pos : order) {
    const GpuLayout& in = input.gpus[pos];
    // Built only for an error message: this loop is on the hot path.
    auto where = [pos] { return "gpus[" + std::to_string(pos) + "]"; };
    if (!gpus.empty() && gpus.back().index == in.index) {
      return invalid(InvalidArgumentError(where() + ": duplicate GPU index " +
                                          std::to_string(in.index.value())));
    }
    if (in.model == nullptr) return invalid(InvalidArgumentError(where() + ".model: missing"));
    StatusOr<const Table*> table = TableFor(*in.model);
    if (!table.ok()) return invalid(table.status().WithContext(where()));
    Gpu g;
    g.index = in.index;
    g.model = in.model;
    g.table = *table;
    const Weights* w = nullptr;
    for (const auto& [t, tw] : weights) {
      if (t == g.table) w = &tw;
    }
    if (w == nullptr) {
      weights.emplace_back(g.table, BuildWeights(*g.table, input.demand));
      w = &weights.back().second;
    }
    g.weights = w;

    g.occ.reserve(in.occupants.size());
    for (size_t k = 0; k < in.occupants.size(); ++k) {
      const Occupant& o = in.occupants[k];
      auto owhere = [&] { return where() + ".occupants[" + std::to_string(k) + "]"; };
      const mig::GiProfile* p = in.model->FindProfileByName(o.profile);
      if (p == nullptr) {
        return invalid(InvalidArgumentError(owhere() + ".profile: '" + o.profile +
                                            "' is not a profile of " + in.model->key));
      }
      if (!p->HasPlacement(o.placement)) {
        return invalid(InvalidArgumentError(
            owhere() + ".placement: " + o.placement.ToString() + " is not listed for " + p->name +
            " on " + in.model->key + " (listed: " + PlacementsText(p->placements, " ") + ")"));
      }
      const bool keyed = o.state == OccupantState::kActive || o.state == OccupantState::kIdle;
      if (keyed && o.key.empty()) {
        return invalid(InvalidArgumentError(owhere() + ".key: required for " +
                                            std::string(OccupantStateName(o.state)) +
                                            " instances"));
      }
      if (!o.key.empty()) keys.emplace_back(o.key, pos);
      Occ occ;
      occ.src = &o;
      occ.profile = static_cast<uint16_t>(p - in.model->gi_profiles.data());
      occ.mask = o.placement.Mask();
      occ.placement = o.placement;
      occ.state = o.state;
      g.occ.push_back(occ);
    }
    std::sort(g.occ.begin(), g.occ.end(),
              [](const Occ& a, const Occ& b) { return a.placement < b.placement; });
    for (size_t k = 0; k < g.occ.size(); ++k) {
      const Occ& o = g.occ[k];
      if ((g.all.mask & o.mask) != 0) {
        for (size_t j = 0; j < k; ++j) {
          if (g.occ[j].placement.Overlaps(o.placement)) {
            return invalid(InvalidArgumentError(
                where() + ".occupants: " + g.model->gi_profiles[o.profile].name + "@" +
                o.placement.ToString() + " overlaps " +
                g.model->gi_profiles[g.occ[j].profile].name + "@" + g.occ[j].placement.ToString()));
          }
        }
      }
      AddTo(g.all, *g.table, o.profile, o.mask);
      // k < 32: occupants are listed placements (inside the table's <= 32
      // units) and do not overlap, so they fit the uint32_t bit sets.
      if (o.state == OccupantState::kIdle) {
        g.idle_bits |= 1u << k;
      } else {
        AddTo(g.hard, *g.table, o.profile, o.mask);
        g.hard_mask |= o.mask;
      }
    }
    g.fill = std::popcount(g.all.mask);
    const ViewScores all_scores = Scores(*g.table, *w, g.all);
    g.s_all_weighted = all_scores.weighted;
    g.s_all_uniform = all_scores.uniform;
    g.hard_placeable = all_scores.placeable;
    g.s_hard_weighted = g.idle_bits == 0
                            ? g.s_all_weighted
                            : Score(*g.table, w->weighted, g.hard, &g.hard_placeable);
    gpus.push_back(std::move(g));
  }
  std::sort(keys.begin(), keys.end());
  for (size_t k = 1; k < keys.size(); ++k) {
    if (keys[k].first == keys[k - 1].first) {
      return invalid(InvalidArgumentError("gpus[" + std::to_string(keys[k].second) +
                                          "].occupants: duplicate key '" +
                                          std::string(keys[k].first) + "'"));
    }
  }

  // Request classes.
  std::vector<Class> classes;
  for (size_t i = 0; i < input.request.size(); ++i) {
    const InstanceRequest& req = input.request[i];
    auto where = [i] { return "request[" + std::to_string(i) + "]"; };
    std::optional<size_t> pinned;
    if (req.gpu.has_value()) {
      for (size_t g = 0; g < gpus.size(); ++g) {
        if (gpus[g].index == *req.gpu) pinned = g;
      }
      if (!pinned.has_value()) {
        std::vector<size_t> all(gpus.size());
        for (size_t g = 0; g < all.size(); ++g) all[g] = g;
        return invalid(InvalidArgumentError(where() + ".gpu: unknown GPU " +
                                            std::to_string(req.gpu->value()) +
                                            " (GPUs: " + JoinIndices(gpus, all) + ")"));
      }
    }
    auto same = [&](const Class& c) {
      return c.profile == req.profile && c.gpu == req.gpu && c.placement == req.placement;
    };
    auto it = std::find_if(classes.begin(), classes.end(), same);
    if (it != classes.end()) {
      it->members.push_back(i);
      continue;
    }
    Class c;
    c.profile = req.profile;
    c.gpu = req.gpu;
    c.placement = req.placement;
    c.members.push_back(i);
    c.pinned_gpu = pinned;
    c.rank =
        req.placement.has_value() ? (req.gpu.has_value() ? 0 : 1) : (req.gpu.has_value() ? 2 : 3);
    c.actions.assign(gpus.size(), {});
    c.resolved.assign(gpus.size(), -1);
    const mig::GiProfile* first_known = nullptr;
    const mig::GpuModel* first_model = nullptr;
    bool listed = false;
    const mig::GpuModel* last_model = nullptr;  // GPUs of one model resolve alike
    const mig::GiProfile* last_profile = nullptr;
    for (size_t g = 0; g < gpus.size(); ++g) {
      if (pinned.has_value() && g != *pinned) continue;
      if (gpus[g].model != last_model) {
        last_model = gpus[g].model;
        last_profile = last_model->FindProfileByName(req.profile);
      }
      const mig::GiProfile* p = last_profile;
      if (p == nullptr) continue;
      c.resolved[g] = static_cast<int>(p - gpus[g].model->gi_profiles.data());
      if (first_known == nullptr) {
        c.size = p->placement_size();
        c.compute = p->slice_count;
        first_known = p;
        first_model = gpus[g].model;
      }
      if (req.placement.has_value() && !p->HasPlacement(*req.placement)) continue;
      listed = true;
      const auto prof = static_cast<uint16_t>(c.resolved[g]);
      std::vector<Action>& acts = c.actions[g];
      const Gpu& gpu = gpus[g];
      for (size_t k = 0; k < gpu.occ.size(); ++k) {
        const Occ& o = gpu.occ[k];
        if (o.state != OccupantState::kIdle || o.profile != prof) continue;
        if (req.placement.has_value() && o.placement != *req.placement) continue;
        Action a;
        a.reuse = true;
        a.profile = prof;
        a.occ = static_cast<uint8_t>(k);
        a.placement = o.placement;
        a.mask = o.mask;
        acts.push_back(a);
      }
      for (const mig::Placement& pl : p->placements) {
        if (req.placement.has_value() && pl != *req.placement) continue;
        if ((pl.Mask() & gpu.hard_mask) != 0) continue;
        Action a;
        a.profile = prof;
        a.placement = pl;
        a.mask = pl.Mask();
        acts.push_back(a);
      }
    }
    if (first_known == nullptr) {
      if (pinned.has_value()) {
        return invalid(InvalidArgumentError(
            where() + ".profile: '" + req.profile + "' is not a profile of GPU " +
            std::to_string(req.gpu->value()) + " (" + gpus[*pinned].model->key + ")"));
      }
      return invalid(InvalidArgumentError(where() + ".profile: '" + req.profile +
                                          "' is not a profile of any GPU"));
    }
    if (!listed) {
      return invalid(InvalidArgumentError(
          where() + ".placement: " + req.placement->ToString() + " is not listed for " +
          first_known->name + " on " + first_model->key +
          " (listed: " + PlacementsText(first_known->placements, " ") + ")"));
    }
    classes.push_back(std::move(c));
  }
  if (input.request.size() > std::numeric_limits<uint8_t>::max()) {
    return invalid(InvalidArgumentError("request: more than 255 instances"));
  }
  // Exact placements pinned to one GPU must not overlap each other.
  for (size_t i = 0; i < input.request.size(); ++i) {
    const InstanceRequest& a = input.request[i];
    if (!a.gpu.has_value() || !a.placement.has_value()) continue;
    for (size_t j = i + 1; j < input.request.size(); ++j) {
      const InstanceRequest& b = input.request[j];
      if (b.gpu == a.gpu && b.placement.has_value() && a.placement->Overlaps(*b.placement)) {
        return invalid(InvalidArgumentError(
            "request[" + std::to_string(i) + "] and request[" + std::to_string(j) +
            "]: placements " + a.placement->ToString() + " and " + b.placement->ToString() +
            " overlap on GPU " + std::to_string(a.gpu->value())));
      }
    }
  }
  // Most constrained first, larger first; the rest is only for a canonical
  // order independent of the request's order.
  std::stable_sort(classes.begin(), classes.end(), [](const Class& a, const Class& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.size != b.size) return a.size > b.size;
    if (a.compute != b.compute) return a.compute > b.compute;
    if (a.profile != b.profile) return a.profile < b.profile;
    if (a.gpu != b.gpu) return a.gpu < b.gpu;
    return a.placement < b.placement;
  });

  Run run(input, std::move(gpus), std::move(classes));
  StatusOr<Plan> plan = run.Solve(counters_);
  if (!plan.ok()) {
    if (IsResourceExhausted(plan.status())) ++counters_.exhausted;
    return plan;
  }
  ++counters_.plans;
  if (plan->search == Search::kGreedy) {
    ++counters_.greedy_plans;
  } else {
    ++counters_.exhaustive_plans;
  }
  if (plan->stats.greedy_failed) ++counters_.greedy_failures;
  counters_.candidates_examined += plan->stats.candidates_examined;
  counters_.exhaustive_options += plan->stats.exhaustive_options;
  counters_.exhaustive_states += plan->stats.exhaustive_states;
  return plan;
}

StatusOr<Plan> MakePlan(const PlanInput& input) {
  Planner planner;
  return planner.MakePlan(input);
}

}  // namespace migd::planner
