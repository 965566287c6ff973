#include "daemon/planner_wiring.h"

#include <absl/strings/numbers.h>

#include <cmath>
#include <string>
#include <utility>

namespace migd::daemon {

StatusOr<planner::ValueOptions> ValueOptionsOf(const PlannerConfig& config) {
  planner::ValueOptions o;
  StatusOr<planner::Objective> objective = planner::ParseObjective(config.objective);
  if (!objective.ok()) {
    return InvalidArgumentError("planner.objective: \"" + config.objective +
                                "\" is not a planner objective (use count or slices)");
  }
  o.objective = *objective;
  double drift = 0;
  if (!absl::SimpleAtod(config.drift_threshold, &drift) || !std::isfinite(drift) ||
      drift < 0.01 || drift > 1) {
    return InvalidArgumentError("planner.driftThreshold: \"" + config.drift_threshold +
                                "\" is not a drift threshold (use a number from 0.01 to 1)");
  }
  o.drift_threshold = drift;
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

}  // namespace migd::daemon
