// File: k8s/apiserver/hami_annotations.h
//
// The annotation keys and values of HAMi's scheduler protocol that migd
// reads or writes (HAMi pkg/util/types.go, pkg/device/nvidia/device.go,
// pkg/device/nvidia/mig_allocations.go, pkg/util/nodelock/nodelock.go).
// Who writes each one, and what migd believes of it, is the trust boundary
// in docs/security.md.
#ifndef MIGD_K8S_APISERVER_HAMI_ANNOTATIONS_H_
#define MIGD_K8S_APISERVER_HAMI_ANNOTATIONS_H_

namespace migd::k8s::hami {

// Pod annotations.
inline constexpr char kMigAllocations[] = "hami.io/vgpu-mig-allocations";
inline constexpr char kDevicesToAllocate[] = "hami.io/vgpu-devices-to-allocate";
inline constexpr char kDevicesAllocated[] = "hami.io/vgpu-devices-allocated";
inline constexpr char kBindPhase[] = "hami.io/bind-phase";
inline constexpr char kBindTime[] = "hami.io/bind-time";
inline constexpr char kVgpuNode[] = "hami.io/vgpu-node";
inline constexpr char kVgpuTime[] = "hami.io/vgpu-time";
inline constexpr char kBindPhaseAllocating[] = "allocating";
inline constexpr char kBindPhaseSuccess[] = "success";
inline constexpr char kBindPhaseFailed[] = "failed";

// Node annotations.
inline constexpr char kNodeLock[] = "hami.io/mutex.lock";
inline constexpr char kNodeRegister[] = "hami.io/node-nvidia-register";

}  // namespace migd::k8s::hami

#endif  // MIGD_K8S_APISERVER_HAMI_ANNOTATIONS_H_
