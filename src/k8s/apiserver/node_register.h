// File: k8s/apiserver/node_register.h
//
// hami.io/node-nvidia-register, the node's device list HAMi's scheduler
// schedules against: a JSON array of HAMi's DeviceInfo (pkg/device/devices.go)
// as its device plugin builds it in MIG mode (plugin/register.go,
// getAPIDevices and discoverMigProfiles, v2.10.0):
//   id, index, count (max InstanceCount over the published profiles),
//   devmem (MiB), devcore 100, type (the NVML name, "NVIDIA-" prepended only
//   when it does not start with "NVIDIA"), numa, mode "mig", health,
//   migProfiles [{name, memoryMB, core = ceil(SM*100/fullSM), sliceCount,
//   placements [{start, size}]}].
// Go's `omitempty` drops zero index and numa; the scheduler decodes either.
// A GPU without MIG or without a published profile is not listed. health is
// false for a GPU the health monitor marked unhealthy (GpuView::unhealthy).
// Published profiles: base variants only (HAMi names no +me/REV profile),
// restricted to `allowlist` (names or aliases) when it is not empty.
//
// Thread-safety: pure function.
#ifndef MIGD_K8S_APISERVER_NODE_REGISTER_H_
#define MIGD_K8S_APISERVER_NODE_REGISTER_H_

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "engine/instance_view.h"

namespace migd::k8s::hami {

nlohmann::ordered_json NodeRegisterValue(const std::vector<engine::GpuView>& gpus,
                                         const std::set<std::string>& allowlist);

// HAMi's DeviceInfo.type for an NVML name.
std::string DeviceType(const std::string& nvml_name);

}  // namespace migd::k8s::hami

#endif  // MIGD_K8S_APISERVER_NODE_REGISTER_H_
