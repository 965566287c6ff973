#include "planner/explain.h"

#include <absl/strings/str_cat.h>

#include <algorithm>
#include <optional>
#include <string_view>

namespace migd::planner::internal_planner {
namespace {

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

// Why `pl` is blocked for class `c` (profile index `p`): the Active, Error
// or Foreign instances overlapping it; else the limit, instanceCount or
// engines, counted without the reclaimable Idle instances (exact placements
// may only reclaim those overlapping them).
std::string WhyBlocked(const Gpu& g, const Class& c, uint16_t p, const mig::Placement& pl) {
  std::string why;
  for (const Occ& o : g.occ) {
    if (o.state == OccupantState::kIdle || !o.placement.Overlaps(pl)) continue;
    if (!why.empty()) why += " + ";
    why += OccLabel(g, o);
  }
  if (!why.empty()) return "blocked by " + why;
  View v = g.hard;
  if (c.placement.has_value()) {
    v = g.all;
    for (const Occ& o : g.occ) {
      if (o.state == OccupantState::kIdle && o.placement.Overlaps(pl)) {
        v.Remove(g.rules(), o.profile, o.mask);
      }
    }
  }
  const mig::GiProfile& prof = g.model->gi_profiles[p];
  if (v.counts[p] >= g.rules().cap(p)) {
    return "instanceCount of " + prof.name + " reached (" + std::to_string(v.counts[p]) + " of " +
           std::to_string(g.rules().cap(p)) + ")";
  }
  if (!mig::EnginesFit(v.used, g.rules().engines(p), g.rules().totals())) {
    mig::Engines free = g.model->engine_totals;
    free -= mig::ToEngines(v.used);
    return "engine budget exhausted (needs " + EnginesText(prof.engines) + ", free " +
           EnginesText(free) + ")";
  }
  return "blocked";
}

// The class holding request instance `i`.
const Class& ClassOf(const std::vector<Class>& classes, size_t i) {
  size_t ci = 0;
  while (std::find(classes[ci].members.begin(), classes[ci].members.end(), i) ==
         classes[ci].members.end()) {
    ++ci;
  }
  return classes[ci];
}

// Whether action `a` of class `c` is possible alone on `gpu`;
// *reclaims (if given) says whether it needs a reclaim.
bool FitsAlone(const Gpu& gpu, const Class& c, const Action& a, bool* reclaims = nullptr) {
  Overlay ov;
  Apply(gpu, ov, a);
  const bool ok = a.reuse || SettleReclaims(gpu, ov, !Exact(c));
  if (reclaims != nullptr) *reclaims = ov.reclaimed != 0;
  return ok;
}

// The message for request instance `i` if it fits nowhere even alone.
std::optional<Status> AloneFailure(const Canonical& canon, size_t i) {
  const Class& c = ClassOf(canon.classes, i);
  bool fits = false;
  std::vector<size_t> considered;
  for (size_t g = 0; g < canon.gpus.size(); ++g) {
    if (c.gpu.has_value() && canon.gpus[g].index != *c.gpu) continue;
    considered.push_back(g);
    for (const Action& a : c.actions[g]) fits = fits || FitsAlone(canon.gpus[g], c, a);
  }
  if (fits) return std::nullopt;
  // absl::StrCat: `literal + std::string` chains trip GCC 12's -Wrestrict
  // false positive at -O3 (GCC PR 105329).
  std::string msg = absl::StrCat(
      "no placement for ", c.profile,
      c.placement.has_value() ? absl::StrCat("@", c.placement->ToString()) : std::string(),
      " (request instance ", i, "); considered GPU", considered.size() == 1 ? " " : "s ",
      JoinIndices(canon.gpus, considered));
  for (size_t g : considered) absl::StrAppend(&msg, " | ", DescribeBlocked(canon.gpus, g, c));
  return ResourceExhaustedError(msg);
}

// "GPU 0 0:1 (free), GPU 1 4:4 (reclaim) and 3 more": where class `c` fits alone.
std::string SpotsAlone(const Canonical& canon, const Class& c) {
  std::string spots;
  size_t listed = 0;
  size_t more = 0;
  for (size_t g = 0; g < canon.gpus.size(); ++g) {
    const Gpu& gpu = canon.gpus[g];
    for (const Action& a : c.actions[g]) {
      bool reclaims = false;
      if (!FitsAlone(gpu, c, a, &reclaims)) continue;
      if (listed == 4) {
        ++more;
        continue;
      }
      ++listed;
      if (!spots.empty()) spots += ", ";
      const mig::Placement pl = a.reuse ? gpu.occ[a.occ].placement : a.placement;
      spots += "GPU " + std::to_string(gpu.index.value()) + " " + pl.ToString() + " (" +
               (a.reuse ? "reuse" : (reclaims ? "reclaim" : "free")) + ")";
    }
  }
  if (more > 0) spots += " and " + std::to_string(more) + " more";
  return spots;
}

}  // namespace

std::string DescribeBlocked(const std::vector<Gpu>& gpus, size_t gi, const Class& c) {
  const Gpu& g = gpus[gi];
  const std::string head = "GPU " + std::to_string(g.index.value()) + ": ";
  if (c.resolved[gi] < 0) return head + "no profile " + c.profile + " on " + g.model->key;
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
    if (!reasons.empty()) reasons += ", ";
    reasons += pl.ToString() + " " + WhyBlocked(g, c, p, pl);
  }
  return out + "; " + reasons;
}

Status ExplainNoPlan(const PlanInput& input, const Canonical& canon, const PlanStats& stats) {
  // First: an instance that cannot be placed even alone.
  for (size_t i = 0; i < input.request.size(); ++i) {
    if (std::optional<Status> s = AloneFailure(canon, i); s.has_value()) return *s;
  }
  // Every instance fits alone: the combination is what fails.
  std::string names;
  std::string alone;
  for (size_t i = 0; i < input.request.size(); ++i) {
    const InstanceRequest& req = input.request[i];
    if (!names.empty()) names += ", ";
    names += req.profile;
    alone += " | instance " + std::to_string(i) + " " + req.profile + ": " +
             SpotsAlone(canon, ClassOf(canon.classes, i));
  }
  std::vector<size_t> all(canon.gpus.size());
  for (size_t g = 0; g < all.size(); ++g) all[g] = g;
  return ResourceExhaustedError(
      "no joint placement for the " + std::to_string(input.request.size()) + " instances (" +
      names + "): each fits alone but not all together; the exhaustive search over GPU" +
      (all.size() == 1 ? " " : "s ") + JoinIndices(canon.gpus, all) + " found no layout (" +
      std::to_string(stats.exhaustive_options) + " per-GPU options, " +
      std::to_string(stats.exhaustive_states) + " states). Alone they fit at:" + alone);
}

}  // namespace migd::planner::internal_planner
