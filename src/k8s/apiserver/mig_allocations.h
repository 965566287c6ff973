// File: k8s/apiserver/mig_allocations.h
//
// hami.io/vgpu-mig-allocations, the MIG reservation HAMi's scheduler writes
// on a pod: a JSON array of MigAllocation (HAMi
// pkg/device/nvidia/mig_allocations.go, the same in v2.10.0 and every later
// copy read):
//   {"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-…","profile":"2g.10gb",
//    "placement":{"start":2,"size":2},
//    "migUUID":"MIG-…","gpuInstanceID":4,"computeInstanceID":0}
// The last three (the runtime identity) are written back by the node once
// the instance exists: all three or none, zero ids are values.
//
// Decoding refuses what HAMi's DecodeMigAllocations refuses (a negative
// index, no gpuUUID or profile, placement.size 0, a partial identity, a
// duplicate (containerIndex, deviceIndex)) plus a migUUID that does not
// start with "MIG-" or equals its gpuUUID (a parent GPU's identity read as
// the instance's). Unknown members are ignored, as Go's json.Unmarshal does,
// and kept by SetRuntimeIdentity.
//
// Thread-safety: pure functions.
#ifndef MIGD_K8S_APISERVER_MIG_ALLOCATIONS_H_
#define MIGD_K8S_APISERVER_MIG_ALLOCATIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "k8s/apiserver/hami_annotations.h"
#include "mig/placement.h"

namespace migd::k8s::hami {

// One reserved MIG instance of one container.
struct MigAllocation {
  int container_index = 0;  // init containers first, then regular ones
  int device_index = 0;     // order of the container's instances
  std::string gpu_uuid;     // physical "GPU-..."
  std::string profile;      // e.g. "2g.10gb"
  mig::Placement placement;
  std::optional<std::string> mig_uuid;
  std::optional<uint32_t> gpu_instance_id;
  std::optional<uint32_t> compute_instance_id;

  bool RuntimeReady() const {
    return mig_uuid.has_value() && gpu_instance_id.has_value() && compute_instance_id.has_value();
  }
  friend bool operator==(const MigAllocation&, const MigAllocation&) = default;
};

// Decodes the annotation value; "" decodes to an empty list. Errors are
// kInvalidArgument in JsonReader's style, e.g.
//   "hami.io/vgpu-mig-allocations: /1/placement/size: expected …".
StatusOr<std::vector<MigAllocation>> DecodeMigAllocations(
    std::string_view text, std::string_view source = kMigAllocations);

// Field order as HAMi's Go struct; the runtime identity when present.
std::string EncodeMigAllocations(const std::vector<MigAllocation>& allocations);

// The instances of one container in deviceIndex order.
std::vector<MigAllocation> ContainerAllocations(const std::vector<MigAllocation>& all,
                                                int container_index);

// The runtime identity of one realised instance.
struct RuntimeIdentity {
  std::string mig_uuid;
  uint32_t gpu_instance_id = 0;
  uint32_t compute_instance_id = 0;
};

// `text` with migUUID, gpuInstanceID and computeInstanceID set on the
// entries of `container_index`, identities[i] on the i-th in deviceIndex
// order; every other member and entry is kept as it was. kInvalidArgument
// when `text` does not decode; kAborted when the container's entry count is
// not identities.size() (the reservation changed under us).
StatusOr<std::string> SetRuntimeIdentity(std::string_view text, int container_index,
                                         const std::vector<RuntimeIdentity>& identities);

}  // namespace migd::k8s::hami

#endif  // MIGD_K8S_APISERVER_MIG_ALLOCATIONS_H_
