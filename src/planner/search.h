// File: planner/search.h
//
// Internal to the planner. The searches over a canonical input and their
// common result: the greedy search (each request instance, most
// constrained first, takes its cheapest action on the state the previous
// ones left), the node term they share, and SolvePlan, which runs greedy,
// then the complete search (exhaustive.h) when several instances are
// requested and greedy failed or had to reclaim, keeps the cheaper plan,
// and explains a failure (explain.h). docs/planner.md has the rationale.
//
// Thread-safety: a search object is used by one thread for one call.
#ifndef MIGD_PLANNER_SEARCH_H_
#define MIGD_PLANNER_SEARCH_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "planner/gpu_context.h"
#include "planner/plan_input.h"
#include "planner/planner.h"

namespace migd::planner::internal_planner {

// Where a request instance went.
struct Assigned {
  size_t gpu = 0;  // canonical position
  Action action;
};

struct SearchResult {
  std::vector<Overlay> overlays;   // per GPU
  std::vector<Assigned> assigned;  // per request instance
  PlanScore cost;
};

// twins[g]: the first GPU before g with the same table and the same
// occupants (profile, placement, state, Idle tick; keys aside). Every
// candidate on g then costs exactly what it costs on the twin, and the twin
// wins the tie (lower index), so g need not be scored while neither has been
// touched by the plan.
std::vector<std::optional<size_t>> FindTwins(const std::vector<Gpu>& gpus);

// The node term of a plan whose GPUs keep `placeable` profiles in the pinned
// view: the mix weight of the profiles no GPU can host any more. Defined
// over the first GPU's table; 0 on a node whose GPUs have different tables.
int64_t NodeLoss(const std::vector<Gpu>& gpus, const std::vector<uint32_t>& placeable);
int64_t NodeLossOf(const std::vector<Gpu>& gpus, const std::vector<Overlay>& overlays);

// Whether the best create, whose step costs `create`, is chosen over the
// best reuse, whose step costs `reuse`. No margin: create < reuse (the cost
// order). A margin (kValueScale units; Canonical::reuse_margin): a lower
// node term, or an equal one and more than `margin` less value given up;
// the other terms (opened GPUs, pinned loss, alignment) do not count.
// Invariant: a create that reclaims an Idle instance of its own profile and
// placement never wins (the engine would refuse it): its node, opened-GPU,
// pinned and value terms equal the reuse of that instance, which are no
// smaller than the best reuse's, and the best create's are no greater than
// the create that duplicates the best reuse.
bool CreateBeatsReuse(const PlanScore& create, const PlanScore& reuse,
                      std::optional<int64_t> margin);

class GreedySearch {
 public:
  GreedySearch(const PlanInput& input, const Canonical& canon,
               const std::vector<std::optional<size_t>>& twins, PlanStats& stats)
      : input_(input), canon_(canon), twins_(twins), stats_(stats) {}

  // The greedy plan, or nullopt when some instance finds no action.
  std::optional<SearchResult> Run();

 private:
  // The cheapest action for class `ci` given `overlays`, over all GPUs.
  struct Step {
    size_t gpu = 0;
    Action action;
    Overlay ov;  // the GPU's overlay with the action applied
    PlanScore delta;
    uint32_t placeable = 0;  // the GPU's pinned placeable profiles after
  };
  std::optional<Step> BestStep(size_t ci, const std::vector<Overlay>& overlays,
                               const std::vector<PlanScore>& costs,
                               const std::vector<uint32_t>& placeable);
  // The cheapest candidate of one pass (0 reuse, 1 create, 2 create with
  // reclaims) for class `ci`.
  std::optional<Step> BestOfPass(int pass, size_t ci, const std::vector<Overlay>& overlays,
                                 const std::vector<PlanScore>& costs,
                                 const std::vector<uint32_t>& placeable, int64_t node_now);

  const PlanInput& input_;
  const Canonical& canon_;
  const std::vector<std::optional<size_t>>& twins_;
  PlanStats& stats_;
};

// The plan for a canonical input: kResourceExhausted (with the explanation)
// when none exists. Updates the search counters of `counters`.
StatusOr<Plan> SolvePlan(const PlanInput& input, const Canonical& canon, PlannerCounters& counters);

}  // namespace migd::planner::internal_planner

#endif  // MIGD_PLANNER_SEARCH_H_
