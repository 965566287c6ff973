#include "planner/gpu_context.h"

#include <bit>

#include "planner/value_policy.h"

namespace migd::planner::internal_planner {
namespace {

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

// Whether the created instances are legal in the actual view: instanceCount
// of every created profile and the GPU's engine budget.
bool CreatesLegal(const Gpu& g, const Overlay& ov, const View& actual) {
  if (ov.n_creates == 0) return true;
  uint32_t created = 0;
  for (uint32_t i = 0; i < ov.n_creates; ++i) created |= 1u << ov.creates[i].profile;
  return mig::WithinLimits(g.rules(), actual, created);
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
  const mig::EngineVector none{};
  for (uint32_t bits = g.idle_bits & ~ov.reused & ~ov.reclaimed; bits != 0; bits &= bits - 1) {
    const int i = std::countr_zero(bits);
    const Occ& o = g.occ[static_cast<size_t>(i)];
    if (((created_profiles >> o.profile) & 1u) != 0 || !(g.rules().engines(o.profile) == none)) {
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

}  // namespace

View ActualView(const Gpu& g, const Overlay& ov) {
  View v = g.all;
  for (uint32_t bits = ov.reclaimed; bits != 0; bits &= bits - 1) {
    const Occ& o = g.occ[static_cast<size_t>(std::countr_zero(bits))];
    v.Remove(g.rules(), o.profile, o.mask);
  }
  for (uint32_t i = 0; i < ov.n_creates; ++i) {
    v.Add(g.rules(), ov.creates[i].profile, ov.creates[i].mask);
  }
  return v;
}

View PinnedView(const Gpu& g, const Overlay& ov) {
  View v = g.hard;
  for (uint32_t bits = ov.reused; bits != 0; bits &= bits - 1) {
    const Occ& o = g.occ[static_cast<size_t>(std::countr_zero(bits))];
    v.Add(g.rules(), o.profile, o.mask);
  }
  for (uint32_t i = 0; i < ov.n_creates; ++i) {
    v.Add(g.rules(), ov.creates[i].profile, ov.creates[i].mask);
  }
  return v;
}

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
  ov.creates[ov.n_creates++] = Create{a.profile, a.mask, a.slot};
  ov.create_mask |= a.mask;
}

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

bool SettleReclaims(const Gpu& g, Overlay& ov, bool allow_extras) {
  ov.reclaimed |= MandatoryReclaims(g, ov);
  if (CreatesLegal(g, ov, ActualView(g, ov))) return true;
  if (!allow_extras) return false;
  std::optional<uint32_t> extra = CheapestExtraReclaims(g, ov);
  if (!extra.has_value()) return false;
  ov.reclaimed |= *extra;
  return true;
}

PlanScore CostOf(const Gpu& g, const Overlay& ov, uint32_t* pinned_placeable) {
  PlanScore s = CheapCostOf(g, ov);
  const ViewScores actual = Scores(*g.table, *g.weights, ActualView(g, ov));
  s.loss = g.s_all_weighted - actual.weighted;
  s.uniform_loss = g.s_all_uniform - actual.uniform;
  s.fill = -g.fill * static_cast<int64_t>(ov.hosted);
  s.opened_gpus = g.hard_mask == 0 && ov.hosted > 0 ? 1 : 0;
  if (g.values != nullptr) s.value_loss = ValueLoss(g, ov);
  if (g.value_leads) {
    // The values order the candidates; the cost order's leading terms are
    // not computed (pin_loss, opened_gpus and the node term stay 0).
    s.opened_gpus = 0;
    if (pinned_placeable != nullptr) *pinned_placeable = 0;
    return s;
  }
  // Without Idle instances the pinned view is the actual view.
  uint32_t pl = actual.placeable;
  if (g.idle_bits == 0) {
    s.pin_loss = s.loss;
  } else {
    s.pin_loss = g.s_hard_weighted - Score(*g.table, g.weights->weighted, PinnedView(g, ov), &pl);
  }
  if (pinned_placeable != nullptr) *pinned_placeable = pl;
  return s;
}

}  // namespace migd::planner::internal_planner
