// File: planner/gpu_context.h
//
// Internal to the planner. The canonical per-GPU context of one planning
// call (Gpu: occupants in placement order, the views with and without Idle
// instances, their scores) and what a (partial) plan does on that GPU
// (Overlay: creates, reuses, reclaims), with the operations the searches
// need: applying and undoing an action, settling the reclaims a create
// implies, and costing an overlay (docs/planner.md, "The cost order").
//
// Thread-safety: plain data and pure functions.
#ifndef MIGD_PLANNER_GPU_CONTEXT_H_
#define MIGD_PLANNER_GPU_CONTEXT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/ids.h"
#include "mig/catalog.h"
#include "mig/legality.h"
#include "mig/placement.h"
#include "planner/planner.h"
#include "planner/scoring.h"
#include "planner/value_table.h"

namespace migd::planner::internal_planner {

inline constexpr size_t kMaxUnits = mig::kMaxMemorySlices;

// One occupant, resolved against the GPU's table.
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
  // The value policy (value_policy.h); null when this call uses the cost order.
  const ValueTable* values = nullptr;
  int value_state = -1;  // the pinned view's state
  // The values lead the cost (one GPU, or ValueOptions::multi_gpu is
  // kSeparable); else they break the ties of the cost order.
  bool value_leads = false;
  std::vector<int16_t> occ_slots;  // per occ: its slot in `values`, or -1

  const mig::PlacementRules& rules() const { return table->rules; }
};

struct Create {
  uint16_t profile = 0;
  uint32_t mask = 0;
  int16_t slot = -1;  // value table slot (value policy only)
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

// One way to host a request instance on a GPU.
struct Action {
  bool reuse = false;
  uint16_t profile = 0;
  uint8_t occ = 0;  // reuse: index into Gpu::occ
  mig::Placement placement;
  uint32_t mask = 0;
  int16_t slot = -1;  // value table slot of the placed GI (value policy only)
};

// The GPU after `ov`: every occupant not reclaimed, plus the creates.
View ActualView(const Gpu& g, const Overlay& ov);
// Idle instances count as free unless this plan reuses them.
View PinnedView(const Gpu& g, const Overlay& ov);

// Whether `a` can be added to `ov` (no overlap with this plan's creates or
// reuses; no Idle instance used twice or both reused and reclaimed).
bool Compatible(const Gpu& g, const Overlay& ov, const Action& a);
void Apply(const Gpu& g, Overlay& ov, const Action& a);
// Reverts the last Apply(g, ov, a) (no reclaims settled in between).
void Undo(const Gpu& g, Overlay& ov, const Action& a);

// Completes the reclaim set of an overlay whose creates were just added:
// the Idle instances overlapping a create, then (if `allow_extras` and
// instanceCount or the engine budget require it) the cheapest further set:
// fewest slices, then fewest instances, then least recently used. Returns
// false when the creates cannot be made legal.
bool SettleReclaims(const Gpu& g, Overlay& ov, bool allow_extras);

// The cost of everything `ov` does on `g`, relative to the input state,
// without the node term (node_loss = 0; it depends on every GPU). Under the
// value policy (g.values set) value_loss leads and pin_loss is not computed.
// *pinned_placeable (if given) receives the profiles still placeable on `g`
// in the pinned view after `ov`.
PlanScore CostOf(const Gpu& g, const Overlay& ov, uint32_t* pinned_placeable = nullptr);

}  // namespace migd::planner::internal_planner

#endif  // MIGD_PLANNER_GPU_CONTEXT_H_
