// File: daemon/planner_wiring.h
//
// The planner's value policy as the `planner:` section configures it
// (docs/planner.md, "The value policy"): the service the daemon owns and
// hands to the engine (ManagerOptions::values), or none for
// `planner.policy: cost`. The daemon starts the service after the Manager is
// created and stops it before the Manager goes (daemon.h).
//
// Thread-safety: pure functions; the service is thread-safe.
#ifndef MIGD_DAEMON_PLANNER_WIRING_H_
#define MIGD_DAEMON_PLANNER_WIRING_H_

#include <memory>
#include <optional>

#include "base/status.h"
#include "daemon/config.h"
#include "planner/planner.h"
#include "planner/solve_executor.h"
#include "planner/value_service.h"

namespace migd::daemon {

// The `planner:` section's value options (objective, driftThreshold,
// multiGpu, halfLifeArrivals, minArrivals) as ValueOptions; ValueOptions'
// `solve` keeps its default. kInvalidArgument naming the key, the value and
// the range for a value validation would refuse.
StatusOr<planner::ValueOptions> ValueOptionsOf(const PlannerConfig& config);

// The value service (solves on `executor`, not started) for
// `planner.policy: value`; nullptr for `cost`. kInvalidArgument naming the
// key for a bad value.
StatusOr<std::shared_ptr<planner::ValueService>> MakeValueService(
    const PlannerConfig& config, std::unique_ptr<planner::SolveExecutor> executor);

// planner.reuseMargin as planner::PlannerOptions::reuse_margin and
// reuse_margin_several_gpus (engine::ManagerOptions' fields of those names);
// kInvalidArgument naming the key.
StatusOr<planner::ReuseMargins> ReuseMarginOf(const PlannerConfig& config);

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_PLANNER_WIRING_H_
