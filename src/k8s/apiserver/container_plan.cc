#include "k8s/apiserver/container_plan.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <map>
#include <utility>

#include "base/status_macros.h"
#include "k8s/apiserver/hami_annotations.h"
#include "k8s/apiserver/placeholder_id.h"
#include "k8s/apiserver/pod_devices.h"
#include "mig/catalog.h"

namespace migd::k8s {
namespace {

// The container kubelet is admitting: the first (init containers first)
// that requests the resource and that migd has not served.
StatusOr<int> AdmittedContainer(const PlanInput& in) {
  for (size_t i = 0; i < in.pod->containers.size(); ++i) {
    MIGD_ASSIGN_OR_RETURN(int64_t n, DeviceLimit(in.pod->containers[i], in.resource_name));
    if (n > 0 && in.served.count(static_cast<int>(i)) == 0) return static_cast<int>(i);
  }
  return FailedPreconditionError(absl::StrCat("pod ", in.pod->Key(),
                                              " has no container requesting ", in.resource_name,
                                              " that migd has not served"));
}

StatusOr<int> NextContainer(const PlanInput& in, const hami::PodDevices& devices) {
  const std::optional<int> next = hami::NextContainer(devices);
  if (!next) {
    return FailedPreconditionError(
        absl::StrCat(hami::kDevicesToAllocate, " has no container left to allocate"));
  }
  if (static_cast<size_t>(*next) >= in.pod->containers.size()) {
    return InvalidArgumentError(absl::StrCat(
        hami::kDevicesToAllocate, ": container index ", *next, " is out of range (the pod has ",
        in.pod->containers.size(), " containers, init containers included)"));
  }
  MIGD_ASSIGN_OR_RETURN(int admitted, AdmittedContainer(in));
  if (*next != admitted) {
    return FailedPreconditionError(absl::StrCat(
        hami::kDevicesToAllocate, ": the next container to allocate is ",
        in.pod->containers[*next].name, " (index ", *next, ") but kubelet is admitting ",
        in.pod->containers[admitted].name, " (index ", admitted,
        "), the first container "
        "requesting ",
        in.resource_name, " that migd has not served"));
  }
  return *next;
}

const engine::GpuView* FindGpu(const std::vector<engine::GpuView>& gpus, std::string_view uuid) {
  for (const engine::GpuView& g : gpus) {
    if (g.model != nullptr && g.info.uuid.value() == uuid) return &g;
  }
  return nullptr;
}

// The GPUs kubelet's ids name, sorted.
StatusOr<std::vector<std::string>> KubeletGpus(const PlanInput& in) {
  std::vector<std::string> out;
  for (const std::string& id : in.device_ids) {
    const std::optional<Placeholder> p = ParsePlaceholderId(id);
    if (!p || FindGpu(in.gpus, p->gpu_uuid) == nullptr || p->replica >= in.device_split_count) {
      return InvalidArgumentError(absl::StrCat("kubelet passed device id \"", id,
                                               "\", which migd does not advertise (it advertises "
                                               "<GPU-UUID>-<0..",
                                               in.device_split_count - 1,
                                               "> for each MIG GPU of this node)"));
    }
    out.push_back(p->gpu_uuid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status CheckCounts(const PlanInput& in, int index, size_t devices, size_t reservations) {
  MIGD_ASSIGN_OR_RETURN(int64_t limit, DeviceLimit(in.pod->containers[index], in.resource_name));
  const std::string& name = in.pod->containers[index].name;
  if (static_cast<size_t>(limit) != in.device_ids.size()) {
    return FailedPreconditionError(absl::StrCat("container ", name, " requests ", limit, " ",
                                                in.resource_name, " but kubelet passed ",
                                                in.device_ids.size(), " device ids"));
  }
  if (devices != in.device_ids.size() || reservations != in.device_ids.size()) {
    return FailedPreconditionError(absl::StrCat(
        "container ", name, " (index ", index, "): kubelet passed ", in.device_ids.size(),
        " device ids, ", hami::kDevicesToAllocate, " has ", devices, " devices and ",
        hami::kMigAllocations, " has ", reservations, " reservations; they must agree"));
  }
  return OkStatus();
}

std::string Field(const hami::MigAllocation& r, const char* member) {
  return absl::StrCat(hami::kMigAllocations, "[containerIndex ", r.container_index,
                      ", deviceIndex ", r.device_index, "].", member);
}

StatusOr<engine::InstanceSpec> CheckReservation(const PlanInput& in, const hami::MigAllocation& r,
                                                const hami::ContainerDevice& device) {
  if (r.gpu_uuid != device.uuid) {
    return FailedPreconditionError(absl::StrCat(Field(r, "gpuUUID"), " is ", r.gpu_uuid, " but ",
                                                hami::kDevicesToAllocate, " names ", device.uuid));
  }
  const engine::GpuView* gpu = FindGpu(in.gpus, r.gpu_uuid);
  if (gpu == nullptr) {
    return FailedPreconditionError(
        absl::StrCat(Field(r, "gpuUUID"), " ", r.gpu_uuid, " is not a MIG GPU of this node"));
  }
  const mig::GiProfile* profile = gpu->model->FindProfileByName(r.profile);
  if (profile == nullptr) {
    return FailedPreconditionError(absl::StrCat(Field(r, "profile"), " \"", r.profile,
                                                "\" is not a MIG profile of ", gpu->info.name));
  }
  if (!in.profile_allowlist.empty() && in.profile_allowlist.count(profile->name) == 0 &&
      in.profile_allowlist.count(r.profile) == 0) {
    return FailedPreconditionError(absl::StrCat(Field(r, "profile"), " \"", r.profile,
                                                "\" is not in migd's migProfileAllowlist (",
                                                absl::StrJoin(in.profile_allowlist, ", "), ")"));
  }
  if (!profile->HasPlacement(r.placement)) {
    return FailedPreconditionError(absl::StrCat(Field(r, "placement"), " ", r.placement.ToString(),
                                                " is not a placement of ", profile->name, " on ",
                                                gpu->info.name));
  }
  return engine::InstanceSpec{
      .profile = r.profile, .gpu = gpu->info.index, .placement = r.placement};
}

}  // namespace

StatusOr<ContainerPlan> PlanContainer(const PlanInput& in) {
  ContainerPlan plan;
  MIGD_ASSIGN_OR_RETURN(
      hami::PodDevices devices,
      hami::DecodePodDevices(in.pod->meta.Annotation(hami::kDevicesToAllocate).value_or("")));
  MIGD_ASSIGN_OR_RETURN(plan.container_index, NextContainer(in, devices));
  plan.container_name = in.pod->containers[plan.container_index].name;
  const std::vector<hami::ContainerDevice>& mine = devices[plan.container_index];
  MIGD_ASSIGN_OR_RETURN(
      std::vector<hami::MigAllocation> all,
      hami::DecodeMigAllocations(in.pod->meta.Annotation(hami::kMigAllocations).value_or(""),
                                 absl::StrCat("pod ", in.pod->Key(), " ", hami::kMigAllocations)));
  plan.reservations = hami::ContainerAllocations(all, plan.container_index);
  MIGD_RETURN_IF_ERROR(
      CheckCounts(in, plan.container_index, mine.size(), plan.reservations.size()));
  MIGD_ASSIGN_OR_RETURN(std::vector<std::string> kubelet_gpus, KubeletGpus(in));
  std::vector<std::string> reserved_gpus;
  for (const hami::MigAllocation& r : plan.reservations) reserved_gpus.push_back(r.gpu_uuid);
  std::sort(reserved_gpus.begin(), reserved_gpus.end());
  if (kubelet_gpus != reserved_gpus) {
    return FailedPreconditionError(absl::StrCat(
        hami::kMigAllocations, " reserves container ", plan.container_name, " on [",
        absl::StrJoin(reserved_gpus, ","), "] but kubelet's device ids [",
        absl::StrJoin(in.device_ids, ","), "] are on [", absl::StrJoin(kubelet_gpus, ","), "]"));
  }
  for (size_t i = 0; i < plan.reservations.size(); ++i) {
    MIGD_ASSIGN_OR_RETURN(engine::InstanceSpec spec,
                          CheckReservation(in, plan.reservations[i], mine[i]));
    plan.instances.push_back(std::move(spec));
  }
  return plan;
}

}  // namespace migd::k8s
