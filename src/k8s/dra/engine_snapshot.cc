#include "k8s/dra/engine_snapshot.h"

#include <map>

#include "base/clock.h"
#include "k8s/dra/claim_ids.h"

namespace migd::k8s::dra {

Occupancy OccupancyOf(const engine::InstanceView& instance) {
  switch (instance.state) {
    case engine::InstanceState::kActive:
    case engine::InstanceState::kCreating:
      return IsClaimRequestId(instance.request_id) ? Occupancy::kClaimed : Occupancy::kOther;
    case engine::InstanceState::kIdle:
      return Occupancy::kIdle;
    case engine::InstanceState::kReclaiming:
    case engine::InstanceState::kDeleting:
      return Occupancy::kReleasing;
    default:
      return Occupancy::kOther;
  }
}

NodeSnapshot SnapshotOf(const engine::Manager& manager) {
  NodeSnapshot node;
  std::map<uint32_t, size_t> pos;
  for (const engine::GpuView& g : manager.Gpus()) {
    if (g.model == nullptr) continue;
    pos[g.info.index.value()] = node.gpus.size();
    node.gpus.push_back({g.info.index, g.info.uuid, g.info.name, g.info.pci_bus_id, g.model, {}});
  }
  const engine::ManagerSnapshot snap = manager.List();
  for (const engine::InstanceView& v : snap.instances) {
    auto it = pos.find(v.gpu.value());
    if (it == pos.end()) continue;
    SnapshotInstance s;
    s.profile = v.profile;
    s.placement = v.placement;
    s.occupancy = OccupancyOf(v);
    s.key = v.mig_uuid.value().empty()
                ? "instance:" + v.gpu_uuid.value() + ":" + v.placement.ToString()
                : v.mig_uuid.value();
    s.last_used = v.last_used ? ToUnixSeconds(*v.last_used) : 0;
    node.gpus[it->second].instances.push_back(std::move(s));
  }
  for (const engine::ForeignInstance& f : snap.foreign) {
    auto it = pos.find(f.gpu.value());
    if (it == pos.end()) continue;
    node.gpus[it->second].instances.push_back({f.profile, f.placement, Occupancy::kOther,
                                               "foreign:" + std::to_string(f.gi_id.value()), 0});
  }
  node.demand = manager.DemandWeights();
  node.profile_allowlist = manager.policy().profile_allowlist;
  return node;
}

}  // namespace migd::k8s::dra
