// File: k8s/apiserver/hami_pod_writer.h
//
// HamiPodWriter: every write HAMi mode makes to the pod it serves and to
// its node, as HAMi's device plugin makes them (plugin/server.go Allocate,
// annotateMigRuntimeInfo, patchErasedAnnotation, plugin/util.go
// PodAllocationTrySuccess / PodAllocationFailed, nodelock ReleaseNodeLock):
//   WriteIdentity  one JSON merge patch guarded by metadata.resourceVersion
//                  that sets migUUID, gpuInstanceID and computeInstanceID on
//                  the container's hami.io/vgpu-mig-allocations entries
//                  (other members kept) and erases the container from
//                  hami.io/vgpu-devices-to-allocate; a 409 re-reads the pod
//                  (same uid required) and re-applies, at most `attempts`
//                  times. Returns whether no container is left;
//   FinishBind     hami.io/bind-phase=<phase> (no resourceVersion: the phase
//                  is the node's to set), then ReleaseNodeLock;
//   ReleaseNodeLock removes hami.io/mutex.lock only while it names this pod
//                  (HAMi's owner check), guarded by the node's
//                  resourceVersion, re-read on conflict.
// Only the pod the node lock named is ever passed in: migd never writes the
// annotations of a pod it did not serve.
//
// Thread-safety: thread-safe (no state besides the thread-safe client).
#ifndef MIGD_K8S_APISERVER_HAMI_POD_WRITER_H_
#define MIGD_K8S_APISERVER_HAMI_POD_WRITER_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "k8s/apiserver/kube_client.h"
#include "k8s/apiserver/mig_allocations.h"
#include "k8s/apiserver/pod_object.h"

namespace migd::k8s {

class HamiPodWriter {
 public:
  // `client` is not owned and must outlive the writer.
  HamiPodWriter(KubeClient* client, std::string node_name, int attempts);

  StatusOr<bool> WriteIdentity(const PodObject& pod, int container_index,
                               const std::vector<hami::RuntimeIdentity>& identities) const;
  Status FinishBind(const PodObject& pod, const char* phase) const;
  Status ReleaseNodeLock(const PodObject& pod) const;

 private:
  StatusOr<PodObject> Reread(const PodObject& pod) const;

  KubeClient* const client_;
  const std::string node_name_;
  const int attempts_;
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_APISERVER_HAMI_POD_WRITER_H_
