// File: k8s/apiserver/pod_devices.h
//
// hami.io/vgpu-devices-to-allocate (and -allocated): the devices HAMi's
// scheduler chose per container, "UUID,Type,Usedmem,Usedcores:" per device,
// ";" after each container, init containers first (HAMi
// pkg/device/devices.go EncodePodSingleDevice). In MIG mode the UUID is the
// physical GPU's. The device plugin erases a container's entry once it is
// allocated.
//
// Thread-safety: pure functions.
#ifndef MIGD_K8S_APISERVER_POD_DEVICES_H_
#define MIGD_K8S_APISERVER_POD_DEVICES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace migd::k8s::hami {

struct ContainerDevice {
  std::string uuid;
  std::string type;
  int64_t used_mem = 0;
  int64_t used_cores = 0;
  friend bool operator==(const ContainerDevice&, const ContainerDevice&) = default;
};
// Per container (init first), possibly empty (no devices, or erased).
using PodDevices = std::vector<std::vector<ContainerDevice>>;

// kInvalidArgument for a device with fewer than four fields or a memory or
// cores value that is not an integer.
StatusOr<PodDevices> DecodePodDevices(std::string_view text);
std::string EncodePodDevices(const PodDevices& devices);

// The first container with devices left (HAMi popNextContainerDevices).
std::optional<int> NextContainer(const PodDevices& devices);

}  // namespace migd::k8s::hami

#endif  // MIGD_K8S_APISERVER_POD_DEVICES_H_
