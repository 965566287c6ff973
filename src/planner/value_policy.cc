#include "planner/value_policy.h"

#include <bit>
#include <cmath>
#include <limits>
#include <map>

namespace migd::planner::internal_planner {
namespace {

int64_t Quantised(double h) { return std::llround(h * static_cast<double>(kValueScale)); }

// Bit p: profile p is present (any state) or requested on GPU position g.
uint32_t NeededProfiles(const Canonical& canon, size_t g) {
  uint32_t needed = 0;
  for (const Occ& o : canon.gpus[g].occ) {
    if (o.state != OccupantState::kIdle) needed |= 1u << o.profile;
  }
  for (const Class& c : canon.classes) {
    if (c.resolved[g] >= 0 && !c.actions[g].empty()) needed |= 1u << c.resolved[g];
  }
  return needed;
}

// The state of g's pinned view and every occupant's slot; false if some
// Active/Error/Foreign occupant has no slot (not in the table).
bool PinnedState(const ValueTable& t, const Gpu& g, int* state, std::vector<int16_t>* slots) {
  uint64_t set = 0;
  slots->assign(g.occ.size(), -1);
  for (size_t k = 0; k < g.occ.size(); ++k) {
    const Occ& o = g.occ[k];
    const int slot = t.SlotOf(o.profile, o.placement.start);
    (*slots)[k] = static_cast<int16_t>(slot);
    if (o.state == OccupantState::kIdle) continue;
    if (slot < 0) return false;
    set |= uint64_t{1} << slot;
  }
  *state = t.StateOf(set);
  return *state >= 0;
}

}  // namespace

bool AttachValues(ValueService& service, Canonical& canon,
                  std::vector<std::shared_ptr<const ValueTable>>& keep) {
  const size_t n = canon.gpus.size();
  // Keyed by the table's own copy of the model: GPUs of one table (one model
  // object each in the engine) share one lookup and the service's fast path.
  auto model_of = [&canon](size_t g) { return canon.gpus[g].table->model.get(); };
  std::map<const mig::GpuModel*, uint32_t> needed;  // per model, over its GPUs
  for (size_t g = 0; g < n; ++g) needed[model_of(g)] |= NeededProfiles(canon, g);
  std::map<const mig::GpuModel*, std::shared_ptr<const ValueTable>> tables;
  for (const auto& [model, mask] : needed) {
    std::shared_ptr<const ValueTable> t = service.Values(*model, mask);
    if (t == nullptr) return false;
    tables[model] = t;
  }
  std::vector<int> states(n, -1);
  std::vector<std::vector<int16_t>> slots(n);
  for (size_t g = 0; g < n; ++g) {
    if (!PinnedState(*tables[model_of(g)], canon.gpus[g], &states[g], &slots[g])) {
      return false;
    }
  }
  const bool leads = n == 1 || service.options().multi_gpu == MultiGpuValues::kSeparable;
  for (size_t g = 0; g < n; ++g) {
    Gpu& gpu = canon.gpus[g];
    gpu.value_leads = leads;
    gpu.values = tables[model_of(g)].get();
    gpu.value_state = states[g];
    gpu.occ_slots = std::move(slots[g]);
  }
  for (Class& c : canon.classes) {
    for (size_t g = 0; g < n; ++g) {
      for (Action& a : c.actions[g]) {
        a.slot = static_cast<int16_t>(canon.gpus[g].values->SlotOf(a.profile, a.placement.start));
      }
    }
  }
  for (auto& [model, t] : tables) keep.push_back(std::move(t));
  return true;
}

int ValueStateAfter(const Gpu& g, const Overlay& ov) {
  int s = g.value_state;
  for (uint32_t bits = ov.reused; bits != 0 && s >= 0; bits &= bits - 1) {
    const int16_t slot = g.occ_slots[static_cast<size_t>(std::countr_zero(bits))];
    s = slot < 0 ? -1 : g.values->Add(s, slot);
  }
  for (uint32_t i = 0; i < ov.n_creates && s >= 0; ++i) {
    const int16_t slot = ov.creates[i].slot;
    s = slot < 0 ? -1 : g.values->Add(s, slot);
  }
  return s;
}

int64_t ValueLoss(const Gpu& g, const Overlay& ov) {
  const int after = ValueStateAfter(g, ov);
  // Unreachable for legal overlays (the pinned view is a subset of a legal
  // layout); a huge loss keeps such a candidate last.
  if (after < 0) return std::numeric_limits<int64_t>::max() / 4;
  return Quantised(g.values->Value(g.value_state)) - Quantised(g.values->Value(after));
}

}  // namespace migd::planner::internal_planner
