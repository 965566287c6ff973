// File: k8s/apiserver/bound_pod.h
//
// BoundPodFinder: which pod kubelet is admitting when it calls Allocate.
// kubelet's Allocate names no pod, so HAMi's device plugin asks the node
// lock (hami.io/mutex.lock, node_lock.h), which only HAMi's scheduler can
// write (`nodes` patch rights; HAMi issue #3076, fix PR #3095/#3126: no
// fallback to scanning pods by their own annotations). migd trusts nothing
// else for the choice:
//   1. GET the node; its lock must be present, parse, name a pod, and be no
//      older than `lock_expiry` (HAMi's NodeLockTimeout);
//   2. GET the pod it names; it must exist, be bound to this node
//      (spec.nodeName), not be deleting, and be Pending;
//   3. the pod's own annotations only confirm: hami.io/vgpu-node is this
//      node, hami.io/bind-phase is allocating or success, hami.io/bind-time
//      is set.
// Failures of 1 and 2 are kUnavailable (kubelet retries admission; nothing
// was decided), failures of 3 kFailedPrecondition; each message names what
// was missing and the fix.
//
// Thread-safety: thread-safe (the KubeClient is; no state of its own).
#ifndef MIGD_K8S_APISERVER_BOUND_POD_H_
#define MIGD_K8S_APISERVER_BOUND_POD_H_

#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "k8s/apiserver/kube_client.h"
#include "k8s/apiserver/node_lock.h"
#include "k8s/apiserver/pod_object.h"

namespace migd::k8s {

struct BoundPodOptions {
  std::string node_name;  // required
  Clock::Duration lock_expiry = kHamiNodeLockExpiry;
};

class BoundPodFinder {
 public:
  // `client` and `clock` are not owned and must outlive the finder.
  BoundPodFinder(KubeClient* client, const Clock* clock, BoundPodOptions options);

  StatusOr<PodObject> Find() const;

 private:
  StatusOr<NodeLock> ReadLock() const;
  Status Confirm(const PodObject& pod) const;

  KubeClient* const client_;
  const Clock* const clock_;
  const BoundPodOptions options_;
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_APISERVER_BOUND_POD_H_
