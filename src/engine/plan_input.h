// File: engine/plan_input.h
//
// BuildPlanInput: the planner's view of the managed GPUs — every tracked
// instance and foreign GI as an occupant, by state — for a request.
//
//   Creating, Active       -> kActive (keyed by MIG UUID, or "creating:<key>")
//   Idle                   -> kIdle (keyed by MIG UUID), kActive while a
//                             release writes its record
//   Reclaiming, Deleting,  -> kError ("busy:<key>"); hidden where a Creating
//   Error                     placeholder overlaps them (an allocation
//                             reserves its reclaims together with the
//                             placeholder that replaces them)
//   foreign GI             -> kForeign ("foreign:<gpu>:<gi id>")
//
// GPUs in `unhealthy_gpus` (Registry::unhealthy_gpus) are left out: the
// planner sees them as unavailable.
//
// Thread-safety: a pure function of its arguments (callers hold the registry
// lock over `instances` and `foreign`).
#ifndef MIGD_ENGINE_PLAN_INPUT_H_
#define MIGD_ENGINE_PLAN_INPUT_H_

#include <map>
#include <string>
#include <vector>

#include "engine/gpu_table.h"
#include "engine/manager_types.h"
#include "engine/registry.h"
#include "planner/demand_mix.h"
#include "planner/planner.h"

namespace migd::engine {

planner::PlanInput BuildPlanInput(const Registry::Instances& instances,
                                  const Registry::Foreign& foreign, const GpuTable& gpus,
                                  const std::vector<InstanceSpec>& specs,
                                  const planner::DemandWeights& demand,
                                  const std::map<uint32_t, std::string>& unhealthy_gpus = {});

}  // namespace migd::engine

#endif  // MIGD_ENGINE_PLAN_INPUT_H_
