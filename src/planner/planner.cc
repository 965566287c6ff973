#include "planner/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "base/status_macros.h"
#include "planner/plan_input.h"
#include "planner/rank.h"
#include "planner/scoring.h"
#include "planner/search.h"
#include "planner/value_policy.h"
#include "planner/value_service.h"

namespace migd::planner {

using internal_planner::Table;

// ---------------------------------------------------------------------------
// Public helpers.

std::string_view OccupantStateName(OccupantState state) {
  switch (state) {
    case OccupantState::kActive:
      return "active";
    case OccupantState::kIdle:
      return "idle";
    case OccupantState::kError:
      return "error";
    case OccupantState::kForeign:
      return "foreign";
  }
  return "unknown";
}

StatusOr<OccupantState> ParseOccupantState(std::string_view name) {
  for (OccupantState s : {OccupantState::kActive, OccupantState::kIdle, OccupantState::kError,
                          OccupantState::kForeign}) {
    if (OccupantStateName(s) == name) return s;
  }
  return InvalidArgumentError("unknown instance state '" + std::string(name) +
                              "' (want active, idle, error or foreign)");
}

std::string_view StageName(Stage stage) {
  switch (stage) {
    case Stage::kReuse:
      return "reuse";
    case Stage::kFree:
      return "free";
    case Stage::kReclaim:
      return "reclaim";
  }
  return "unknown";
}

StatusOr<Stage> ParseStage(std::string_view name) {
  for (Stage s : {Stage::kReuse, Stage::kFree, Stage::kReclaim}) {
    if (StageName(s) == name) return s;
  }
  return InvalidArgumentError("unknown stage '" + std::string(name) +
                              "' (want reuse, free or reclaim)");
}

std::string_view SearchName(Search search) {
  return search == Search::kGreedy ? "greedy" : "exhaustive";
}

StatusOr<Search> ParseSearch(std::string_view name) {
  if (name == "greedy") return Search::kGreedy;
  if (name == "exhaustive") return Search::kExhaustive;
  return InvalidArgumentError("unknown search '" + std::string(name) +
                              "' (want greedy or exhaustive)");
}

PlanScore& PlanScore::operator+=(const PlanScore& o) {
  value_loss += o.value_loss;
  node_loss += o.node_loss;
  opened_gpus += o.opened_gpus;
  destroyed_slices += o.destroyed_slices;
  destroyed_instances += o.destroyed_instances;
  creates += o.creates;
  reclaimed_last_used_sum += o.reclaimed_last_used_sum;
  loss += o.loss;
  pin_loss += o.pin_loss;
  fill += o.fill;
  uniform_loss += o.uniform_loss;
  return *this;
}

PlanScore& PlanScore::operator-=(const PlanScore& o) {
  value_loss -= o.value_loss;
  node_loss -= o.node_loss;
  opened_gpus -= o.opened_gpus;
  destroyed_slices -= o.destroyed_slices;
  destroyed_instances -= o.destroyed_instances;
  creates -= o.creates;
  reclaimed_last_used_sum -= o.reclaimed_last_used_sum;
  loss -= o.loss;
  pin_loss -= o.pin_loss;
  fill -= o.fill;
  uniform_loss -= o.uniform_loss;
  return *this;
}

std::vector<ReclaimedInstance> Plan::AllReclaims() const {
  std::vector<ReclaimedInstance> out;
  for (const InstancePlan& ip : instances) {
    out.insert(out.end(), ip.reclaim.begin(), ip.reclaim.end());
  }
  std::sort(out.begin(), out.end(), [](const ReclaimedInstance& a, const ReclaimedInstance& b) {
    return std::pair(a.gpu, a.placement) < std::pair(b.gpu, b.placement);
  });
  return out;
}

Status CheckReuseMargin(double margin) {
  if (margin >= 0 && margin <= kMaxReuseMargin) return OkStatus();  // false for NaN
  char buf[96];
  std::snprintf(buf, sizeof(buf), "reuse margin %g is not a number in 0..%g", margin,
                kMaxReuseMargin);
  return InvalidArgumentError(buf);
}

StatusOr<ReuseMargins> ParseReuseMargin(std::string_view text) {
  if (text == "off") return ReuseMargins{};
  if (text == "auto") return kAutoReuseMargins;
  const std::string s(text);
  char* end = nullptr;
  const double v = s.empty() ? -1 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) {
    return InvalidArgumentError("reuse margin \"" + s + "\" is not auto, off or a number");
  }
  MIGD_RETURN_IF_ERROR(CheckReuseMargin(v));
  return ReuseMargins{v, v};
}

// ---------------------------------------------------------------------------
// Planner.

Planner::Planner() = default;
Planner::Planner(PlannerOptions options) : options_(std::move(options)) {}
Planner::~Planner() = default;

void Planner::ClearCache() { tables_.clear(); }

StatusOr<const Table*> Planner::TableFor(const mig::GpuModel& model) {
  // The key is compared too: a freed model's address, profile storage and
  // slice count may all be reused by a model of another GPU type.
  auto it = tables_.find(&model);
  if (it != tables_.end() && it->second.profiles_data == model.gi_profiles.data() &&
      it->second.profile_count == model.gi_profiles.size() &&
      it->second.memory_slices == model.memory_slices &&
      it->second.table->model->key == model.key) {
    ++counters_.table_cache_hits;
    return it->second.table.get();
  }
  // Another object with the same table (the engine has one per GPU) shares
  // its entry, so that the node term and twins see one table.
  std::shared_ptr<const Table> table;
  for (const auto& entry : tables_) {
    const CachedTable& cached = entry.second;
    if (internal_planner::SameTable(*cached.table->model, model)) {
      table = cached.table;
      break;
    }
  }
  if (table != nullptr) {
    ++counters_.table_cache_hits;
  } else {
    MIGD_ASSIGN_OR_RETURN(table, internal_planner::BuildTable(model));
    ++counters_.table_cache_misses;
  }
  const Table* out = table.get();
  tables_[&model] =
      CachedTable{std::move(table), model.gi_profiles.data(), model.gi_profiles.size(),
                  model.memory_slices};
  return out;
}

StatusOr<internal_planner::Canonical> Planner::Prepare(
    const PlanInput& input, std::vector<std::shared_ptr<const ValueTable>>& keep) {
  StatusOr<internal_planner::Canonical> canon =
      internal_planner::Canonicalise(input, [this](const mig::GpuModel& m) { return TableFor(m); });
  if (!canon.ok()) return canon;
  for (const std::optional<double>& m :
       {options_.reuse_margin, options_.reuse_margin_several_gpus}) {
    if (m.has_value()) MIGD_RETURN_IF_ERROR(CheckReuseMargin(*m));
  }
  const std::optional<double> margin =
      canon->gpus.size() > 1 && options_.reuse_margin_several_gpus.has_value()
          ? options_.reuse_margin_several_gpus
          : options_.reuse_margin;
  if (options_.values != nullptr &&
      internal_planner::AttachValues(*options_.values, *canon, keep) && margin.has_value()) {
    canon->reuse_margin = std::llround(*margin * static_cast<double>(kValueScale));
  }
  return canon;
}

StatusOr<Plan> Planner::MakePlan(const PlanInput& input) {
  std::vector<std::shared_ptr<const ValueTable>> keep;  // the values of this call
  StatusOr<internal_planner::Canonical> canon = Prepare(input, keep);
  if (!canon.ok()) {
    ++counters_.invalid;
    return canon.status();
  }
  StatusOr<Plan> plan = internal_planner::SolvePlan(input, *canon, counters_);
  if (!plan.ok()) {
    if (IsResourceExhausted(plan.status())) ++counters_.exhausted;
    return plan;
  }
  ++counters_.plans;
  if (plan->search == Search::kGreedy) {
    ++counters_.greedy_plans;
  } else {
    ++counters_.exhaustive_plans;
  }
  if (!keep.empty()) {
    plan->stats.value_policy = true;
    for (const auto& t : keep) {
      plan->stats.value_version = std::max(plan->stats.value_version, t->stats().serial);
    }
    ++counters_.value_plans;
  } else {
    ++counters_.cost_order_plans;
  }
  if (plan->stats.greedy_failed) ++counters_.greedy_failures;
  counters_.candidates_examined += plan->stats.candidates_examined;
  counters_.exhaustive_options += plan->stats.exhaustive_options;
  counters_.exhaustive_states += plan->stats.exhaustive_states;
  return plan;
}

void Planner::ObserveArrival(const PlanInput& input, bool placed) {
  if (options_.values != nullptr) options_.values->ObserveArrival(input, placed);
}

StatusOr<std::vector<RankedCandidate>> Planner::RankPlacements(const PlanInput& input,
                                                               std::string_view profile,
                                                               std::optional<GpuIndex> gpu) {
  PlanInput one = input;
  one.request = {InstanceRequest{std::string(profile), gpu, std::nullopt}};
  std::vector<std::shared_ptr<const ValueTable>> keep;
  MIGD_ASSIGN_OR_RETURN(internal_planner::Canonical canon, Prepare(one, keep));
  return internal_planner::RankCandidates(canon);
}

StatusOr<std::vector<InstanceChoice>> Planner::ExplainChoices(const PlanInput& input,
                                                              const Plan& plan) {
  if (plan.instances.size() != input.request.size()) {
    return InvalidArgumentError("plan: " + std::to_string(plan.instances.size()) +
                                " instances for a request of " +
                                std::to_string(input.request.size()));
  }
  std::vector<InstanceChoice> out;
  for (size_t i = 0; i < plan.instances.size(); ++i) {
    const InstancePlan& ip = plan.instances[i];
    const PlanInput one = internal_planner::WithOthersDone(input, plan, i);
    std::vector<std::shared_ptr<const ValueTable>> keep;
    MIGD_ASSIGN_OR_RETURN(internal_planner::Canonical canon, Prepare(one, keep));
    const std::vector<RankedCandidate> ranked = internal_planner::RankCandidates(canon);
    auto is_chosen = [&ip](const RankedCandidate& c) {
      return c.gpu == ip.gpu && c.placement == ip.placement &&
             (c.stage == Stage::kReuse) == (ip.stage == Stage::kReuse) &&
             (ip.stage != Stage::kReuse || c.reuse_key == ip.reuse_key);
    };
    auto chosen = std::find_if(ranked.begin(), ranked.end(), is_chosen);
    if (chosen == ranked.end()) {
      return InternalError("plan instance " + std::to_string(i) + " is not a candidate");
    }
    InstanceChoice choice{*chosen, std::nullopt};
    for (const RankedCandidate& c : ranked) {
      if (c.gpu != chosen->gpu || c.placement != chosen->placement) {
        choice.next_best = c;
        break;
      }
    }
    out.push_back(std::move(choice));
  }
  return out;
}

StatusOr<Plan> MakePlan(const PlanInput& input) {
  Planner planner;
  return planner.MakePlan(input);
}

}  // namespace migd::planner
