// File: k8s/apiserver/container_plan.h
//
// PlanContainer: the cross-checks between what kubelet asked (Allocate's
// device ids), what migd knows (this node's GPUs, its own allocations) and
// what the bound pod says (HAMi's reservation), before any hardware is
// touched or any object patched. The pod is the one the node lock names
// (bound_pod.h); its annotations can still have been edited by whoever may
// patch it, so every field they contribute is checked:
//   - the container: the first container of
//     hami.io/vgpu-devices-to-allocate with devices left must be the one
//     kubelet is admitting: kubelet admits containers in order (init
//     containers first) and calls Allocate for each whose resources.limits
//     name `resource_name`, so it is the first such container migd has not
//     served yet;
//   - the count: kubelet's device ids, the container's limit, its device
//     list and its reservation entries agree;
//   - kubelet's ids are placeholders migd advertises ("<GPU-UUID>-<i>",
//     i < device_split_count, on a MIG GPU of this node), and name the same
//     GPUs, as a multiset, as the reservation (migd's GetPreferredAllocation
//     steers kubelet to them);
//   - each reservation entry's gpuUUID is that device's, a GPU of this node;
//     its profile is a profile of that GPU in the allowlist, its placement
//     one of the profile's.
// Refusals name the field: kInvalidArgument for a malformed value,
// kFailedPrecondition for a disagreement.
//
// Thread-safety: pure function.
#ifndef MIGD_K8S_APISERVER_CONTAINER_PLAN_H_
#define MIGD_K8S_APISERVER_CONTAINER_PLAN_H_

#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/instance_view.h"
#include "engine/manager.h"
#include "k8s/apiserver/mig_allocations.h"
#include "k8s/apiserver/pod_object.h"

namespace migd::k8s {

struct PlanInput {
  const PodObject* pod = nullptr;           // required
  std::vector<std::string> device_ids;      // kubelet's Allocate request
  std::vector<engine::GpuView> gpus;        // this node's GPUs
  int device_split_count = 10;              // replicas advertised per GPU
  std::set<std::string> profile_allowlist;  // empty = every profile
  std::string resource_name;                // e.g. "nvidia.com/gpu"
  std::set<int> served;                     // container indices migd has allocated for this pod
};

struct ContainerPlan {
  int container_index = 0;
  std::string container_name;
  std::vector<hami::MigAllocation> reservations;  // deviceIndex order
  std::vector<engine::InstanceSpec> instances;    // the same order
};

StatusOr<ContainerPlan> PlanContainer(const PlanInput& in);

}  // namespace migd::k8s

#endif  // MIGD_K8S_APISERVER_CONTAINER_PLAN_H_
