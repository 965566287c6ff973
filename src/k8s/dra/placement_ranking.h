// File: k8s/dra/placement_ranking.h
//
// RankPlacements: the order in which migd wants the scheduler to consider
// the candidate placements of one profile, i.e. migd's policy as a list.
// The kube-scheduler's DRA allocator takes the first device that fits in the
// order the driver publishes (docs/kubernetes.md, "DRA"), so this order is
// how migd's planner decides placements under DRA.
//
// Policy: every candidate is planned alone, pinned to its GPU and
// placement, with the node's current occupants and demand mix
// (planner::MakePlan, the same decision the engine would execute on
// Prepare). Candidates are then sorted by
//   1. the plan's stage: reuse of an Idle instance of the profile first,
//      then creation in free space, then creation after reclaiming Idle
//      instances, then candidates with no plan now (blocked by an
//      allocated instance: they stay published because the allocator
//      accounts for the blocker itself);
//   2. the plan's cost (planner::PlanScore: node-level loss of placeable
//      demand, opened GPUs, pinned loss, destroyed slices, ...);
//   3. GPU index, then placement start.
//
// This is the one place that turns the planner into an order; when the
// planner offers a ranking API of its own ("candidate placements of one
// profile on a GPU in policy order"), only this function's body changes.
//
// Thread-safety: uses `planner` (not thread-safe); call from one thread.
#ifndef MIGD_K8S_DRA_PLACEMENT_RANKING_H_
#define MIGD_K8S_DRA_PLACEMENT_RANKING_H_

#include <optional>
#include <string>
#include <vector>

#include "base/ids.h"
#include "mig/placement.h"
#include "planner/planner.h"

namespace migd::k8s::dra {

struct PlacementCandidate {
  GpuIndex gpu;
  std::string profile;  // a profile name of that GPU's table
  mig::Placement placement;
};

struct RankedPlacement {
  PlacementCandidate candidate;
  // The stage a Prepare of this candidate would take now; nullopt when the
  // planner finds no plan (an Active, Error or foreign instance blocks it).
  std::optional<planner::Stage> stage;
};

// `node` is the node's layout and demand (its request is ignored);
// `candidates` are ranked as described above.
std::vector<RankedPlacement> RankPlacements(planner::Planner& planner,
                                            const planner::PlanInput& node,
                                            const std::vector<PlacementCandidate>& candidates);

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_PLACEMENT_RANKING_H_
