#include "k8s/dra/pool.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "k8s/dra/placement_ranking.h"

namespace migd::k8s::dra {
namespace {

bool Allowed(const std::set<std::string>& allowlist, const mig::GiProfile& p) {
  if (allowlist.empty() || allowlist.count(p.name) != 0) return true;
  for (const std::string& a : p.aliases) {
    if (allowlist.count(a) != 0) return true;
  }
  return false;
}

// The GPU's counter set less its kOther instances (see pool.h).
Counters AvailableCounters(const SnapshotGpu& gpu, const DeviceTable& table) {
  Counters available = table.capacity;
  for (const SnapshotInstance& inst : gpu.instances) {
    if (inst.occupancy != Occupancy::kOther) continue;
    const mig::GiProfile* p = gpu.model->FindProfileByName(inst.profile);
    if (p == nullptr) {
      // Unknown to the table: its slices are all we can take away.
      for (uint32_t i = inst.placement.start; i < inst.placement.end(); ++i) {
        available.erase(MemorySliceCounter(i));
      }
      continue;
    }
    Counters used = Consumption(table.capacity, *p, inst.placement);
    for (auto it = used.begin(); it != used.end();) {
      if (it->first.rfind("memory-slice-", 0) == 0) {
        available.erase(it->first);
        it = used.erase(it);
      } else {
        ++it;
      }
    }
    Subtract(available, used);
  }
  return available;
}

// Sort key of a profile group: smallest first.
auto ProfileKey(const mig::GiProfile& p) {
  return std::make_tuple(p.placement_size(), p.sm_count, p.memory_mib, p.name);
}

}  // namespace

planner::PlanInput PlannerView(const NodeSnapshot& node) {
  planner::PlanInput in;
  in.demand = node.demand;
  for (const SnapshotGpu& g : node.gpus) {
    if (g.model == nullptr) continue;
    planner::GpuLayout layout{g.index, g.model, {}};
    for (const SnapshotInstance& inst : g.instances) {
      // The planner refuses occupants its table does not know; such an
      // instance's devices are not published anyway (AvailableCounters).
      if (g.model->FindProfileByName(inst.profile) == nullptr) continue;
      planner::Occupant o;
      o.profile = inst.profile;
      o.placement = inst.placement;
      o.key = inst.key;
      switch (inst.occupancy) {
        case Occupancy::kClaimed:
          o.state = planner::OccupantState::kActive;
          break;
        case Occupancy::kIdle:
          o.state = planner::OccupantState::kIdle;
          o.last_used = inst.last_used;
          break;
        case Occupancy::kReleasing:
        case Occupancy::kOther:
          o.state = planner::OccupantState::kForeign;
          break;
      }
      layout.occupants.push_back(std::move(o));
    }
    in.gpus.push_back(std::move(layout));
  }
  return in;
}

Pool BuildPool(const NodeSnapshot& node, planner::Planner& planner) {
  Pool pool;
  // Candidates grouped by profile name, groups ordered smallest first.
  struct Group {
    const mig::GiProfile* first = nullptr;  // for the sort key
    std::vector<PoolDevice> devices;
  };
  std::map<std::string, Group> groups;
  std::vector<const SnapshotGpu*> gpus;
  for (const SnapshotGpu& g : node.gpus) {
    if (g.model != nullptr) gpus.push_back(&g);
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const SnapshotGpu* a, const SnapshotGpu* b) { return a->index < b->index; });
  for (const SnapshotGpu* g : gpus) {
    const DeviceTable table = BuildDeviceTable(g->index, *g->model);
    const Counters available = AvailableCounters(*g, table);
    pool.counter_sets.push_back({g->index, table.counter_set, available});
    for (const TableDevice& d : table.devices) {
      if (!Allowed(node.profile_allowlist, *d.profile) || !Fits(available, d.consumes)) continue;
      Group& group = groups[d.profile->name];
      if (group.first == nullptr) group.first = d.profile;
      group.devices.push_back({d.name, g->index, g->uuid, g->product_name, g->pci_bus_id, d.profile,
                               d.placement, table.counter_set, d.consumes, std::nullopt});
    }
  }
  std::vector<Group*> ordered;
  for (auto& [name, group] : groups) ordered.push_back(&group);
  std::sort(ordered.begin(), ordered.end(), [](const Group* a, const Group* b) {
    return ProfileKey(*a->first) < ProfileKey(*b->first);
  });
  const planner::PlanInput view = PlannerView(node);
  for (Group* group : ordered) {
    std::vector<PlacementCandidate> candidates;
    for (const PoolDevice& d : group->devices) {
      candidates.push_back({d.gpu, d.profile->name, d.placement});
    }
    for (const RankedPlacement& r : RankPlacements(planner, view, candidates)) {
      for (const PoolDevice& d : group->devices) {
        if (d.gpu == r.candidate.gpu && d.placement == r.candidate.placement) {
          PoolDevice copy = d;
          copy.stage = r.stage;
          pool.devices.push_back(std::move(copy));
          break;
        }
      }
    }
  }
  return pool;
}

}  // namespace migd::k8s::dra
