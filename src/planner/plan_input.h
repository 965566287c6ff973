// File: planner/plan_input.h
//
// Internal to the planner. Validation and canonicalisation of a PlanInput:
// GPUs in ascending index with their occupants resolved and sorted by
// placement (Gpu), the request grouped into classes of identical instances
// with every action each class has on each GPU (Class), most constrained
// class first. Every kInvalidArgument of MakePlan comes from here (the list
// is in planner.h).
//
// Thread-safety: pure functions; the result points into the input.
#ifndef MIGD_PLANNER_PLAN_INPUT_H_
#define MIGD_PLANNER_PLAN_INPUT_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "planner/gpu_context.h"
#include "planner/planner.h"
#include "planner/scoring.h"

namespace migd::planner::internal_planner {

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

inline bool Exact(const Class& c) { return c.placement.has_value(); }

// The canonical form of one call. Gpu::weights point into `weights`, so the
// struct may be moved but not copied.
struct Canonical {
  std::vector<std::pair<const Table*, Weights>> weights;  // one per distinct table
  std::vector<Gpu> gpus;                                  // ascending index
  std::vector<Class> classes;                             // search order
  // PlannerOptions::reuse_margin in kValueScale units; none without values.
  std::optional<int64_t> reuse_margin;

  Canonical() = default;
  Canonical(Canonical&&) = default;
  Canonical& operator=(Canonical&&) = default;
  Canonical(const Canonical&) = delete;
  Canonical& operator=(const Canonical&) = delete;
};

// The planner's per-table cache.
using TableLookup = std::function<StatusOr<const Table*>(const mig::GpuModel&)>;

StatusOr<Canonical> Canonicalise(const PlanInput& input, const TableLookup& table_for);

// "0, 1, 3": the indices of gpus[which...].
std::string JoinIndices(const std::vector<Gpu>& gpus, const std::vector<size_t>& which);
// "0:1 2:1", or "none" when empty.
std::string PlacementsText(const std::vector<mig::Placement>& ps, std::string_view sep);

}  // namespace migd::planner::internal_planner

#endif  // MIGD_PLANNER_PLAN_INPUT_H_
