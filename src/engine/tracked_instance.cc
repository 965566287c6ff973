#include "engine/tracked_instance.h"

#include <utility>

namespace migd::engine {

std::optional<NvmlGiId> TrackedInstance::gi() const {
  return has_gi ? std::optional<NvmlGiId>(id.gi_id) : std::nullopt;
}

std::optional<NvmlCiId> TrackedInstance::ci() const {
  return has_ci ? std::optional<NvmlCiId>(id.ci_id) : std::nullopt;
}

void TrackedInstance::set_gi(std::optional<NvmlGiId> gi) {
  has_gi = gi.has_value();
  id.gi_id = gi.value_or(NvmlGiId(0));
}

void TrackedInstance::set_ci(std::optional<NvmlCiId> ci) {
  has_ci = ci.has_value();
  id.ci_id = ci.value_or(NvmlCiId(0));
}

void TrackedInstance::ClearOwner() {
  owner = store::Owner();
  request_id.clear();
}

TrackedInstance TrackedFromRecord(const store::Record& record, GpuIndex gpu, std::string profile) {
  TrackedInstance inst;
  inst.id = store::IdentityOf(record);
  inst.has_gi = record.gi_id.has_value();
  inst.has_ci = record.ci_id.has_value();
  inst.gpu = gpu;
  inst.profile = std::move(profile);
  inst.owner = record.owner;
  inst.request_id = record.request_id;
  inst.last_used = record.last_used_at;
  inst.created_at = record.created_at;
  inst.unhealthy = record.unhealthy.has_value();
  inst.health_reason = record.unhealthy.value_or("");
  return inst;
}

InstanceView ViewOf(const TrackedInstance& instance) {
  InstanceView v;
  static_cast<store::InstanceIdentity&>(v) = instance.id;
  v.state = instance.state;
  v.gpu = instance.gpu;
  v.profile = instance.profile;
  v.owner = instance.owner;
  v.request_id = instance.request_id;
  v.last_used = instance.last_used;
  v.unhealthy = instance.unhealthy;
  v.health_reason = instance.health_reason;
  return v;
}

PublishedInstance PublishedOf(const TrackedInstance& instance, uint32_t gpu_minor) {
  PublishedInstance p;
  static_cast<store::InstanceIdentity&>(p) = instance.id;
  p.gpu = instance.gpu;
  p.gpu_minor = gpu_minor;
  p.profile = instance.profile;
  return p;
}

std::string AllocationIdOf(const TrackedInstance& instance) {
  return instance.request_id.empty() ? "instance:" + instance.id.mig_uuid.value()
                                     : instance.request_id;
}

}  // namespace migd::engine
