// File: k8s/apiserver/hami_backend.h
//
// HamiBackend: the k8s::AllocationBackend of HAMi protocol mode
// (reference/hami.md §2, §5, §7). migd replaces HAMi's NVIDIA device plugin
// in `mig` mode and keeps its protocol with HAMi's scheduler:
//
//   Devices()          HAMi's placeholder replicas `<GPU-UUID>-<i>`,
//                      i < device_split_count, for every GPU with a MIG
//                      placement table (stable: UUIDs and the count only).
//   AllocateContainer  (one kubelet container; serialised node-wide as
//                      HAMi's applyMutex)
//     1. LIST the pods on this node; the pod being bound is the Pending one
//        with bind-time set, bind-phase allocating|success and vgpu-node ==
//        this node (HAMi's GetPendingPod) and a container left in
//        vgpu-devices-to-allocate; the oldest bind-time wins;
//     2. ended pods' instances are released first (-> Idle), as HAMi's
//        Allocate reconciles first;
//     3. pop the first non-empty container of vgpu-devices-to-allocate; its
//        position is the containerIndex (init containers first) and names
//        the container; its vgpu-mig-allocations entries (by deviceIndex)
//        must match the popped devices in count and GPU UUID;
//     4. engine::Manager::Allocate with every instance pinned to the reserved
//        GPU and placement, owner Pod(ns, name, uid, container), request id
//        RequestId(uid, containerIndex) (idempotent on kubelet retries);
//     5. one merge patch guarded by metadata.resourceVersion writes migUUID,
//        gpuInstanceID, computeInstanceID and erases the container's entry
//        from vgpu-devices-to-allocate; 409 -> re-read and re-apply (at most
//        `patch_attempts` times);
//     6. when no container is left: bind-phase=success and the node lock
//        hami.io/mutex.lock released (only if it names this pod; a
//        conflicting node write is retried); failures of this step are
//        logged, not returned: the instances are realised and recorded;
//     any error after step 1: bind-phase=failed, node lock released, and an
//     allocation made in step 4 returned to Idle.
//   ReleaseEndedPods   one pass of the release reconciler (PodWatcher runs it
//                      periodically): every Active instance owned by a pod
//                      that is gone, terminating, Succeeded or Failed is
//                      released (-> Idle, GI/CI kept for reuse). A LIST
//                      failure skips the pass (fail closed: nothing released).
//   PublishNodeRegistration  patches hami.io/node-nvidia-register and
//                      hami.io/node-handshake on this node.
//
// Thread-safety: all methods are thread-safe; AllocateContainer and
// ReleaseEndedPods exclude each other so that a release pass never acts on a
// pod list older than an allocation.
#ifndef MIGD_K8S_APISERVER_HAMI_BACKEND_H_
#define MIGD_K8S_APISERVER_HAMI_BACKEND_H_

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/cdi_observer.h"
#include "engine/manager.h"
#include "k8s/allocation_backend.h"
#include "k8s/apiserver/hami_codec.h"
#include "k8s/apiserver/kube_client.h"

namespace migd::k8s {

struct HamiBackendOptions {
  std::string node_name;  // required ($NODE_NAME)
  // Replicas advertised per GPU (HAMi's deviceSplitCount).
  int device_split_count = 10;
  // When set, AllocateContainer returns CDI names / legacy nodes of the
  // published specs; else only NVIDIA_VISIBLE_DEVICES=MIG-... . Not owned.
  engine::CdiObserver* cdi = nullptr;
  bool cdi_enabled = true;
  // Profiles published in hami.io/node-nvidia-register (empty = all base
  // profiles); HAMi's migProfileAllowlist.
  std::set<std::string> profile_allowlist;
  // Attempts of the resourceVersion-guarded patch (409 -> re-read).
  int patch_attempts = 5;
};

struct ReleasePassResult {
  uint64_t released = 0;     // allocations (or adopted instances) made Idle
  uint64_t active_pods = 0;  // pods on the node holding devices
};

class HamiBackend final : public AllocationBackend {
 public:
  // `client` and `manager` are not owned and must outlive the backend.
  HamiBackend(KubeClient* client, engine::Manager* manager, HamiBackendOptions options);

  std::vector<AdvertisedDevice> Devices() override;
  StatusOr<ContainerAllocation> AllocateContainer(
      const std::vector<std::string>& device_ids) override;

  StatusOr<ReleasePassResult> ReleaseEndedPods();
  Status PublishNodeRegistration();

  // "hami-<pod uid>-<containerIndex>".
  static std::string RequestId(const std::string& pod_uid, int container_index);

 private:
  // Steps 3-6 for `pod`; on error the caller marks the pod failed.
  StatusOr<ContainerAllocation> AllocateForPod(const nlohmann::json& pod);
  // Step 5 (with the 409 loop) and 6.
  Status WriteBack(const nlohmann::json& pod, int container_index,
                   const std::vector<engine::InstanceView>& instances);
  // bind-phase=<phase> (no resourceVersion: the phase is ours to set) and
  // releases the node lock.
  Status FinishBind(const std::string& ns, const std::string& name, const char* phase);
  Status ReleaseNodeLock(const std::string& ns, const std::string& name);
  ReleasePassResult ReleaseEndedLocked(const nlohmann::json& pod_list);
  StatusOr<ContainerAllocation> BuildResponse(const std::vector<engine::InstanceView>& instances);

  KubeClient* const client_;
  engine::Manager* const manager_;
  const HamiBackendOptions options_;
  std::mutex mu_;  // HAMi's applyMutex: one Allocate or release pass at a time
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_APISERVER_HAMI_BACKEND_H_
