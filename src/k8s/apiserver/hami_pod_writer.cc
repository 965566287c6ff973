#include "k8s/apiserver/hami_pod_writer.h"

#include <absl/strings/str_cat.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "base/logging.h"
#include "base/status_macros.h"
#include "k8s/apiserver/hami_annotations.h"
#include "k8s/apiserver/node_lock.h"
#include "k8s/apiserver/pod_devices.h"

namespace migd::k8s {

HamiPodWriter::HamiPodWriter(KubeClient* client, std::string node_name, int attempts)
    : client_(client), node_name_(std::move(node_name)), attempts_(std::max(1, attempts)) {}

StatusOr<PodObject> HamiPodWriter::Reread(const PodObject& pod) const {
  MIGD_ASSIGN_OR_RETURN(nlohmann::json obj, client_->GetPod(pod.meta.ns, pod.meta.name));
  MIGD_ASSIGN_OR_RETURN(PodObject now, ParsePodObject(obj, "pod " + pod.Key()));
  if (now.meta.uid != pod.meta.uid) {
    return AbortedError(absl::StrCat("pod ", pod.Key(), " was replaced while allocating (uid ",
                                     pod.meta.uid, " -> ", now.meta.uid, ")"));
  }
  return now;
}

StatusOr<bool> HamiPodWriter::WriteIdentity(
    const PodObject& first, int container_index,
    const std::vector<hami::RuntimeIdentity>& identities) const {
  PodObject pod = first;
  Status last = OkStatus();
  for (int attempt = 0; attempt < attempts_; ++attempt) {
    if (attempt > 0) {
      MIGD_ASSIGN_OR_RETURN(pod, Reread(first));
    }
    MIGD_ASSIGN_OR_RETURN(
        std::string allocations,
        hami::SetRuntimeIdentity(pod.meta.Annotation(hami::kMigAllocations).value_or(""),
                                 container_index, identities));
    MIGD_ASSIGN_OR_RETURN(
        hami::PodDevices devices,
        hami::DecodePodDevices(pod.meta.Annotation(hami::kDevicesToAllocate).value_or("")));
    if (static_cast<size_t>(container_index) < devices.size()) devices[container_index].clear();
    nlohmann::json patch;
    patch["metadata"]["resourceVersion"] = pod.meta.resource_version;
    patch["metadata"]["annotations"][hami::kMigAllocations] = allocations;
    patch["metadata"]["annotations"][hami::kDevicesToAllocate] = hami::EncodePodDevices(devices);
    last = client_->PatchPod(pod.meta.ns, pod.meta.name, patch).status();
    if (last.ok()) return !hami::NextContainer(devices).has_value();
    if (last.code() != StatusCode::kAborted) return last;
    spdlog::info("pod annotation patch conflict, re-reading{}",
                 Fields().Add("pod", pod.Key()).Add("attempt", attempt + 1));
  }
  return last.WithContext(absl::StrCat("gave up after ", attempts_, " conflicting patches"));
}

Status HamiPodWriter::FinishBind(const PodObject& pod, const char* phase) const {
  nlohmann::json patch;
  patch["metadata"]["annotations"][hami::kBindPhase] = phase;
  const Status patched = client_->PatchPod(pod.meta.ns, pod.meta.name, patch).status();
  // The lock is released even when the phase could not be set (HAMi issue
  // #2305: a lock left behind blocks the node until it expires).
  const Status released = ReleaseNodeLock(pod);
  return patched.ok() ? released : patched;
}

Status HamiPodWriter::ReleaseNodeLock(const PodObject& pod) const {
  Status last = OkStatus();
  for (int attempt = 0; attempt < attempts_; ++attempt) {
    MIGD_ASSIGN_OR_RETURN(nlohmann::json node, client_->GetNode(node_name_));
    MIGD_ASSIGN_OR_RETURN(ObjectMeta meta, ReadObjectMeta(JsonReader(node, "node " + node_name_)));
    const std::optional<std::string> value = meta.Annotation(hami::kNodeLock);
    if (!value) return OkStatus();
    StatusOr<NodeLock> lock = ParseNodeLock(*value);
    // A lock of another pod (or one we cannot read) is not ours to release.
    if (!lock.ok() || lock->ns != pod.meta.ns || lock->name != pod.meta.name) {
      spdlog::info("node lock held by another pod, kept{}", Fields().Add("lock", *value));
      return OkStatus();
    }
    nlohmann::json patch;
    patch["metadata"]["resourceVersion"] = meta.resource_version;
    patch["metadata"]["annotations"][hami::kNodeLock] = nullptr;
    last = client_->PatchNode(node_name_, patch).status();
    if (last.code() != StatusCode::kAborted) return last;
  }
  return last;
}

}  // namespace migd::k8s
