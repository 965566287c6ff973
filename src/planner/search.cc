#include "planner/search.h"

#include <algorithm>
#include <tuple>

#include "planner/exhaustive.h"
#include "planner/explain.h"

namespace migd::planner::internal_planner {
namespace {

bool Untouched(const Overlay& ov) { return ov.hosted == 0 && ov.reclaimed == 0; }

bool SameOccupants(const Gpu& a, const Gpu& b) {
  if (a.table != b.table || a.occ.size() != b.occ.size()) return false;
  for (size_t k = 0; k < a.occ.size(); ++k) {
    const Occ& x = a.occ[k];
    const Occ& y = b.occ[k];
    if (x.profile != y.profile || x.placement != y.placement || x.state != y.state) return false;
    if (x.state == OccupantState::kIdle && x.src->last_used != y.src->last_used) return false;
  }
  return true;
}

// Identical request instances receive their results in ascending (GPU,
// start) order, whatever order the search produced them in.
void SortIdenticalInstances(const std::vector<Class>& classes, SearchResult& r) {
  for (const Class& c : classes) {
    std::vector<Assigned> got;
    for (size_t m : c.members) got.push_back(r.assigned[m]);
    std::sort(got.begin(), got.end(), [](const Assigned& a, const Assigned& b) {
      return std::tuple(a.gpu, a.action.placement, !a.action.reuse) <
             std::tuple(b.gpu, b.action.placement, !b.action.reuse);
    });
    for (size_t k = 0; k < c.members.size(); ++k) r.assigned[c.members[k]] = got[k];
  }
}

// Attributes each reclaimed instance of GPU position `gi` to one request
// instance: the first (in request order) whose create overlaps it; else (it
// was reclaimed for instanceCount or engines) the first non-exact create on
// that GPU. Then marks the creates that reclaim as kReclaim.
void AttributeReclaims(const Canonical& canon, const SearchResult& r,
                       const std::vector<bool>& exact, size_t gi, Plan& plan) {
  const Gpu& g = canon.gpus[gi];
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
    plan.instances[*owner].reclaim.push_back(ReclaimedInstance{
        g.index, o.src->key, g.model->gi_profiles[o.profile].name, o.placement, o.src->last_used});
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

Plan BuildPlan(const PlanInput& input, const Canonical& canon, const SearchResult& result,
               Search search, const PlanStats& stats) {
  SearchResult r = result;
  SortIdenticalInstances(canon.classes, r);
  Plan plan;
  plan.search = search;
  plan.score = r.cost;
  plan.stats = stats;
  plan.instances.resize(input.request.size());
  for (size_t i = 0; i < r.assigned.size(); ++i) {
    const Assigned& as = r.assigned[i];
    const Gpu& g = canon.gpus[as.gpu];
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
  std::vector<bool> exact(input.request.size(), false);
  for (const Class& c : canon.classes) {
    for (size_t m : c.members) exact[m] = Exact(c);
  }
  for (size_t gi = 0; gi < canon.gpus.size(); ++gi) AttributeReclaims(canon, r, exact, gi, plan);
  plan.stage = Stage::kReuse;
  for (const InstancePlan& ip : plan.instances) plan.stage = std::max(plan.stage, ip.stage);
  return plan;
}

}  // namespace

std::vector<std::optional<size_t>> FindTwins(const std::vector<Gpu>& gpus) {
  std::vector<std::optional<size_t>> twins(gpus.size(), std::nullopt);
  for (size_t g = 1; g < gpus.size(); ++g) {
    for (size_t t = 0; t < g; ++t) {
      if (!twins[t].has_value() && SameOccupants(gpus[g], gpus[t])) {
        twins[g] = t;
        break;
      }
    }
  }
  return twins;
}

int64_t NodeLoss(const std::vector<Gpu>& gpus, const std::vector<uint32_t>& placeable) {
  // Profiles are per table; the node term is defined over the first GPU's
  // table and applies only when every GPU shares it (mixed nodes: 0).
  // Where the values lead, they replace the node term (a sum over GPUs).
  if (gpus[0].value_leads) return 0;
  uint32_t before = 0;
  uint32_t after = 0;
  for (size_t g = 0; g < gpus.size(); ++g) {
    if (gpus[g].table != gpus[0].table) return 0;
    before |= gpus[g].hard_placeable;
    after |= placeable[g];
  }
  const std::vector<int64_t>& w = gpus[0].weights->profile;
  return ProfileValue(w, before) - ProfileValue(w, after);
}

int64_t NodeLossOf(const std::vector<Gpu>& gpus, const std::vector<Overlay>& overlays) {
  std::vector<uint32_t> placeable(gpus.size());
  for (size_t g = 0; g < gpus.size(); ++g) CostOf(gpus[g], overlays[g], &placeable[g]);
  return NodeLoss(gpus, placeable);
}

bool CreateBeatsReuse(const PlanScore& create, const PlanScore& reuse,
                      std::optional<int64_t> margin) {
  if (!margin.has_value()) return create < reuse;
  if (create.node_loss != reuse.node_loss) return create.node_loss < reuse.node_loss;
  return create.value_loss + *margin < reuse.value_loss;
}

std::optional<GreedySearch::Step> GreedySearch::BestOfPass(int pass, size_t ci,
                                                           const std::vector<Overlay>& overlays,
                                                           const std::vector<PlanScore>& costs,
                                                           const std::vector<uint32_t>& placeable,
                                                           int64_t node_now) {
  const Class& c = canon_.classes[ci];
  std::vector<uint32_t> trial = placeable;
  std::optional<Step> best;
  for (size_t g = 0; g < canon_.gpus.size(); ++g) {
    const Gpu& gpu = canon_.gpus[g];
    if (const std::optional<size_t> t = twins_[g]; t.has_value() && !c.actions[*t].empty() &&
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
      delta.node_loss = NodeLoss(canon_.gpus, trial) - node_now;
      trial[g] = placeable[g];
      if (!best.has_value() || delta < best->delta) best = Step{g, a, next, delta, pl};
    }
  }
  return best;
}

std::optional<GreedySearch::Step> GreedySearch::BestStep(size_t ci,
                                                         const std::vector<Overlay>& overlays,
                                                         const std::vector<PlanScore>& costs,
                                                         const std::vector<uint32_t>& placeable) {
  const int64_t node_now = NodeLoss(canon_.gpus, placeable);
  // Pass 0: reuse; pass 1: create without reclaiming; pass 2: create with
  // reclaims. The node term and pin_loss lead the cost order, so a later
  // pass can win; every pass is scanned (equal costs: the earlier pass). The
  // best create displaces the best reuse as CreateBeatsReuse says.
  std::optional<Step> reuse = BestOfPass(0, ci, overlays, costs, placeable, node_now);
  std::optional<Step> create;
  for (int pass = 1; pass < 3; ++pass) {
    std::optional<Step> best = BestOfPass(pass, ci, overlays, costs, placeable, node_now);
    if (best.has_value() && (!create.has_value() || best->delta < create->delta)) create = best;
  }
  if (!reuse.has_value()) return create;
  if (!create.has_value()) return reuse;
  if (CreateBeatsReuse(create->delta, reuse->delta, canon_.reuse_margin)) return create;
  if (create->delta < reuse->delta) ++stats_.margin_reuses;  // the cost order would create
  return reuse;
}

std::optional<SearchResult> GreedySearch::Run() {
  const std::vector<Gpu>& gpus = canon_.gpus;
  SearchResult r;
  r.overlays.assign(gpus.size(), Overlay{});
  r.assigned.assign(input_.request.size(), Assigned{});
  std::vector<PlanScore> costs(gpus.size());
  std::vector<uint32_t> placeable(gpus.size());
  for (size_t g = 0; g < gpus.size(); ++g) placeable[g] = gpus[g].hard_placeable;
  for (size_t ci = 0; ci < canon_.classes.size(); ++ci) {
    for (size_t member : canon_.classes[ci].members) {
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
  r.cost.node_loss = NodeLoss(gpus, placeable);
  return r;
}

StatusOr<Plan> SolvePlan(const PlanInput& input, const Canonical& canon,
                         PlannerCounters& counters) {
  const std::vector<std::optional<size_t>> twins = FindTwins(canon.gpus);
  PlanStats stats;
  std::optional<SearchResult> greedy = GreedySearch(input, canon, twins, stats).Run();
  stats.greedy_failed = !greedy.has_value();
  const bool multi = input.request.size() > 1;
  std::optional<SearchResult> exhaustive;
  // One instance: the greedy scan covered every candidate already. Several:
  // search jointly when greedy failed or had to reclaim.
  if (multi && (!greedy.has_value() || greedy->cost.destroyed_instances > 0)) {
    ++counters.exhaustive_runs;
    exhaustive = ExhaustiveSearch(input, canon, twins, stats).Run();
  }
  if (exhaustive.has_value() && (!greedy.has_value() || exhaustive->cost < greedy->cost)) {
    return BuildPlan(input, canon, *exhaustive, Search::kExhaustive, stats);
  }
  if (greedy.has_value()) return BuildPlan(input, canon, *greedy, Search::kGreedy, stats);
  return ExplainNoPlan(input, canon, stats);
}

}  // namespace migd::planner::internal_planner
