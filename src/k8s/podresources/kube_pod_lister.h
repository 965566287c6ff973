// File: k8s/podresources/kube_pod_lister.h
//
// KubeHamiPodLister: HamiPodLister (owner_sources.h) over the API server —
// k8s::KubeClient::ListPods(node) and HAMi's annotation codec
// (k8s/apiserver/hami_codec.h). Containers are listed init containers first,
// as HAMi's containerIndex counts them.
//
// Errors: the client's (kUnavailable for an unreachable API server, ...);
// kDataLoss in JsonReader's style for a PodList item without namespace, name
// or uid, and naming the pod for an undecodable
// hami.io/vgpu-mig-allocations (the codec's message).
//
// Thread-safety: as thread-safe as the KubeClient (which is).
#ifndef MIGD_K8S_PODRESOURCES_KUBE_POD_LISTER_H_
#define MIGD_K8S_PODRESOURCES_KUBE_POD_LISTER_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "k8s/apiserver/kube_client.h"
#include "k8s/podresources/owner_sources.h"

namespace migd::k8s {

// One PodList item -> HamiNodePod (exposed for tests).
StatusOr<HamiNodePod> HamiNodePodFromJson(const nlohmann::json& pod);

class KubeHamiPodLister final : public HamiPodLister {
 public:
  // REQUIRES: `client` outlives this object.
  KubeHamiPodLister(KubeClient& client, std::string node_name)
      : client_(client), node_name_(std::move(node_name)) {}
  StatusOr<std::vector<HamiNodePod>> ListNodePods() override;

 private:
  KubeClient& client_;
  const std::string node_name_;
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_PODRESOURCES_KUBE_POD_LISTER_H_
