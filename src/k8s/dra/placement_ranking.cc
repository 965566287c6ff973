#include "k8s/dra/placement_ranking.h"

#include <algorithm>
#include <tuple>

namespace migd::k8s::dra {

std::vector<RankedPlacement> RankPlacements(planner::Planner& planner,
                                            const planner::PlanInput& node,
                                            const std::vector<PlacementCandidate>& candidates) {
  struct Keyed {
    RankedPlacement ranked;
    int stage_rank = 3;  // 0 reuse, 1 free, 2 reclaim, 3 no plan
    planner::PlanScore score;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(candidates.size());
  planner::PlanInput input = node;
  for (const PlacementCandidate& c : candidates) {
    input.request = {{c.profile, c.gpu, c.placement}};
    Keyed k;
    k.ranked.candidate = c;
    StatusOr<planner::Plan> plan = planner.MakePlan(input);
    if (plan.ok() && plan->instances.size() == 1) {
      k.ranked.stage = plan->instances[0].stage;
      k.stage_rank = static_cast<int>(plan->instances[0].stage);
      k.score = plan->score;
    }
    keyed.push_back(std::move(k));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    return std::tie(a.stage_rank, a.score, a.ranked.candidate.gpu,
                    a.ranked.candidate.placement.start) <
           std::tie(b.stage_rank, b.score, b.ranked.candidate.gpu,
                    b.ranked.candidate.placement.start);
  });
  std::vector<RankedPlacement> out;
  out.reserve(keyed.size());
  for (Keyed& k : keyed) out.push_back(std::move(k.ranked));
  return out;
}

}  // namespace migd::k8s::dra
