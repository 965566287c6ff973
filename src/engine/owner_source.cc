#include "engine/owner_source.h"

namespace migd::engine {

OwnedInstance OwnedFromRecord(const store::Record& record) {
  OwnedInstance o;
  o.mig_uuid = *record.mig_uuid;
  o.owner = record.owner;
  o.request_id = record.request_id;
  o.gpu_uuid = record.key.gpu_uuid;
  o.placement = record.key.placement;
  o.gi_id = record.gi_id;
  o.ci_id = record.ci_id;
  return o;
}

StatusOr<std::vector<OwnedInstance>> RecordsOwnerSource::ActiveOwners(
    const std::vector<store::Record>& records) {
  std::vector<OwnedInstance> out;
  for (const store::Record& r : records) {
    if (r.phase != store::RecordPhase::kCommitted || r.state != store::RecordState::kActive) {
      continue;
    }
    if (!r.mig_uuid) continue;
    out.push_back(OwnedFromRecord(r));
  }
  return out;
}

}  // namespace migd::engine
