#include "k8s/apiserver/hami_backend.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <utility>

#include "base/logging.h"
#include "base/status_macros.h"
#include "cdi/publisher.h"
#include "k8s/apiserver/hami_annotations.h"
#include "k8s/apiserver/node_register.h"
#include "k8s/apiserver/placeholder_id.h"
#include "k8s/apiserver/pod_devices.h"
#include "k8s/hami_request_id.h"

namespace migd::k8s {
namespace {

// The realised instances are the reserved ones, in order.
Status CheckRealised(const ContainerPlan& plan, const std::vector<engine::InstanceView>& got) {
  if (got.size() != plan.reservations.size()) {
    return InternalError(absl::StrCat("engine realised ", got.size(), " instances for ",
                                      plan.reservations.size(), " reservations"));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const hami::MigAllocation& want = plan.reservations[i];
    if (got[i].gpu_uuid.value() != want.gpu_uuid || !(got[i].placement == want.placement)) {
      return InternalError(absl::StrCat("engine realised ", got[i].mig_uuid.value(), " at ",
                                        got[i].placement.ToString(), " on ",
                                        got[i].gpu_uuid.value(), ", not the reserved ",
                                        want.placement.ToString(), " on ", want.gpu_uuid));
    }
  }
  return OkStatus();
}

std::vector<hami::RuntimeIdentity> Identities(const std::vector<engine::InstanceView>& got) {
  std::vector<hami::RuntimeIdentity> out;
  for (const engine::InstanceView& v : got) {
    out.push_back({v.mig_uuid.value(), v.gi_id.value(), v.ci_id.value()});
  }
  return out;
}

}  // namespace

HamiBackend::HamiBackend(KubeClient* client, engine::Manager* manager, const Clock* clock,
                         HamiBackendOptions options)
    : client_(client),
      manager_(manager),
      options_(std::move(options)),
      finder_(client, clock,
              BoundPodOptions{.node_name = options_.node_name,
                              .lock_expiry = options_.node_lock_expiry}),
      writer_(client, options_.node_name, options_.patch_attempts) {}

std::vector<AdvertisedDevice> HamiBackend::Devices() {
  std::vector<AdvertisedDevice> out;
  for (const engine::GpuView& g : manager_->Gpus()) {
    if (g.model == nullptr) continue;  // MIG disabled: nothing HAMi could reserve
    for (int i = 0; i < options_.device_split_count; ++i) {
      AdvertisedDevice d;
      d.id = PlaceholderId(g.info.uuid.value(), i);
      d.healthy = !g.unhealthy;
      out.push_back(std::move(d));
    }
  }
  return out;
}

void HamiBackend::OnHealthChange(const engine::HealthChange& change) {
  // A replica stands for its GPU's capacity, not for one instance: only a GPU
  // mark (set or cleared) changes Devices(). An unhealthy instance is never
  // reused by the engine, so the GPU's other capacity stays on offer.
  if (!change.gpu_changed) return;
  NotifyDevicesChanged();
  if (registration_changed_) registration_changed_();
}

std::set<int> HamiBackend::ServedContainers(const PodObject& pod) const {
  std::set<std::string> active;
  for (const engine::InstanceView& v : manager_->List().instances) {
    if (v.state == engine::InstanceState::kActive) active.insert(v.request_id);
  }
  std::set<int> out;
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    if (active.count(HamiRequestId(pod.meta.uid, static_cast<int>(i)))) {
      out.insert(static_cast<int>(i));
    }
  }
  return out;
}

StatusOr<ContainerAllocation> HamiBackend::AllocateContainer(
    const std::vector<std::string>& device_ids) {
  MutexLock lock(&mu_);
  StatusOr<PodObject> pod = finder_.Find();
  if (!pod.ok()) {
    spdlog::warn("HAMi allocate refused{}", Fields()
                                                .Add("devices", absl::StrJoin(device_ids, ","))
                                                .Add("error", pod.status().ToString()));
    return pod.status();
  }
  StatusOr<ContainerAllocation> result = AllocateForPod(*pod, device_ids);
  if (!result.ok()) return result.status().WithContext("pod " + pod->Key());
  return result;
}

StatusOr<ContainerAllocation> HamiBackend::AllocateForPod(
    const PodObject& pod, const std::vector<std::string>& device_ids) {
  PlanInput in{.pod = &pod,
               .device_ids = device_ids,
               .gpus = manager_->Gpus(),
               .device_split_count = options_.device_split_count,
               .profile_allowlist = options_.profile_allowlist,
               .resource_name = options_.resource_name,
               .served = ServedContainers(pod)};
  StatusOr<ContainerPlan> plan = PlanContainer(in);
  if (!plan.ok()) {
    // Nothing was created, reclaimed or patched: the pod's admission fails
    // and its lock expires on the scheduler's side.
    spdlog::warn("HAMi allocate refused{}", Fields()
                                                .Add("pod", pod.Key())
                                                .Add("devices", absl::StrJoin(device_ids, ","))
                                                .Add("error", plan.status().ToString()));
    return plan.status();
  }
  // Release before allocating, so that a pod that ended frees its
  // placements for the reservation (HAMi reconciles first too).
  StatusOr<ReleasePassResult> released = ReleaseEndedLocked();
  if (!released.ok()) {
    return UnavailableError(absl::StrCat("cannot list the pods of node ", options_.node_name, ": ",
                                         std::string(released.status().message())));
  }
  StatusOr<ContainerAllocation> result = Realise(pod, *plan);
  if (!result.ok()) {
    spdlog::warn("HAMi allocation failed{}",
                 Fields().Add("pod", pod.Key()).Add("error", result.status().ToString()));
    const Status s = writer_.FinishBind(pod, hami::kBindPhaseFailed);
    if (!s.ok()) spdlog::warn("cannot mark pod failed{}", Fields().Add("error", s.ToString()));
  }
  return result;
}

StatusOr<ContainerAllocation> HamiBackend::Realise(const PodObject& pod,
                                                   const ContainerPlan& plan) {
  engine::AllocateRequest req{.request_id = HamiRequestId(pod.meta.uid, plan.container_index),
                              .owner = store::Owner::Pod(pod.meta.ns, pod.meta.name,
                                                         PodUid(pod.meta.uid), plan.container_name),
                              .instances = plan.instances};
  MIGD_ASSIGN_OR_RETURN(engine::Allocation alloc, manager_->Allocate(req));
  // The response first: the pod is written only once the container can get
  // what it says.
  Status s = CheckRealised(plan, alloc.instances);
  StatusOr<ContainerAllocation> resp = s.ok() ? BuildResponse(alloc.instances) : s;
  StatusOr<bool> done = false;
  if (resp.ok()) {
    done = writer_.WriteIdentity(pod, plan.container_index, Identities(alloc.instances));
    if (!done.ok()) resp = done.status();
  }
  if (!resp.ok()) {
    // Nothing of this allocation reaches a container: back to Idle (kept for
    // reuse, unlike HAMi's rollback which destroys).
    const Status r = manager_->Release(req.request_id);
    if (!r.ok()) spdlog::warn("rollback release failed{}", Fields().Add("error", r.ToString()));
    return resp.status();
  }
  if (*done) {
    // Realised and recorded on the pod: a failure to set the phase or free
    // the lock must not undo that (HAMi logs it too; the lock expires).
    const Status fin = writer_.FinishBind(pod, hami::kBindPhaseSuccess);
    if (!fin.ok()) {
      spdlog::warn("cannot mark pod bound{}",
                   Fields().Add("pod", pod.Key()).Add("error", fin.ToString()));
    }
  }
  spdlog::info("HAMi allocation realised{}", Fields()
                                                 .Add("pod", pod.Key())
                                                 .Add("container", plan.container_name)
                                                 .Add("request", req.request_id)
                                                 .Add("instances", alloc.instances.size()));
  return resp;
}

StatusOr<std::vector<std::string>> HamiBackend::PreferredAllocation(
    const std::vector<std::string>& available, const std::vector<std::string>& must_include,
    int size) {
  auto fallback = [&](const Status& why) {
    spdlog::debug("preferred allocation without a reservation{}",
                  Fields().Add("why", why.ToString()));
    return AllocationBackend::PreferredAllocation(available, must_include, size);
  };
  StatusOr<PodObject> pod = finder_.Find();
  if (!pod.ok()) return fallback(pod.status());
  StatusOr<hami::PodDevices> devices =
      hami::DecodePodDevices(pod->meta.Annotation(hami::kDevicesToAllocate).value_or(""));
  if (!devices.ok()) return fallback(devices.status());
  const std::optional<int> next = hami::NextContainer(*devices);
  if (!next) return fallback(FailedPreconditionError("no container left to allocate"));
  // One replica of each reserved GPU, in the reservation's order.
  std::vector<std::string> out = must_include;
  std::multiset<std::string> wanted;
  for (const hami::ContainerDevice& d : (*devices)[*next]) wanted.insert(d.uuid);
  for (const std::string& id : must_include) {
    const std::optional<Placeholder> p = ParsePlaceholderId(id);
    if (p && wanted.count(p->gpu_uuid)) wanted.erase(wanted.find(p->gpu_uuid));
  }
  for (const std::string& id : available) {
    if (static_cast<int>(out.size()) >= size) break;
    const std::optional<Placeholder> p = ParsePlaceholderId(id);
    if (!p || wanted.count(p->gpu_uuid) == 0) continue;
    if (std::find(out.begin(), out.end(), id) != out.end()) continue;
    wanted.erase(wanted.find(p->gpu_uuid));
    out.push_back(id);
  }
  if (static_cast<int>(out.size()) != size || !wanted.empty()) {
    return fallback(FailedPreconditionError("the reserved GPUs have too few available replicas"));
  }
  return out;
}

StatusOr<ContainerAllocation> HamiBackend::BuildResponse(
    const std::vector<engine::InstanceView>& instances) {
  ContainerAllocation out;
  std::vector<std::string> visible;
  std::vector<cdi::BuiltSpec> specs;
  for (const engine::InstanceView& v : instances) {
    out.mig_uuids.push_back(v.mig_uuid);
    visible.push_back(v.mig_uuid.value());
    if (options_.cdi != nullptr) {
      std::optional<cdi::BuiltSpec> spec = options_.cdi->SpecOf(v.mig_uuid);
      if (!spec) return InternalError("no CDI spec published for " + v.mig_uuid.value());
      specs.push_back(std::move(*spec));
    }
  }
  if (options_.cdi == nullptr) {
    out.envs.emplace_back("NVIDIA_VISIBLE_DEVICES", absl::StrJoin(visible, ","));
    return out;
  }
  cdi::AllocateDevices devs = cdi::MakeAllocateDevices(specs, options_.cdi_enabled);
  out.cdi_devices = std::move(devs.cdi_devices);
  out.envs = std::move(devs.envs);
  out.device_nodes = std::move(devs.device_nodes);
  return out;
}

StatusOr<ReleasePassResult> HamiBackend::ReleaseEndedPods() {
  MutexLock lock(&mu_);
  StatusOr<ReleasePassResult> r = ReleaseEndedLocked();
  if (!r.ok()) return r.status().WithContext("release pass skipped, nothing released");
  return r;
}

StatusOr<ReleasePassResult> HamiBackend::ReleaseEndedLocked() {
  MIGD_ASSIGN_OR_RETURN(nlohmann::json list, client_->ListPods(options_.node_name));
  MIGD_ASSIGN_OR_RETURN(std::vector<PodObject> pods,
                        ParsePodList(list, "pod list of node " + options_.node_name));
  ReleasePassResult result;
  std::set<std::string> active_uids;
  for (const PodObject& p : pods) {
    if (p.Active()) active_uids.insert(p.meta.uid);
  }
  result.active_pods = active_uids.size();
  // By request id (one Release per allocation); instances adopted at
  // startup may carry none: those go one by one.
  std::set<std::string> by_request;
  std::set<std::string> by_uuid;
  for (const engine::InstanceView& v : manager_->List().instances) {
    if (v.state != engine::InstanceState::kActive) continue;
    if (v.owner.kind != store::Owner::Kind::kPod) continue;
    if (active_uids.count(v.owner.pod_uid.value())) continue;
    if (v.request_id.empty()) {
      by_uuid.insert(v.mig_uuid.value());
    } else {
      by_request.insert(v.request_id);
    }
  }
  auto report = [&result](const std::string& what, const Status& s) {
    if (s.ok()) {
      ++result.released;
      spdlog::info("released instances of ended pod{}", Fields().Add("what", what));
    } else {
      spdlog::warn("release of ended pod failed{}",
                   Fields().Add("what", what).Add("error", s.ToString()));
    }
  };
  for (const std::string& id : by_request) report(id, manager_->Release(id));
  for (const std::string& uuid : by_uuid) report(uuid, manager_->ReleaseInstance(MigUuid(uuid)));
  return result;
}

Status HamiBackend::PublishNodeRegistration() {
  nlohmann::json patch;
  patch["metadata"]["annotations"][hami::kNodeRegister] =
      hami::NodeRegisterValue(manager_->Gpus(), options_.profile_allowlist).dump();
  return client_->PatchNode(options_.node_name, patch).status();
}

}  // namespace migd::k8s
