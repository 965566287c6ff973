#include "k8s/podresources/kube_pod_lister.h"

#include <utility>

#include "base/status_macros.h"
#include "k8s/apiserver/hami_codec.h"

namespace migd::k8s {
namespace {

std::string StringAt(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) return "";
  return obj[key].get<std::string>();
}

void AppendContainerNames(const nlohmann::json& spec, const char* key,
                          std::vector<std::string>* out) {
  if (!spec.is_object() || !spec.contains(key) || !spec[key].is_array()) return;
  for (const nlohmann::json& c : spec[key]) out->push_back(StringAt(c, "name"));
}

}  // namespace

StatusOr<HamiNodePod> HamiNodePodFromJson(const nlohmann::json& pod) {
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& meta =
      pod.is_object() && pod.contains("metadata") ? pod["metadata"] : empty;
  HamiNodePod out;
  out.pod_namespace = StringAt(meta, "namespace");
  out.pod_name = StringAt(meta, "name");
  const std::string uid = StringAt(meta, "uid");
  if (out.pod_namespace.empty() || out.pod_name.empty() || uid.empty()) {
    return DataLossError("API server pod list: an item lacks metadata.namespace, name or uid (" +
                         out.pod_namespace + "/" + out.pod_name + ")");
  }
  out.uid = PodUid(uid);
  out.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  if (pod.contains("status")) out.phase = StringAt(pod["status"], "phase");
  if (pod.contains("spec")) {
    AppendContainerNames(pod["spec"], "initContainers", &out.containers);
    AppendContainerNames(pod["spec"], "containers", &out.containers);
  }
  const std::optional<std::string> text = hami::Annotation(pod, hami::kMigAllocations);
  if (!text) return out;
  StatusOr<std::vector<hami::MigAllocation>> allocs = hami::DecodeMigAllocations(*text);
  if (!allocs.ok()) {
    return DataLossError("pod " + out.pod_namespace + "/" + out.pod_name + ": " +
                         hami::kMigAllocations + ": " + std::string(allocs.status().message()));
  }
  for (const hami::MigAllocation& a : *allocs) {
    HamiMigReservation r;
    r.container_index = a.container_index;
    r.device_index = a.device_index;
    r.gpu_uuid = GpuUuid(a.gpu_uuid);
    r.profile = a.profile;
    r.placement = a.placement;
    if (a.mig_uuid) r.mig_uuid = MigUuid(*a.mig_uuid);
    if (a.gpu_instance_id) r.gi_id = NvmlGiId(*a.gpu_instance_id);
    if (a.compute_instance_id) r.ci_id = NvmlCiId(*a.compute_instance_id);
    out.reservations.push_back(std::move(r));
  }
  return out;
}

StatusOr<std::vector<HamiNodePod>> KubeHamiPodLister::ListNodePods() {
  MIGD_ASSIGN_OR_RETURN(nlohmann::json list, client_.ListPods(node_name_));
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
    return DataLossError("API server: the pod list of node " + node_name_ + " has no items array");
  }
  std::vector<HamiNodePod> out;
  for (const nlohmann::json& item : list["items"]) {
    MIGD_ASSIGN_OR_RETURN(HamiNodePod pod, HamiNodePodFromJson(item));
    out.push_back(std::move(pod));
  }
  return out;
}

}  // namespace migd::k8s
