#include "k8s/podresources/kube_pod_lister.h"

#include <absl/strings/str_cat.h>

#include <utility>

#include "base/status_macros.h"
#include "k8s/apiserver/mig_allocations.h"
#include "k8s/apiserver/pod_object.h"

namespace migd::k8s {
namespace {

constexpr char kListSource[] = "API server pod list";

HamiMigReservation ToReservation(const hami::MigAllocation& a) {
  HamiMigReservation r;
  r.container_index = a.container_index;
  r.device_index = a.device_index;
  r.gpu_uuid = GpuUuid(a.gpu_uuid);
  r.profile = a.profile;
  r.placement = a.placement;
  if (a.mig_uuid) r.mig_uuid = MigUuid(*a.mig_uuid);
  if (a.gpu_instance_id) r.gi_id = NvmlGiId(*a.gpu_instance_id);
  if (a.compute_instance_id) r.ci_id = NvmlCiId(*a.compute_instance_id);
  return r;
}

StatusOr<HamiNodePod> FromPodObject(const PodObject& pod) {
  HamiNodePod out;
  out.pod_namespace = pod.meta.ns;
  out.pod_name = pod.meta.name;
  out.uid = PodUid(pod.meta.uid);
  out.deleting = pod.meta.deleting;
  out.phase = pod.phase;
  for (const PodContainer& c : pod.containers) out.containers.push_back(c.name);
  const std::optional<std::string> text = pod.meta.Annotation(hami::kMigAllocations);
  if (!text) return out;
  StatusOr<std::vector<hami::MigAllocation>> allocs = hami::DecodeMigAllocations(
      *text, absl::StrCat("pod ", pod.Key(), ": ", hami::kMigAllocations));
  if (!allocs.ok()) return DataLossError(allocs.status().message());
  for (const hami::MigAllocation& a : *allocs) out.reservations.push_back(ToReservation(a));
  return out;
}

}  // namespace

StatusOr<HamiNodePod> HamiNodePodFromJson(const nlohmann::json& pod) {
  MIGD_ASSIGN_OR_RETURN(PodObject p, ParsePodObject(pod, kListSource, StatusCode::kDataLoss));
  return FromPodObject(p);
}

StatusOr<std::vector<HamiNodePod>> KubeHamiPodLister::ListNodePods() {
  MIGD_ASSIGN_OR_RETURN(nlohmann::json list, client_.ListPods(node_name_));
  MIGD_ASSIGN_OR_RETURN(std::vector<PodObject> pods,
                        ParsePodList(list, absl::StrCat(kListSource, " of node ", node_name_),
                                     StatusCode::kDataLoss));
  std::vector<HamiNodePod> out;
  for (const PodObject& p : pods) {
    MIGD_ASSIGN_OR_RETURN(HamiNodePod pod, FromPodObject(p));
    out.push_back(std::move(pod));
  }
  return out;
}

}  // namespace migd::k8s
