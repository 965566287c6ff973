// File: k8s/apiserver/hami_backend.h
//
// HamiBackend: the k8s::AllocationBackend of HAMi protocol mode. migd
// replaces HAMi's NVIDIA device plugin in `mig` mode and keeps its protocol
// with HAMi's scheduler (docs/kubernetes.md has the parity table):
//
//   Devices()          HAMi's placeholder replicas `<GPU-UUID>-<i>`
//                      (placeholder_id.h) for every MIG GPU; stable; all
//                      Unhealthy on a GPU the health monitor marked.
//   OnHealthChange     a GPU newly marked unhealthy, or its mark cleared: the
//                      device list changed (the plugin sends it at once) and
//                      so did the node registration (the registration-changed
//                      callback, PodWatcher::RequestRegistration in the
//                      daemon, publishes it at once); cheap, never blocks.
//   AllocateContainer  one kubelet container, serialised node-wide as HAMi's
//                      applyMutex:
//     1. the pod is the one the node lock names (BoundPodFinder: kUnavailable
//        when there is none; never a scan of pods' own annotations);
//     2. PlanContainer's cross-checks (container, counts, kubelet's ids,
//        GPUs, profile, placement); a refusal creates, reclaims and patches
//        nothing;
//     3. ended pods' instances are released first (-> Idle), as HAMi's
//        Allocate reconciles first; a failed LIST is kUnavailable;
//     4. engine::Manager::Allocate pinned to the reserved GPUs and
//        placements, owner Pod(ns, name, uid, container), request id
//        HamiRequestId(uid, containerIndex) (idempotent on replays);
//     5. HamiPodWriter::WriteIdentity, then, when no container is left,
//        bind-phase=success and the node lock released (failures of this
//        last step are logged: the instances are realised and recorded);
//     a failure in 4-5 marks the pod bind-phase=failed, releases the lock
//     and returns an allocation made in 4 to Idle.
//   PreferredAllocation  replicas of the GPUs the bound pod's next container
//                      is reserved on (HAMi's GetPreferredAllocation), so
//                      kubelet's ids pass step 2; when no bound pod can be
//                      found, the default choice (kubelet fails admission on
//                      a GetPreferredAllocation error).
//   ReleaseEndedPods   one pass of the release reconciler (PodWatcher): every
//                      Active instance of a pod that is gone, terminating,
//                      Succeeded or Failed goes Idle. A failed LIST releases
//                      nothing.
//   PublishNodeRegistration  patches hami.io/node-nvidia-register.
//
// Thread-safety: all methods are thread-safe; AllocateContainer and
// ReleaseEndedPods exclude each other so that a release pass never acts on a
// pod list older than an allocation.
#ifndef MIGD_K8S_APISERVER_HAMI_BACKEND_H_
#define MIGD_K8S_APISERVER_HAMI_BACKEND_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "engine/cdi_observer.h"
#include "engine/manager.h"
#include "k8s/allocation_backend.h"
#include "k8s/apiserver/bound_pod.h"
#include "k8s/apiserver/container_plan.h"
#include "k8s/apiserver/hami_pod_writer.h"
#include "k8s/apiserver/kube_client.h"
#include "k8s/apiserver/node_lock.h"
#include "k8s/apiserver/pod_object.h"

namespace migd::k8s {

struct HamiBackendOptions {
  std::string node_name;  // required ($NODE_NAME)
  // The extended resource kubelet allocates (HAMi's resourceCountName).
  std::string resource_name = "nvidia.com/gpu";
  // Replicas advertised per GPU (HAMi's deviceSplitCount).
  int device_split_count = 10;
  // HAMi's node-lock expiry (NodeLockTimeout; scheduler.nodeLockExpire).
  Clock::Duration node_lock_expiry = kHamiNodeLockExpiry;
  // When set, AllocateContainer returns CDI names / legacy nodes of the
  // published specs; else only NVIDIA_VISIBLE_DEVICES=MIG-... . Not owned.
  engine::CdiObserver* cdi = nullptr;
  bool cdi_enabled = true;
  // Profiles published and accepted (empty = all base profiles); HAMi's
  // migProfileAllowlist.
  std::set<std::string> profile_allowlist;
  // Attempts of a resourceVersion-guarded patch (409 -> re-read).
  int patch_attempts = 5;
};

struct ReleasePassResult {
  uint64_t released = 0;     // allocations (or adopted instances) made Idle
  uint64_t active_pods = 0;  // pods on the node holding devices
};

class HamiBackend final : public AllocationBackend {
 public:
  // `client`, `manager` and `clock` are not owned and must outlive the
  // backend.
  HamiBackend(KubeClient* client, engine::Manager* manager, const Clock* clock,
              HamiBackendOptions options);

  std::vector<AdvertisedDevice> Devices() override;
  StatusOr<ContainerAllocation> AllocateContainer(
      const std::vector<std::string>& device_ids) override;
  StatusOr<std::vector<std::string>> PreferredAllocation(
      const std::vector<std::string>& available, const std::vector<std::string>& must_include,
      int size) override;

  // engine::EngineListener::OnHealthChange's contract (registry lock held).
  void OnHealthChange(const engine::HealthChange& change);
  // Called by OnHealthChange when PublishNodeRegistration would publish
  // another health; must not block. Set once, before the engine's listener
  // can reach OnHealthChange.
  void SetRegistrationChangedCallback(std::function<void()> callback) {
    registration_changed_ = std::move(callback);
  }

  StatusOr<ReleasePassResult> ReleaseEndedPods() ABSL_LOCKS_EXCLUDED(mu_);
  Status PublishNodeRegistration();

 private:
  // Steps 2-5 for the bound pod.
  StatusOr<ContainerAllocation> AllocateForPod(const PodObject& pod,
                                               const std::vector<std::string>& device_ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Steps 4-5 once the plan is checked.
  StatusOr<ContainerAllocation> Realise(const PodObject& pod, const ContainerPlan& plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The container indices of `pod` migd holds an Active allocation for.
  std::set<int> ServedContainers(const PodObject& pod) const;
  StatusOr<ReleasePassResult> ReleaseEndedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StatusOr<ContainerAllocation> BuildResponse(const std::vector<engine::InstanceView>& instances);

  KubeClient* const client_;
  engine::Manager* const manager_;
  const HamiBackendOptions options_;
  const BoundPodFinder finder_;
  const HamiPodWriter writer_;
  std::function<void()> registration_changed_;
  Mutex mu_;  // HAMi's applyMutex: one Allocate or release pass at a time
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_APISERVER_HAMI_BACKEND_H_
