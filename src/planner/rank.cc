#include "planner/rank.h"

#include <algorithm>
#include <bit>
#include <set>
#include <string>

#include "planner/search.h"

namespace migd::planner::internal_planner {
namespace {

RankedCandidate Candidate(const Gpu& g, const Action& a, const Overlay& ov, const PlanScore& cost) {
  RankedCandidate c;
  c.gpu = g.index;
  c.profile = g.model->gi_profiles[a.profile].name;
  c.cost = cost;
  if (a.reuse) {
    const Occ& o = g.occ[a.occ];
    c.stage = Stage::kReuse;
    c.placement = o.placement;
    c.reuse_key = o.src->key;
    return c;
  }
  c.placement = a.placement;
  c.stage = ov.reclaimed != 0 ? Stage::kReclaim : Stage::kFree;
  for (uint32_t bits = ov.reclaimed; bits != 0; bits &= bits - 1) {
    const Occ& o = g.occ[static_cast<size_t>(std::countr_zero(bits))];
    c.reclaim.push_back(ReclaimedInstance{g.index, o.src->key, g.model->gi_profiles[o.profile].name,
                                          o.placement, o.src->last_used});
  }
  return c;
}

}  // namespace

std::vector<RankedCandidate> RankCandidates(const Canonical& canon) {
  const Class& c = canon.classes.front();
  const size_t n = canon.gpus.size();
  std::vector<uint32_t> placeable(n);
  for (size_t g = 0; g < n; ++g) placeable[g] = canon.gpus[g].hard_placeable;
  const int64_t node_now = NodeLoss(canon.gpus, placeable);
  std::vector<RankedCandidate> out;
  // Passes as the greedy search scans them: reuse, create, create with reclaims.
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t g = 0; g < n; ++g) {
      const Gpu& gpu = canon.gpus[g];
      for (const Action& a : c.actions[g]) {
        if (a.reuse != (pass == 0)) continue;
        Overlay ov;
        Apply(gpu, ov, a);
        if (!a.reuse) {
          if (!SettleReclaims(gpu, ov, !Exact(c))) continue;
          if ((ov.reclaimed != 0) != (pass == 2)) continue;
        }
        uint32_t pl = 0;
        PlanScore cost = CostOf(gpu, ov, &pl);
        std::vector<uint32_t> trial = placeable;
        trial[g] = pl;
        cost.node_loss = NodeLoss(canon.gpus, trial) - node_now;
        out.push_back(Candidate(gpu, a, ov, cost));
      }
    }
  }
  // Stable: among equal costs the scan order (pass, GPU, start) decides, as
  // in the greedy search.
  std::stable_sort(out.begin(), out.end(), [](const RankedCandidate& a, const RankedCandidate& b) {
    return a.cost < b.cost;
  });
  // MakePlan's choice first: the best reuse or the best create, as
  // CreateBeatsReuse decides; the rest stay in cost order.
  auto is_reuse = [](const RankedCandidate& r) { return r.stage == Stage::kReuse; };
  auto reuse = std::find_if(out.begin(), out.end(), is_reuse);
  auto create = std::find_if_not(out.begin(), out.end(), is_reuse);
  if (reuse != out.end() && create != out.end()) {
    auto chosen = CreateBeatsReuse(create->cost, reuse->cost, canon.reuse_margin) ? create : reuse;
    std::rotate(out.begin(), chosen, chosen + 1);
  }
  return out;
}

PlanInput WithOthersDone(const PlanInput& input, const Plan& plan, size_t i) {
  PlanInput out = input;
  out.request = {input.request[i]};
  std::set<std::string> reclaimed, reused;
  for (size_t j = 0; j < plan.instances.size(); ++j) {
    if (j == i) continue;
    const InstancePlan& ip = plan.instances[j];
    for (const ReclaimedInstance& r : ip.reclaim) reclaimed.insert(r.key);
    if (ip.stage == Stage::kReuse) reused.insert(ip.reuse_key);
  }
  for (GpuLayout& g : out.gpus) {
    std::vector<Occupant> kept;
    for (Occupant& o : g.occupants) {
      if (reclaimed.count(o.key) != 0) continue;
      if (reused.count(o.key) != 0) o.state = OccupantState::kActive;
      kept.push_back(std::move(o));
    }
    g.occupants = std::move(kept);
  }
  for (size_t j = 0; j < plan.instances.size(); ++j) {
    const InstancePlan& ip = plan.instances[j];
    if (j == i || ip.stage == Stage::kReuse) continue;
    for (GpuLayout& g : out.gpus) {
      if (g.index != ip.gpu) continue;
      g.occupants.push_back(Occupant{ip.profile, ip.placement, OccupantState::kActive,
                                     "planned-" + std::to_string(j), 0});
    }
  }
  return out;
}

}  // namespace migd::planner::internal_planner
