#include "engine/journal.h"

#include <utility>

namespace migd::engine {

store::Record RecordOf(const TrackedInstance& instance, InstanceState state,
                       store::RecordPhase phase, const std::string& boot_id) {
  store::Record r;
  r.key = instance.key();
  r.phase = phase;
  r.state = ToRecordState(state);
  r.profile_name = instance.profile;
  r.gi_id = instance.gi();
  r.ci_id = instance.ci();
  if (!instance.id.mig_uuid.value().empty()) r.mig_uuid = instance.id.mig_uuid;
  if (state == InstanceState::kActive) {
    r.owner = instance.owner;
    r.request_id = instance.request_id;
  }
  r.boot_id = boot_id;
  r.created_at = instance.created_at;
  r.last_used_at = instance.last_used;
  if (instance.unhealthy) r.unhealthy = instance.health_reason;
  return r;
}

Status RecordJournal::Write(const TrackedInstance& instance, InstanceState state,
                            store::RecordPhase phase) {
  StatusOr<store::Record> written = store_.Put(RecordOf(instance, state, phase, boot_id_));
  if (!written.ok()) {
    return written.status().WithContext("writing record " + instance.key().ToString());
  }
  return OkStatus();
}

}  // namespace migd::engine
