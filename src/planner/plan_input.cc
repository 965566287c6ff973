#include "planner/plan_input.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string_view>

#include "base/status_macros.h"

namespace migd::planner::internal_planner {
namespace {

Status ValidateDemand(const PlanInput& input) {
  if (input.gpus.empty()) return InvalidArgumentError("gpus: no GPUs in the input");
  if (input.request.empty()) return InvalidArgumentError("request: no instances requested");
  for (const auto& [name, weight] : input.demand) {
    if (!std::isfinite(weight) || weight < 0.0) {
      return InvalidArgumentError("demand['" + name + "']: weight must be finite and >= 0");
    }
  }
  return OkStatus();
}

// Resolves occupant `k` of `in` against its model.
StatusOr<Occ> ResolveOccupant(const GpuLayout& in, size_t pos, size_t k) {
  const Occupant& o = in.occupants[k];
  auto where = [&] {
    return "gpus[" + std::to_string(pos) + "].occupants[" + std::to_string(k) + "]";
  };
  const mig::GiProfile* p = in.model->FindProfileByName(o.profile);
  if (p == nullptr) {
    return InvalidArgumentError(where() + ".profile: '" + o.profile + "' is not a profile of " +
                                in.model->key);
  }
  if (!p->HasPlacement(o.placement)) {
    return InvalidArgumentError(where() + ".placement: " + o.placement.ToString() +
                                " is not listed for " + p->name + " on " + in.model->key +
                                " (listed: " + PlacementsText(p->placements, " ") + ")");
  }
  const bool keyed = o.state == OccupantState::kActive || o.state == OccupantState::kIdle;
  if (keyed && o.key.empty()) {
    return InvalidArgumentError(where() + ".key: required for " +
                                std::string(OccupantStateName(o.state)) + " instances");
  }
  Occ occ;
  occ.src = &o;
  occ.profile = static_cast<uint16_t>(p - in.model->gi_profiles.data());
  occ.mask = o.placement.Mask();
  occ.placement = o.placement;
  occ.state = o.state;
  return occ;
}

// Sorts g.occ by placement, refuses overlaps and fills the views and scores.
Status FillViews(Gpu& g, size_t pos) {
  std::sort(g.occ.begin(), g.occ.end(),
            [](const Occ& a, const Occ& b) { return a.placement < b.placement; });
  for (size_t k = 0; k < g.occ.size(); ++k) {
    const Occ& o = g.occ[k];
    if ((g.all.mask & o.mask) != 0) {
      for (size_t j = 0; j < k; ++j) {
        if (g.occ[j].placement.Overlaps(o.placement)) {
          return InvalidArgumentError("gpus[" + std::to_string(pos) +
                                      "].occupants: " + g.model->gi_profiles[o.profile].name + "@" +
                                      o.placement.ToString() + " overlaps " +
                                      g.model->gi_profiles[g.occ[j].profile].name + "@" +
                                      g.occ[j].placement.ToString());
        }
      }
    }
    g.all.Add(g.rules(), o.profile, o.mask);
    // k < 32: occupants are listed placements (inside the table's <= 32
    // units) and do not overlap, so they fit the uint32_t bit sets.
    if (o.state == OccupantState::kIdle) {
      g.idle_bits |= 1u << k;
    } else {
      g.hard.Add(g.rules(), o.profile, o.mask);
      g.hard_mask |= o.mask;
    }
  }
  g.fill = std::popcount(g.all.mask);
  const ViewScores all_scores = Scores(*g.table, *g.weights, g.all);
  g.s_all_weighted = all_scores.weighted;
  g.s_all_uniform = all_scores.uniform;
  g.hard_placeable = all_scores.placeable;
  g.s_hard_weighted = g.idle_bits == 0
                          ? g.s_all_weighted
                          : Score(*g.table, g.weights->weighted, g.hard, &g.hard_placeable);
  return OkStatus();
}

// The GPUs of `input` in ascending index; `keys` receives (key, input
// position) of every keyed occupant.
Status BuildGpus(const PlanInput& input, const TableLookup& table_for, Canonical& out,
                 std::vector<std::pair<std::string_view, size_t>>& keys) {
  std::vector<size_t> order(input.gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return input.gpus[a].index < input.gpus[b].index; });
  // Reserved up front: Gpu::weights points into it.
  out.weights.reserve(order.size());
  out.gpus.reserve(order.size());
  for (size_t pos : order) {
    const GpuLayout& in = input.gpus[pos];
    // Built only for an error message: this loop is on the hot path.
    auto where = [pos] { return "gpus[" + std::to_string(pos) + "]"; };
    if (!out.gpus.empty() && out.gpus.back().index == in.index) {
      return InvalidArgumentError(where() + ": duplicate GPU index " +
                                  std::to_string(in.index.value()));
    }
    if (in.model == nullptr) return InvalidArgumentError(where() + ".model: missing");
    StatusOr<const Table*> table = table_for(*in.model);
    if (!table.ok()) return table.status().WithContext(where());
    Gpu g;
    g.index = in.index;
    g.model = in.model;
    g.table = *table;
    for (const auto& [t, tw] : out.weights) {
      if (t == g.table) g.weights = &tw;
    }
    if (g.weights == nullptr) {
      out.weights.emplace_back(g.table, BuildWeights(*g.table, input.demand));
      g.weights = &out.weights.back().second;
    }
    g.occ.reserve(in.occupants.size());
    for (size_t k = 0; k < in.occupants.size(); ++k) {
      MIGD_ASSIGN_OR_RETURN(Occ occ, ResolveOccupant(in, pos, k));
      if (!in.occupants[k].key.empty()) keys.emplace_back(in.occupants[k].key, pos);
      g.occ.push_back(occ);
    }
    MIGD_RETURN_IF_ERROR(FillViews(g, pos));
    out.gpus.push_back(std::move(g));
  }
  return OkStatus();
}

Status CheckDuplicateKeys(std::vector<std::pair<std::string_view, size_t>>& keys) {
  std::sort(keys.begin(), keys.end());
  for (size_t k = 1; k < keys.size(); ++k) {
    if (keys[k].first == keys[k - 1].first) {
      return InvalidArgumentError("gpus[" + std::to_string(keys[k].second) +
                                  "].occupants: duplicate key '" + std::string(keys[k].first) +
                                  "'");
    }
  }
  return OkStatus();
}

// The actions of profile `p` (index `prof`) on `gpu` for `req`: reuses of
// Idle instances of the profile, then creates at every listed placement not
// covered by an Active/Error/Foreign instance.
void AddActions(const Gpu& gpu, const mig::GiProfile& p, uint16_t prof, const InstanceRequest& req,
                std::vector<Action>& acts) {
  for (size_t k = 0; k < gpu.occ.size(); ++k) {
    const Occ& o = gpu.occ[k];
    if (o.state != OccupantState::kIdle || o.profile != prof) continue;
    if (req.placement.has_value() && o.placement != *req.placement) continue;
    Action a;
    a.reuse = true;
    a.profile = prof;
    a.occ = static_cast<uint8_t>(k);
    a.placement = o.placement;
    a.mask = o.mask;
    acts.push_back(a);
  }
  for (const mig::Placement& pl : p.placements) {
    if (req.placement.has_value() && pl != *req.placement) continue;
    if ((pl.Mask() & gpu.hard_mask) != 0) continue;
    Action a;
    a.profile = prof;
    a.placement = pl;
    a.mask = pl.Mask();
    acts.push_back(a);
  }
}

// A new class for request item `i`; fills its resolution and actions per GPU.
StatusOr<Class> NewClass(const PlanInput& input, const std::vector<Gpu>& gpus, size_t i,
                         std::optional<size_t> pinned) {
  const InstanceRequest& req = input.request[i];
  auto where = [i] { return "request[" + std::to_string(i) + "]"; };
  Class c;
  c.profile = req.profile;
  c.gpu = req.gpu;
  c.placement = req.placement;
  c.members.push_back(i);
  c.pinned_gpu = pinned;
  c.rank =
      req.placement.has_value() ? (req.gpu.has_value() ? 0 : 1) : (req.gpu.has_value() ? 2 : 3);
  c.actions.assign(gpus.size(), {});
  c.resolved.assign(gpus.size(), -1);
  const mig::GiProfile* first_known = nullptr;
  const mig::GpuModel* first_model = nullptr;
  bool listed = false;
  const mig::GpuModel* last_model = nullptr;  // GPUs of one model resolve alike
  const mig::GiProfile* p = nullptr;
  for (size_t g = 0; g < gpus.size(); ++g) {
    if (pinned.has_value() && g != *pinned) continue;
    if (gpus[g].model != last_model) {
      last_model = gpus[g].model;
      p = last_model->FindProfileByName(req.profile);
    }
    if (p == nullptr) continue;
    c.resolved[g] = static_cast<int>(p - gpus[g].model->gi_profiles.data());
    if (first_known == nullptr) {
      c.size = p->placement_size();
      c.compute = p->slice_count;
      first_known = p;
      first_model = gpus[g].model;
    }
    if (req.placement.has_value() && !p->HasPlacement(*req.placement)) continue;
    listed = true;
    AddActions(gpus[g], *p, static_cast<uint16_t>(c.resolved[g]), req, c.actions[g]);
  }
  if (first_known == nullptr) {
    if (pinned.has_value()) {
      return InvalidArgumentError(where() + ".profile: '" + req.profile +
                                  "' is not a profile of GPU " + std::to_string(req.gpu->value()) +
                                  " (" + gpus[*pinned].model->key + ")");
    }
    return InvalidArgumentError(where() + ".profile: '" + req.profile +
                                "' is not a profile of any GPU");
  }
  if (!listed) {
    return InvalidArgumentError(where() + ".placement: " + req.placement->ToString() +
                                " is not listed for " + first_known->name + " on " +
                                first_model->key +
                                " (listed: " + PlacementsText(first_known->placements, " ") + ")");
  }
  return c;
}

// The canonical GPU position of request item `i`'s GPU, if it names one.
StatusOr<std::optional<size_t>> PinnedGpu(const PlanInput& input, const std::vector<Gpu>& gpus,
                                          size_t i) {
  const InstanceRequest& req = input.request[i];
  if (!req.gpu.has_value()) return std::optional<size_t>();
  for (size_t g = 0; g < gpus.size(); ++g) {
    if (gpus[g].index == *req.gpu) return std::optional<size_t>(g);
  }
  std::vector<size_t> all(gpus.size());
  for (size_t g = 0; g < all.size(); ++g) all[g] = g;
  return InvalidArgumentError("request[" + std::to_string(i) + "].gpu: unknown GPU " +
                              std::to_string(req.gpu->value()) +
                              " (GPUs: " + JoinIndices(gpus, all) + ")");
}

StatusOr<std::vector<Class>> BuildClasses(const PlanInput& input, const std::vector<Gpu>& gpus) {
  std::vector<Class> classes;
  for (size_t i = 0; i < input.request.size(); ++i) {
    const InstanceRequest& req = input.request[i];
    MIGD_ASSIGN_OR_RETURN(std::optional<size_t> pinned, PinnedGpu(input, gpus, i));
    auto same = [&](const Class& c) {
      return c.profile == req.profile && c.gpu == req.gpu && c.placement == req.placement;
    };
    auto it = std::find_if(classes.begin(), classes.end(), same);
    if (it != classes.end()) {
      it->members.push_back(i);
      continue;
    }
    MIGD_ASSIGN_OR_RETURN(Class c, NewClass(input, gpus, i, pinned));
    classes.push_back(std::move(c));
  }
  return classes;
}

// Exact placements pinned to one GPU must not overlap each other.
Status CheckExactOverlaps(const PlanInput& input) {
  if (input.request.size() > std::numeric_limits<uint8_t>::max()) {
    return InvalidArgumentError("request: more than 255 instances");
  }
  for (size_t i = 0; i < input.request.size(); ++i) {
    const InstanceRequest& a = input.request[i];
    if (!a.gpu.has_value() || !a.placement.has_value()) continue;
    for (size_t j = i + 1; j < input.request.size(); ++j) {
      const InstanceRequest& b = input.request[j];
      if (b.gpu == a.gpu && b.placement.has_value() && a.placement->Overlaps(*b.placement)) {
        return InvalidArgumentError("request[" + std::to_string(i) + "] and request[" +
                                    std::to_string(j) + "]: placements " + a.placement->ToString() +
                                    " and " + b.placement->ToString() + " overlap on GPU " +
                                    std::to_string(a.gpu->value()));
      }
    }
  }
  return OkStatus();
}

// Most constrained first, larger first; the rest is only for a canonical
// order independent of the request's order.
void SortClasses(std::vector<Class>& classes) {
  std::stable_sort(classes.begin(), classes.end(), [](const Class& a, const Class& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.size != b.size) return a.size > b.size;
    if (a.compute != b.compute) return a.compute > b.compute;
    if (a.profile != b.profile) return a.profile < b.profile;
    if (a.gpu != b.gpu) return a.gpu < b.gpu;
    return a.placement < b.placement;
  });
}

}  // namespace

StatusOr<Canonical> Canonicalise(const PlanInput& input, const TableLookup& table_for) {
  MIGD_RETURN_IF_ERROR(ValidateDemand(input));
  Canonical out;
  std::vector<std::pair<std::string_view, size_t>> keys;  // (key, GPU input position)
  MIGD_RETURN_IF_ERROR(BuildGpus(input, table_for, out, keys));
  MIGD_RETURN_IF_ERROR(CheckDuplicateKeys(keys));
  MIGD_ASSIGN_OR_RETURN(out.classes, BuildClasses(input, out.gpus));
  MIGD_RETURN_IF_ERROR(CheckExactOverlaps(input));
  SortClasses(out.classes);
  return out;
}

std::string JoinIndices(const std::vector<Gpu>& gpus, const std::vector<size_t>& which) {
  std::string out;
  for (size_t i : which) {
    if (!out.empty()) out += ", ";
    out += std::to_string(gpus[i].index.value());
  }
  return out;
}

std::string PlacementsText(const std::vector<mig::Placement>& ps, std::string_view sep) {
  std::string out;
  for (const mig::Placement& p : ps) {
    if (!out.empty()) out += sep;
    out += p.ToString();
  }
  return out.empty() ? "none" : out;
}

}  // namespace migd::planner::internal_planner
