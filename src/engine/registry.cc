#include "engine/registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

#include "base/logging.h"

namespace migd::engine {
namespace {

std::string OwnerLabel(const store::Owner& o) {
  switch (o.kind) {
    case store::Owner::Kind::kPod:
      return o.pod_namespace + "/" + o.pod_name + (o.container.empty() ? "" : "/" + o.container);
    case store::Owner::Kind::kOpaque:
      return o.opaque_id;
    case store::Owner::Kind::kNone:
      break;
  }
  return "-";
}

}  // namespace

Registry::Registry(Clock& clock, EngineListener* listener) : clock_(clock), listener_(listener) {}

TrackedInstance* Registry::Find(const store::RecordKey& key) {
  auto it = instances_.find(key);
  return it == instances_.end() ? nullptr : &it->second;
}

TrackedInstance* Registry::FindByUuid(const std::string& mig_uuid) {
  if (mig_uuid.empty()) return nullptr;
  for (auto& [key, inst] : instances_) {
    if (inst.id.mig_uuid.value() == mig_uuid) return &inst;
  }
  return nullptr;
}

Status Registry::Transition(TrackedInstance& instance, InstanceState to, EventReason reason) {
  if (!CanTransition(instance.state, to)) {
    return InternalError("refused transition " + std::string(InstanceStateName(instance.state)) +
                         " -> " + std::string(InstanceStateName(to)) + " of " +
                         instance.key().ToString());
  }
  const InstanceState from = instance.state;
  instance.state = to;
  Emit(from, instance, reason);
  return OkStatus();
}

void Registry::Load(const TrackedInstance& instance, EventReason reason) {
  instances_[instance.key()] = instance;
  Emit(InstanceState::kNone, instance, reason);
}

void Registry::Erase(const store::RecordKey& key) { instances_.erase(key); }

void Registry::AddToAllocation(const TrackedInstance& instance) {
  AllocationEntry& e = allocations_[AllocationIdOf(instance)];
  e.owner = instance.owner;
  e.keys.push_back(instance.key());
}

void Registry::RemoveFromAllocation(const std::string& id, const store::RecordKey& key) {
  auto it = allocations_.find(id);
  if (it == allocations_.end()) return;
  auto& keys = it->second.keys;
  keys.erase(std::remove(keys.begin(), keys.end(), key), keys.end());
  if (keys.empty()) allocations_.erase(it);
}

void Registry::AnnounceMark(const TrackedInstance& inst, EventReason reason) {
  Publish(inst.state, inst, reason);
}

void Registry::Emit(InstanceState from, const TrackedInstance& inst, EventReason reason) {
  const store::InstanceIdentity& id = inst.id;
  spdlog::info("instance {} -> {}{}", InstanceStateName(from), InstanceStateName(inst.state),
               Fields()
                   .Add("reason", EventReasonName(reason))
                   .Add("gpu", inst.gpu.value())
                   .Add("gpu_uuid", id.gpu_uuid)
                   .Add("mig", id.mig_uuid.value().empty() ? "-" : id.mig_uuid.value())
                   .Add("gi", inst.has_gi ? std::to_string(id.gi_id.value()) : "-")
                   .Add("ci", inst.has_ci ? std::to_string(id.ci_id.value()) : "-")
                   .Add("profile", inst.profile)
                   .Add("placement", id.placement)
                   .Add("owner", OwnerLabel(inst.owner))
                   .Add("request", inst.request_id.empty() ? "-" : inst.request_id));
  Publish(from, inst, reason);
}

void Registry::Publish(InstanceState from, const TrackedInstance& inst, EventReason reason) {
  if (listener_ == nullptr) return;
  InstanceEvent e;
  e.sequence = ++event_seq_;
  e.time = clock_.Now();
  e.from = from;
  e.to = inst.state;
  e.reason = reason;
  e.instance = ViewOf(inst);
  listener_->OnInstanceEvent(e);
}

ManagerSnapshot Registry::Snapshot(const GpuTable& gpus) const {
  ManagerSnapshot s;
  for (const auto& [k, inst] : instances_) s.instances.push_back(ViewOf(inst));
  std::sort(s.instances.begin(), s.instances.end(), [](const auto& a, const auto& b) {
    return std::tie(a.gpu, a.placement) < std::tie(b.gpu, b.placement);
  });
  for (const auto& [g, gis] : foreign_) {
    const mig::GpuModel* model = gpus.Model(g);
    const driver::GpuInfo* info = gpus.ManagedInfo(g);
    if (model == nullptr || info == nullptr) continue;
    for (const driver::GpuInstanceInfo& gi : gis) {
      ForeignInstance f;
      f.gpu = GpuIndex(g);
      f.gpu_uuid = info->uuid;
      f.profile_id = gi.profile_id;
      const mig::GiProfile* p = model->FindProfileById(gi.profile_id);
      f.profile = p ? p->name : "";
      f.placement = gi.placement;
      f.gi_id = gi.id;
      f.compute_instances = gi.compute_instances;
      s.foreign.push_back(std::move(f));
    }
  }
  return s;
}

}  // namespace migd::engine
