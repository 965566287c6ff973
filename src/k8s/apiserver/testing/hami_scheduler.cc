#include "k8s/apiserver/testing/hami_scheduler.h"

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "k8s/apiserver/hami_annotations.h"
#include "k8s/apiserver/mig_allocations.h"
#include "k8s/apiserver/node_lock.h"
#include "k8s/apiserver/pod_devices.h"

namespace migd::k8s::testing {

FakeHamiScheduler::FakeHamiScheduler(FakeApiServer* api, const Clock* clock, std::string node,
                                     std::string resource)
    : api_(api), clock_(clock), node_(std::move(node)), resource_(std::move(resource)) {}

std::map<std::string, std::string> FakeHamiScheduler::FilterAnnotations(
    const PodSpec& pod, const std::vector<HamiReservation>& reservations) const {
  std::vector<hami::MigAllocation> allocs;
  hami::PodDevices devices(pod.init_containers.size() + pod.containers.size());
  std::map<int, int> next_device;
  for (const HamiReservation& r : reservations) {
    hami::MigAllocation a;
    a.container_index = r.container_index;
    a.device_index = next_device[r.container_index]++;
    a.gpu_uuid = r.gpu_uuid;
    a.profile = r.profile;
    a.placement = r.placement;
    allocs.push_back(std::move(a));
    devices.at(r.container_index).push_back({r.gpu_uuid, "NVIDIA", r.used_mem, r.used_cores});
  }
  return {{hami::kMigAllocations, hami::EncodeMigAllocations(allocs)},
          {hami::kDevicesToAllocate, hami::EncodePodDevices(devices)},
          {hami::kDevicesAllocated, hami::EncodePodDevices(devices)},
          {hami::kVgpuNode, node_},
          {hami::kVgpuTime, absl::StrCat(ToUnixSeconds(clock_->Now()))},
          {"nvidia.com/vgpu-mode", "mig"}};
}

std::string FakeHamiScheduler::LockValue(const std::string& ns, const std::string& name,
                                         Clock::Duration age) const {
  return FormatNodeLock(clock_->Now() - age, ns, name);
}

void FakeHamiScheduler::SetNodeLock(const std::string& value) {
  ASSERT_TRUE(api_->UpdateNode(node_, [&](nlohmann::json& n) {
    if (value.empty()) {
      n["metadata"]["annotations"].erase(hami::kNodeLock);
    } else {
      n["metadata"]["annotations"][hami::kNodeLock] = value;
    }
  }));
}

void FakeHamiScheduler::Schedule(PodSpec pod, const std::vector<HamiReservation>& reservations) {
  // Filter: the reservation and the devices on the pod, still unbound.
  pod.node.clear();
  std::vector<std::string> names = pod.init_containers;
  names.insert(names.end(), pod.containers.begin(), pod.containers.end());
  std::map<int, int> per_container;
  for (const HamiReservation& r : reservations) ++per_container[r.container_index];
  for (const auto& [index, n] : per_container) {
    pod.limits[names.at(index)][resource_] = absl::StrCat(n);
  }
  for (auto& [k, v] : FilterAnnotations(pod, reservations)) pod.annotations[k] = v;
  api_->AddPod(MakePod(pod));
  // Bind: lock the node (LockNode refuses a held lock), annotate, bind.
  ASSERT_FALSE(api_->NodeAnnotation(node_, hami::kNodeLock).has_value())
      << "the node lock is held: HAMi's scheduler would not bind " << pod.name;
  SetNodeLock(LockValue(pod.ns, pod.name));
  ASSERT_TRUE(api_->UpdatePod(pod.ns, pod.name, [&](nlohmann::json& p) {
    p["metadata"]["annotations"][hami::kBindPhase] = hami::kBindPhaseAllocating;
    p["metadata"]["annotations"][hami::kBindTime] = absl::StrCat(ToUnixSeconds(clock_->Now()));
    p["spec"]["nodeName"] = node_;
  }));
}

}  // namespace migd::k8s::testing
