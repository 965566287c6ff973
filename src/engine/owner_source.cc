#include "engine/owner_source.h"

namespace migd::engine {

StatusOr<std::vector<OwnedInstance>> RecordsOwnerSource::ActiveOwners(
    const std::vector<store::Record>& records) {
  std::vector<OwnedInstance> out;
  for (const store::Record& r : records) {
    if (r.phase != store::RecordPhase::kCommitted || r.state != store::RecordState::kActive) {
      continue;
    }
    if (!r.mig_uuid) continue;
    OwnedInstance o;
    o.mig_uuid = *r.mig_uuid;
    o.owner = r.owner;
    o.request_id = r.request_id;
    o.gpu_uuid = r.key.gpu_uuid;
    o.placement = r.key.placement;
    o.gi_id = r.gi_id;
    o.ci_id = r.ci_id;
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace migd::engine
