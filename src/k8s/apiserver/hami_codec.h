// File: k8s/apiserver/hami_codec.h
//
// HAMi's scheduler protocol, as data (reference/hami.md §2, §4, §5): the
// annotation keys, the MIG reservation JSON (hami.io/vgpu-mig-allocations),
// the per-container device list (hami.io/vgpu-devices-to-allocate) and the
// node capability annotation (hami.io/node-nvidia-register). Formats are
// HAMi v2.10's, byte for byte where HAMi's encoder fixes them (field order
// of the MIG allocation JSON, the `UUID,Type,Usedmem,Usedcores:` / `;`
// device encoding).
//
// Thread-safety: pure functions.
#ifndef MIGD_K8S_APISERVER_HAMI_CODEC_H_
#define MIGD_K8S_APISERVER_HAMI_CODEC_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/instance_view.h"
#include "mig/placement.h"

namespace migd::k8s::hami {

inline constexpr char kMigAllocations[] = "hami.io/vgpu-mig-allocations";
inline constexpr char kDevicesToAllocate[] = "hami.io/vgpu-devices-to-allocate";
inline constexpr char kDevicesAllocated[] = "hami.io/vgpu-devices-allocated";
inline constexpr char kBindPhase[] = "hami.io/bind-phase";
inline constexpr char kBindTime[] = "hami.io/bind-time";
inline constexpr char kVgpuNode[] = "hami.io/vgpu-node";
inline constexpr char kNodeLock[] = "hami.io/mutex.lock";
inline constexpr char kNodeRegister[] = "hami.io/node-nvidia-register";
inline constexpr char kNodeHandshake[] = "hami.io/node-handshake";
inline constexpr char kBindPhaseAllocating[] = "allocating";
inline constexpr char kBindPhaseSuccess[] = "success";
inline constexpr char kBindPhaseFailed[] = "failed";

// One reserved MIG instance of one container.
struct MigAllocation {
  int container_index = 0;  // init containers first, then regular ones
  int device_index = 0;     // order of the container's instances
  std::string gpu_uuid;     // physical "GPU-..."
  std::string profile;      // e.g. "2g.10gb"
  mig::Placement placement;
  // Runtime identity, written back by the node once realised. All three or
  // none.
  std::optional<std::string> mig_uuid;
  std::optional<uint32_t> gpu_instance_id;
  std::optional<uint32_t> compute_instance_id;

  bool RuntimeReady() const {
    return mig_uuid.has_value() && gpu_instance_id.has_value() && compute_instance_id.has_value();
  }
  friend bool operator==(const MigAllocation&, const MigAllocation&) = default;
};

// Decodes the JSON array. An empty string decodes to an empty list.
// kInvalidArgument (naming the element) as DecodeMigAllocations in HAMi:
// not a JSON array, missing gpuUUID or profile, placement.size == 0, a
// partial runtime identity, a duplicate (containerIndex, deviceIndex).
StatusOr<std::vector<MigAllocation>> DecodeMigAllocations(std::string_view text);
// Field order as HAMi's Go struct: containerIndex, deviceIndex, gpuUUID,
// profile, placement{start,size}, then migUUID, gpuInstanceID,
// computeInstanceID when present (zero ids kept).
std::string EncodeMigAllocations(const std::vector<MigAllocation>& allocations);

// One device of one container in vgpu-devices-to-allocate.
struct ContainerDevice {
  std::string uuid;
  std::string type;
  int64_t used_mem = 0;
  int64_t used_cores = 0;
  friend bool operator==(const ContainerDevice&, const ContainerDevice&) = default;
};
// Per container (init first), possibly empty (no devices, or already
// allocated and erased).
using PodDevices = std::vector<std::vector<ContainerDevice>>;

// "UUID,Type,Usedmem,Usedcores:" per device, ";" after each container.
// kInvalidArgument for a device with fewer than four fields or a
// non-numeric memory/cores value.
StatusOr<PodDevices> DecodePodDevices(std::string_view text);
std::string EncodePodDevices(const PodDevices& devices);

// The hami.io/node-nvidia-register value: a JSON array of HAMi DeviceInfo
// for every GPU with a placement table (MIG enabled): id, index, count (max
// instance count over the published profiles), devmem, devcore 100, type
// "NVIDIA-<name>", numa, mode "mig", health, migProfiles [{name, memoryMB,
// core = ceil(SM*100/fullSM), sliceCount, placements [{start,size}]}].
// Published profiles: base variants only (HAMi cannot name +me/REV ones),
// restricted to `allowlist` when it is non-empty.
nlohmann::ordered_json NodeRegisterValue(const std::vector<engine::GpuView>& gpus,
                                         const std::set<std::string>& allowlist);

// HAMi's handshake value, "Reported <YYYY-MM-DD HH:MM:SS>" (UTC).
std::string HandshakeValue(std::time_t now);

// A pod that holds its devices: not being deleted and not Succeeded/Failed
// (HAMi's reconciler's notion of active).
bool PodIsActive(const nlohmann::json& pod);

// A string annotation of a Pod/Node object; nullopt if absent.
std::optional<std::string> Annotation(const nlohmann::json& object, const std::string& key);

}  // namespace migd::k8s::hami

#endif  // MIGD_K8S_APISERVER_HAMI_CODEC_H_
