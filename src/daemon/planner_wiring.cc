#include "daemon/planner_wiring.h"

#include <string>
#include <string_view>
#include <utility>

#include "daemon/config_values.h"
#include "planner/planner.h"

namespace migd::daemon {

namespace {

// "<key>: <what is wrong>": the key prefixed to a config_values.h error.
Status KeyError(std::string_view key, const Status& status) {
  return InvalidArgumentError(std::string(key) + ": " + std::string(status.message()));
}

}  // namespace

StatusOr<planner::ValueOptions> ValueOptionsOf(const PlannerConfig& config) {
  planner::ValueOptions o;
  StatusOr<planner::Objective> objective = planner::ParseObjective(config.objective);
  if (!objective.ok()) {
    return InvalidArgumentError("planner.objective: \"" + config.objective +
                                "\" is not a planner objective (use count or slices)");
  }
  o.objective = *objective;
  StatusOr<double> drift = ParseDriftThreshold(config.drift_threshold);
  if (!drift.ok()) return KeyError("planner.driftThreshold", drift.status());
  o.drift_threshold = *drift;
  // The names of config_schema.cc's kPlannerMultiGpu.
  if (config.multi_gpu == "tie-break") {
    o.multi_gpu = planner::MultiGpuValues::kTieBreak;
  } else if (config.multi_gpu == "separable") {
    o.multi_gpu = planner::MultiGpuValues::kSeparable;
  } else {
    return InvalidArgumentError("planner.multiGpu: \"" + config.multi_gpu +
                                "\" is not a multi-GPU value mode (use tie-break or separable)");
  }
  StatusOr<double> half_life = ParseHalfLifeArrivals(config.half_life_arrivals);
  if (!half_life.ok()) return KeyError("planner.halfLifeArrivals", half_life.status());
  o.half_life_arrivals = *half_life;
  StatusOr<int64_t> min_arrivals = ParseMinArrivals(config.min_arrivals);
  if (!min_arrivals.ok()) return KeyError("planner.minArrivals", min_arrivals.status());
  o.min_arrivals = *min_arrivals;
  return o;
}

StatusOr<std::shared_ptr<planner::ValueService>> MakeValueService(
    const PlannerConfig& config, std::unique_ptr<planner::SolveExecutor> executor) {
  if (config.policy == "cost") return std::shared_ptr<planner::ValueService>();
  if (config.policy != "value") {
    return InvalidArgumentError("planner.policy: \"" + config.policy +
                                "\" is not a planner policy (use value or cost)");
  }
  StatusOr<planner::ValueOptions> options = ValueOptionsOf(config);
  if (!options.ok()) return options.status();
  return std::make_shared<planner::ValueService>(*std::move(options), std::move(executor));
}

// ParseReuseMargin's range.
static_assert(planner::kMaxReuseMargin == 1000);

StatusOr<planner::ReuseMargins> ReuseMarginOf(const PlannerConfig& config) {
  StatusOr<ReuseMarginSetting> setting = ParseReuseMargin(config.reuse_margin);
  if (!setting.ok()) return KeyError("planner.reuseMargin", setting.status());
  if (setting->automatic) return planner::kAutoReuseMargins;
  return planner::ReuseMargins{setting->margin, setting->margin};
}

}  // namespace migd::daemon
