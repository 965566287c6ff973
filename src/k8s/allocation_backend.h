// File: k8s/allocation_backend.h
//
// AllocationBackend: what the kubelet device plugin (k8s/deviceplugin) asks
// of the mode that decides which MIG instances a container gets. The plugin
// owns the kubelet protocol (sockets, registration, ListAndWatch streams);
// the backend owns the meaning of device ids and the allocation itself.
// The HAMi backend (k8s/apiserver) advertises HAMi's placeholder replicas
// `<GPU-UUID>-<i>` and realises the reservation HAMi's scheduler wrote on the
// pod being bound.
//
// Thread-safety: implementations must be thread-safe; the plugin calls them
// from gRPC handler threads, one container per Allocate.
#ifndef MIGD_K8S_ALLOCATION_BACKEND_H_
#define MIGD_K8S_ALLOCATION_BACKEND_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "cdi/publisher.h"

namespace migd::k8s {

// One advertised device (v1beta1 Device): a stable id and its health.
struct AdvertisedDevice {
  std::string id;
  bool healthy = true;
  std::optional<int64_t> numa_node;  // TopologyInfo, when known
  friend bool operator==(const AdvertisedDevice&, const AdvertisedDevice&) = default;
};

// What one container gets (ContainerAllocateResponse).
struct ContainerAllocation {
  std::vector<MigUuid> mig_uuids;                      // in device order
  std::vector<std::string> cdi_devices;                // fully qualified CDI names
  std::vector<std::pair<std::string, std::string>> envs;
  std::vector<cdi::LegacyDeviceNode> device_nodes;
  std::vector<std::pair<std::string, std::string>> annotations;  // usually empty
};

class AllocationBackend {
 public:
  virtual ~AllocationBackend() = default;
  // The full device list (ListAndWatch sends it whole every time). Stable ids
  // across restarts for the same hardware.
  virtual std::vector<AdvertisedDevice> Devices() = 0;
  // Allocate for one container: `device_ids` are the ids kubelet picked.
  // Errors fail the container's start (kubelet retries); they must name the
  // pod/device and the fix.
  virtual StatusOr<ContainerAllocation> AllocateContainer(
      const std::vector<std::string>& device_ids) = 0;
  // GetPreferredAllocation: `size` ids out of `available`, all of
  // `must_include` among them. The default picks must_include, then the
  // available ids in order.
  virtual StatusOr<std::vector<std::string>> PreferredAllocation(
      const std::vector<std::string>& available, const std::vector<std::string>& must_include,
      int size);
  // Called whenever the backend's device list changed; the plugin then sends
  // a new ListAndWatch response. Set once by the plugin before serving.
  void SetDevicesChangedCallback(std::function<void()> callback) {
    devices_changed_ = std::move(callback);
  }

 protected:
  void NotifyDevicesChanged() {
    if (devices_changed_) devices_changed_();
  }

 private:
  std::function<void()> devices_changed_;
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_ALLOCATION_BACKEND_H_
