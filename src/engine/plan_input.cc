#include "engine/plan_input.h"

#include <map>
#include <string>
#include <utility>

namespace migd::engine {
namespace {

int64_t ToTick(const std::optional<Clock::TimePoint>& t) { return t ? ToUnixSeconds(*t) : 0; }

planner::Occupant OccupantOf(const TrackedInstance& inst) {
  planner::Occupant o;
  o.profile = inst.profile;
  o.placement = inst.key().placement;
  const std::string& uuid = inst.id.mig_uuid.value();
  switch (inst.state) {
    case InstanceState::kCreating:
    case InstanceState::kActive:
      o.state = planner::OccupantState::kActive;
      o.key = uuid.empty() ? "creating:" + inst.key().ToString() : uuid;
      break;
    case InstanceState::kIdle:
      // An unhealthy one is never reused; the reconciler reclaims it.
      o.state = inst.busy || inst.unhealthy ? planner::OccupantState::kActive
                                            : planner::OccupantState::kIdle;
      o.key = uuid;
      o.last_used = ToTick(inst.last_used);
      break;
    default:
      o.state = planner::OccupantState::kError;
      o.key = "busy:" + inst.key().ToString();
      break;
  }
  return o;
}

}  // namespace

planner::PlanInput BuildPlanInput(const Registry::Instances& instances,
                                  const Registry::Foreign& foreign, const GpuTable& gpus,
                                  const std::vector<InstanceSpec>& specs,
                                  const planner::DemandWeights& demand,
                                  const std::map<uint32_t, std::string>& unhealthy_gpus) {
  planner::PlanInput in;
  in.demand = demand;
  std::map<uint32_t, size_t> pos;
  for (uint32_t g : gpus.ManagedIndices()) {
    if (unhealthy_gpus.contains(g)) continue;  // unavailable: no reuse, no create
    pos[g] = in.gpus.size();
    in.gpus.push_back({GpuIndex(g), gpus.Model(g), {}});
  }
  std::map<uint32_t, uint32_t> creating_mask;
  for (const auto& [key, inst] : instances) {
    if (inst.state == InstanceState::kCreating) {
      creating_mask[inst.gpu.value()] |= key.placement.Mask();
    }
  }
  for (const auto& [key, inst] : instances) {
    auto p = pos.find(inst.gpu.value());
    if (p == pos.end()) continue;
    const bool leaving = inst.state == InstanceState::kReclaiming ||
                         inst.state == InstanceState::kDeleting ||
                         inst.state == InstanceState::kError;
    if (leaving && (creating_mask[inst.gpu.value()] & key.placement.Mask()) != 0) continue;
    in.gpus[p->second].occupants.push_back(OccupantOf(inst));
  }
  for (const auto& [g, gis] : foreign) {
    auto p = pos.find(g);
    if (p == pos.end()) continue;
    const mig::GpuModel& model = *gpus.Model(g);
    for (const driver::GpuInstanceInfo& gi : gis) {
      const mig::GiProfile* prof = model.FindProfileById(gi.profile_id);
      if (prof == nullptr) continue;
      planner::Occupant o;
      o.profile = prof->name;
      o.placement = gi.placement;
      o.state = planner::OccupantState::kForeign;
      o.key = "foreign:" + std::to_string(g) + ":" + std::to_string(gi.id.value());
      in.gpus[p->second].occupants.push_back(std::move(o));
    }
  }
  for (const InstanceSpec& s : specs) in.request.push_back({s.profile, s.gpu, s.placement});
  return in;
}

}  // namespace migd::engine
