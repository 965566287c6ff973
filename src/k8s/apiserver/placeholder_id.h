// File: k8s/apiserver/placeholder_id.h
//
// The device ids migd advertises to kubelet in HAMi mode: HAMi's placeholder
// replicas "<GPU-UUID>-<i>", i < deviceSplitCount, per MIG GPU (HAMi
// plugin/rm/devices.go GetPluginDevices: fmt.Sprintf("%v-%v", dev.ID, i)).
// They only let kubelet count; which GPU a container's ids name is checked
// against the scheduler's reservation (container_plan.h).
//
// Thread-safety: pure functions.
#ifndef MIGD_K8S_APISERVER_PLACEHOLDER_ID_H_
#define MIGD_K8S_APISERVER_PLACEHOLDER_ID_H_

#include <optional>
#include <string>
#include <string_view>

namespace migd::k8s {

std::string PlaceholderId(std::string_view gpu_uuid, int replica);

struct Placeholder {
  std::string gpu_uuid;
  int replica = 0;
};

// Splits "<gpu>-<digits>" at the last '-'; nullopt when the suffix is not a
// decimal number below 2^31 or the GPU part is empty. Whether the GPU is one
// of this node's is the caller's check.
std::optional<Placeholder> ParsePlaceholderId(std::string_view id);

}  // namespace migd::k8s

#endif  // MIGD_K8S_APISERVER_PLACEHOLDER_ID_H_
