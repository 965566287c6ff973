#include "k8s/apiserver/bound_pod.h"

#include <absl/strings/str_cat.h>

#include <utility>

#include "base/status_macros.h"
#include "k8s/apiserver/hami_annotations.h"

namespace migd::k8s {
namespace {

// Every refusal of the selection step: nothing was decided, kubelet retries.
Status NoBoundPod(const std::string& node, const std::string& why) {
  return UnavailableError(absl::StrCat(
      "no pod is being bound to node ", node, " by HAMi's scheduler: ", why,
      " (migd serves only the pod named by the node lock ", hami::kNodeLock,
      ", which HAMi's scheduler sets in Bind; a pod that bypassed the scheduler gets nothing)"));
}

std::string Seconds(Clock::Duration d) {
  return absl::StrCat(std::chrono::duration_cast<std::chrono::seconds>(d).count(), " s");
}

}  // namespace

BoundPodFinder::BoundPodFinder(KubeClient* client, const Clock* clock, BoundPodOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {}

StatusOr<NodeLock> BoundPodFinder::ReadLock() const {
  const std::string& node = options_.node_name;
  StatusOr<nlohmann::json> obj = client_->GetNode(node);
  if (!obj.ok())
    return NoBoundPod(node,
                      absl::StrCat("cannot read the node: ", std::string(obj.status().message())));
  StatusOr<ObjectMeta> meta = ReadObjectMeta(JsonReader(*obj, "node " + node));
  if (!meta.ok()) return NoBoundPod(node, std::string(meta.status().message()));
  const std::optional<std::string> value = meta->Annotation(hami::kNodeLock);
  if (!value) return NoBoundPod(node, absl::StrCat("the node has no ", hami::kNodeLock));
  StatusOr<NodeLock> lock = ParseNodeLock(*value);
  if (!lock.ok()) return NoBoundPod(node, std::string(lock.status().message()));
  if (lock->ns.empty() || lock->name.empty()) {
    return NoBoundPod(node, absl::StrCat("the node lock \"", *value, "\" names no pod"));
  }
  const Clock::TimePoint now = clock_->Now();
  if (NodeLockExpired(*lock, now, options_.lock_expiry)) {
    return NoBoundPod(node,
                      absl::StrCat("the node lock \"", *value, "\" is ", Seconds(now - lock->taken),
                                   " old, older than HAMi's "
                                   "node-lock expiry of ",
                                   Seconds(options_.lock_expiry),
                                   " (kubernetes.nodeLockExpiry; HAMi's "
                                   "scheduler.nodeLockExpire)"));
  }
  return lock;
}

Status BoundPodFinder::Confirm(const PodObject& pod) const {
  auto refuse = [&](const std::string& key, const std::string& why) {
    return FailedPreconditionError(absl::StrCat(
        "pod ", pod.Key(), " named by the node lock: annotation ", key, " ", why,
        "; HAMi's scheduler writes it in Filter and Bind, so the pod was not scheduled by it or "
        "was changed afterwards; nothing was allocated"));
  };
  const std::optional<std::string> vnode = pod.meta.Annotation(hami::kVgpuNode);
  if (vnode != options_.node_name) {
    return refuse(hami::kVgpuNode, absl::StrCat("is \"", vnode.value_or(""), "\", not this node ",
                                                options_.node_name));
  }
  const std::optional<std::string> phase = pod.meta.Annotation(hami::kBindPhase);
  if (phase != hami::kBindPhaseAllocating && phase != hami::kBindPhaseSuccess) {
    return refuse(hami::kBindPhase,
                  absl::StrCat("is \"", phase.value_or(""), "\", not allocating or success"));
  }
  if (!pod.meta.Annotation(hami::kBindTime)) return refuse(hami::kBindTime, "is missing");
  return OkStatus();
}

StatusOr<PodObject> BoundPodFinder::Find() const {
  const std::string& node = options_.node_name;
  MIGD_ASSIGN_OR_RETURN(NodeLock lock, ReadLock());
  const std::string key = lock.ns + "/" + lock.name;
  StatusOr<nlohmann::json> obj = client_->GetPod(lock.ns, lock.name);
  if (!obj.ok()) {
    return NoBoundPod(
        node,
        obj.status().code() == StatusCode::kNotFound
            ? absl::StrCat("the node lock names pod ", key, ", which does not exist")
            : absl::StrCat("cannot read pod ", key, ": ", std::string(obj.status().message())));
  }
  StatusOr<PodObject> pod = ParsePodObject(*obj, "pod " + key);
  if (!pod.ok()) return NoBoundPod(node, std::string(pod.status().message()));
  if (pod->node_name != node) {
    return NoBoundPod(node, absl::StrCat("the node lock names pod ", key, ", which is bound to \"",
                                         pod->node_name, "\", not this node"));
  }
  if (pod->meta.deleting) {
    return NoBoundPod(node,
                      absl::StrCat("the node lock names pod ", key, ", which is being deleted"));
  }
  if (pod->phase != "Pending") {
    return NoBoundPod(
        node, absl::StrCat("the node lock names pod ", key, ", which is ",
                           pod->phase.empty() ? "without a phase" : pod->phase, ", not Pending"));
  }
  MIGD_RETURN_IF_ERROR(Confirm(*pod));
  return pod;
}

}  // namespace migd::k8s
