// File: k8s/podresources/owner_sources.h
//
// engine::OwnerSource implementations for Kubernetes nodes
// (docs/architecture.md, "Durability and recovery"; kubelet's PodResources
// v1 api.proto; HAMi's pod annotations, docs/kubernetes.md):
//
// PodResourcesOwnerSource (`podresources`): kubelet's PodResources `List`
// joined with migd's records. The join:
//   - Keep List's containers that hold devices of `resource_name`.
//   - A committed Active record whose owner is a pod is active iff List has a
//     container with the owner's namespace, pod name and container name that
//     holds devices of the resource (a record with an empty container name
//     matches any such container of the pod). The join is by owner and not by
//     device id because the advertised ids are the backend's business: in
//     HAMi mode they are placeholder replicas `<GPU-UUID>-<i>` that name no
//     instance (kubelet-apis.md §4). List carries no pod uid, so a pod
//     recreated under the same name keeps the instance until the pod watcher
//     sees the old uid gone.
//   - Active records with an opaque owner (migctl clients) are kept active:
//     kubelet cannot vouch for them either way.
//   - Inconsistent -> kFailedPrecondition (startup fails closed): a container
//     that holds devices of the resource but owns no committed Active record
//     (the container runs with something migd cannot name; kubelet-apis.md
//     §2.6 step 6), or a pod listed twice.
//   - Unreachable kubelet -> the client's error (kUnavailable, ...).
//   - Release is conservative: when an Active pod record is unmatched, List is
//     taken again after `confirm_delay` and a record matched by either List
//     stays active. Before Kubernetes 1.34 List may still report terminal
//     pods; they keep their instances Active until the pod watcher releases
//     them — the safe direction.
//
// HamiOwnerSource (`hami`): the node's pods from the API server and their
// `hami.io/vgpu-mig-allocations` reservations (hami.md §4, §7):
//   - pods that are terminating (deletionTimestamp) or terminal (Succeeded,
//     Failed) own nothing;
//   - a reservation with the full runtime identity (migUUID, gpuInstanceID,
//     computeInstanceID) is an owned instance, verified by recovery against
//     the GPU, placement and ids it names; the owner is the pod (namespace,
//     name, uid) and the container at containerIndex (init containers first);
//   - a reservation with no runtime identity is a pod that is scheduled but
//     not yet allocated: it owns nothing yet (unlike HAMi v2.10, it does not
//     stop the adoption of the other pods);
//   - inconsistent -> kFailedPrecondition: a containerIndex outside the pod's
//     containers, one MIG UUID reserved by two live pods or containers;
//   - API server unreachable or an undecodable annotation -> the lister's error.
//
// Thread-safety: ActiveOwners is called once, from the recovery thread; the
// sources hold no state between calls.
#ifndef MIGD_K8S_PODRESOURCES_OWNER_SOURCES_H_
#define MIGD_K8S_PODRESOURCES_OWNER_SOURCES_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "engine/owner_source.h"
#include "k8s/podresources/client.h"
#include "mig/placement.h"

namespace migd::k8s {

struct PodResourcesOwnerSourceOptions {
  std::string resource_name;  // e.g. "nvidia.com/gpu"; required
  std::chrono::milliseconds confirm_delay = std::chrono::seconds(2);
  // How to wait confirm_delay (tests substitute a recorder).
  std::function<void(std::chrono::milliseconds)> sleep = nullptr;
};

class PodResourcesOwnerSource final : public engine::OwnerSource {
 public:
  // REQUIRES: `lister` outlives this object.
  PodResourcesOwnerSource(PodResourcesLister& lister, PodResourcesOwnerSourceOptions options);
  std::string_view name() const override { return "podresources"; }
  StatusOr<std::vector<engine::OwnedInstance>> ActiveOwners(
      const std::vector<store::Record>& records) override;

 private:
  PodResourcesLister& lister_;
  PodResourcesOwnerSourceOptions options_;
};

// One `hami.io/vgpu-mig-allocations` element (hami.md §4), decoded.
struct HamiMigReservation {
  int container_index = 0;  // init containers first, then regular containers
  int device_index = 0;
  GpuUuid gpu_uuid;
  std::string profile;  // e.g. "2g.10gb"
  mig::Placement placement;
  // The runtime identity: all three or none (the codec rejects partial ones).
  std::optional<MigUuid> mig_uuid;
  std::optional<NvmlGiId> gi_id;
  std::optional<NvmlCiId> ci_id;
};

// A pod bound to this node, as the hami source needs it.
struct HamiNodePod {
  std::string pod_namespace;
  std::string pod_name;
  PodUid uid;
  std::string phase;      // status.phase: Pending, Running, Succeeded, Failed, Unknown
  bool deleting = false;  // metadata.deletionTimestamp set
  std::vector<std::string> containers;  // init containers first, then regular ones
  std::vector<HamiMigReservation> reservations;
};

// The node's pods with decoded reservations. The production implementation
// adapts k8s/apiserver's KubeClient and annotation codec (daemon wiring).
class HamiPodLister {
 public:
  virtual ~HamiPodLister() = default;
  // Pods with spec.nodeName == this node. Errors: unreachable API server,
  // an undecodable annotation (naming the pod).
  virtual StatusOr<std::vector<HamiNodePod>> ListNodePods() = 0;
};

class HamiOwnerSource final : public engine::OwnerSource {
 public:
  // REQUIRES: `lister` outlives this object.
  explicit HamiOwnerSource(HamiPodLister& lister) : lister_(lister) {}
  std::string_view name() const override { return "hami"; }
  StatusOr<std::vector<engine::OwnedInstance>> ActiveOwners(
      const std::vector<store::Record>& records) override;

 private:
  HamiPodLister& lister_;
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_PODRESOURCES_OWNER_SOURCES_H_
