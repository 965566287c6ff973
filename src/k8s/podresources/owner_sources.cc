#include "k8s/podresources/owner_sources.h"

#include <map>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "base/status_macros.h"
#include "k8s/hami_request_id.h"

namespace migd::k8s {
namespace {

using PodKey = std::pair<std::string, std::string>;                      // namespace, name
using ContainerKey = std::tuple<std::string, std::string, std::string>;  // + container

bool IsActivePodRecord(const store::Record& r) {
  return r.phase == store::RecordPhase::kCommitted && r.state == store::RecordState::kActive &&
         r.mig_uuid.has_value() && r.owner.kind == store::Owner::Kind::kPod;
}

// The containers of `pods` that hold devices of `resource`, keyed by
// (namespace, pod, container). Errors: a pod listed twice.
StatusOr<std::set<ContainerKey>> HoldersOf(const std::vector<PodResourcesEntry>& pods,
                                           const std::string& resource) {
  std::set<PodKey> seen;
  std::set<ContainerKey> holders;
  for (const PodResourcesEntry& pod : pods) {
    if (!seen.insert({pod.pod_namespace, pod.pod_name}).second) {
      return FailedPreconditionError("kubelet PodResources List reports pod " + pod.pod_namespace +
                                     "/" + pod.pod_name + " twice; refusing to guess its devices");
    }
    for (const ContainerEntry& c : pod.containers) {
      for (const ContainerDevicesEntry& d : c.devices) {
        if (d.resource_name == resource && !d.device_ids.empty()) {
          holders.insert({pod.pod_namespace, pod.pod_name, c.name});
        }
      }
    }
  }
  return holders;
}

bool Matches(const store::Owner& owner, const std::set<ContainerKey>& holders) {
  if (!owner.container.empty()) {
    return holders.contains({owner.pod_namespace, owner.pod_name, owner.container});
  }
  auto it = holders.lower_bound({owner.pod_namespace, owner.pod_name, ""});
  return it != holders.end() && std::get<0>(*it) == owner.pod_namespace &&
         std::get<1>(*it) == owner.pod_name;
}

}  // namespace

PodResourcesOwnerSource::PodResourcesOwnerSource(PodResourcesLister& lister,
                                                 PodResourcesOwnerSourceOptions options)
    : lister_(lister), options_(std::move(options)) {
  if (!options_.sleep) {
    options_.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  }
}

StatusOr<std::vector<engine::OwnedInstance>> PodResourcesOwnerSource::ActiveOwners(
    const std::vector<store::Record>& records) {
  if (options_.resource_name.empty()) {
    return InvalidArgumentError("podresources owner source: no resource name configured");
  }
  MIGD_ASSIGN_OR_RETURN(std::vector<PodResourcesEntry> pods, lister_.List());
  MIGD_ASSIGN_OR_RETURN(std::set<ContainerKey> holders, HoldersOf(pods, options_.resource_name));

  // Every holder must own something migd knows (kubelet-apis.md §2.6 step 6).
  for (const ContainerKey& h : holders) {
    bool owned = false;
    for (const store::Record& r : records) {
      if (!IsActivePodRecord(r) || r.owner.pod_namespace != std::get<0>(h) ||
          r.owner.pod_name != std::get<1>(h)) {
        continue;
      }
      if (r.owner.container.empty() || r.owner.container == std::get<2>(h)) {
        owned = true;
        break;
      }
    }
    if (!owned) {
      return FailedPreconditionError(
          "container " + std::get<0>(h) + "/" + std::get<1>(h) + "/" + std::get<2>(h) + " holds " +
          options_.resource_name +
          " devices (kubelet PodResources) but migd has no Active record for it; the container "
          "runs with an instance migd cannot verify. Delete the pod, or start migd with "
          "recovery.ownerSource: hami or records");
    }
  }

  bool any_unmatched = false;
  for (const store::Record& r : records) {
    if (IsActivePodRecord(r) && !Matches(r.owner, holders)) any_unmatched = true;
  }
  if (any_unmatched) {
    // A second List before releasing anything: the first may have been taken
    // in kubelet's restart window (kubelet-apis.md §2.6 step 5).
    options_.sleep(options_.confirm_delay);
    MIGD_ASSIGN_OR_RETURN(std::vector<PodResourcesEntry> again, lister_.List());
    MIGD_ASSIGN_OR_RETURN(std::set<ContainerKey> more, HoldersOf(again, options_.resource_name));
    holders.merge(more);
  }

  std::vector<engine::OwnedInstance> out;
  for (const store::Record& r : records) {
    if (r.phase != store::RecordPhase::kCommitted || r.state != store::RecordState::kActive ||
        !r.mig_uuid) {
      continue;
    }
    if (r.owner.kind == store::Owner::Kind::kOpaque ||
        (r.owner.kind == store::Owner::Kind::kPod && Matches(r.owner, holders))) {
      out.push_back(engine::OwnedFromRecord(r));
    }
  }
  return out;
}

StatusOr<std::vector<engine::OwnedInstance>> HamiOwnerSource::ActiveOwners(
    const std::vector<store::Record>& /*records*/) {
  MIGD_ASSIGN_OR_RETURN(std::vector<HamiNodePod> pods, lister_.ListNodePods());
  std::vector<engine::OwnedInstance> out;
  std::map<std::string, std::string> holder_of;  // MIG UUID -> "ns/pod/container"
  for (const HamiNodePod& pod : pods) {
    if (pod.deleting || pod.phase == "Succeeded" || pod.phase == "Failed") continue;
    for (const HamiMigReservation& res : pod.reservations) {
      if (!res.mig_uuid) continue;  // scheduled, not allocated yet: owns nothing
      const std::string pod_name = pod.pod_namespace + "/" + pod.pod_name;
      if (!res.gi_id || !res.ci_id) {
        return FailedPreconditionError(
            "pod " + pod_name +
            ": hami.io/vgpu-mig-allocations has a partial runtime "
            "identity (migUUID without gpuInstanceID/computeInstanceID)");
      }
      if (res.container_index < 0 ||
          static_cast<size_t>(res.container_index) >= pod.containers.size()) {
        return FailedPreconditionError("pod " + pod_name +
                                       ": hami.io/vgpu-mig-allocations names containerIndex " +
                                       std::to_string(res.container_index) + " but the pod has " +
                                       std::to_string(pod.containers.size()) + " containers");
      }
      const std::string& container = pod.containers[res.container_index];
      const std::string who = pod_name + "/" + container;
      auto [it, inserted] = holder_of.emplace(res.mig_uuid->value(), who);
      if (!inserted) {
        return FailedPreconditionError("MIG instance " + res.mig_uuid->value() +
                                       " is reserved by both " + it->second + " and " + who +
                                       " (hami.io/vgpu-mig-allocations); refusing to pick one");
      }
      engine::OwnedInstance o;
      o.mig_uuid = *res.mig_uuid;
      o.owner = store::Owner::Pod(pod.pod_namespace, pod.pod_name, pod.uid, container);
      o.request_id = HamiRequestId(pod.uid.value(), res.container_index);
      o.gpu_uuid = res.gpu_uuid;
      o.placement = res.placement;
      o.gi_id = res.gi_id;
      o.ci_id = res.ci_id;
      out.push_back(std::move(o));
    }
  }
  return out;
}

}  // namespace migd::k8s
