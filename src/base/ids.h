// File: base/ids.h
//
// The identifiers of migd's domain. NVML profile *indices* (what
// nvmlDeviceGetGpuInstanceProfileInfo takes) and profile *ids* (what every
// other call takes) are different types on purpose (nvml.md §7.1).
#ifndef MIGD_BASE_IDS_H_
#define MIGD_BASE_IDS_H_

#include <cstdint>
#include <string>

#include "base/strong_id.h"

namespace migd {

struct GpuIndexTag {};
struct GpuUuidTag {};
struct GiProfileIndexTag {};
struct GiProfileIdTag {};
struct CiProfileIndexTag {};
struct CiProfileIdTag {};
struct NvmlGiIdTag {};
struct NvmlCiIdTag {};
struct MigUuidTag {};
struct DeviceIdTag {};
struct PodUidTag {};

// NVML enumeration index of a physical GPU; not stable across reboots.
using GpuIndex = StrongId<GpuIndexTag, uint32_t>;
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"; stable identity of a GPU.
using GpuUuid = StrongId<GpuUuidTag, std::string>;
// NVML_GPU_INSTANCE_PROFILE_* value passed to ...GetGpuInstanceProfileInfo[V].
using GiProfileIndex = StrongId<GiProfileIndexTag, uint32_t>;
// nvmlGpuInstanceProfileInfo.id: used by create, placements, GetGpuInstances.
using GiProfileId = StrongId<GiProfileIdTag, uint32_t>;
// NVML_COMPUTE_INSTANCE_PROFILE_* value passed to ...ComputeInstanceProfileInfo[V].
using CiProfileIndex = StrongId<CiProfileIndexTag, uint32_t>;
// nvmlComputeInstanceProfileInfo.id.
using CiProfileId = StrongId<CiProfileIdTag, uint32_t>;
// GPU instance id, unique per GPU while the GI exists (0..14).
using NvmlGiId = StrongId<NvmlGiIdTag, uint32_t>;
// Compute instance id, unique per GI while the CI exists (0..7).
using NvmlCiId = StrongId<NvmlCiIdTag, uint32_t>;
// "MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
using MigUuid = StrongId<MigUuidTag, std::string>;
// The id advertised to kubelet for a device.
using DeviceId = StrongId<DeviceIdTag, std::string>;
// Kubernetes pod UID.
using PodUid = StrongId<PodUidTag, std::string>;

// True if `s` has the form GPU-8-4-4-4-12 (lower- or upper-case hex).
bool IsValidGpuUuid(const std::string& s);
// True if `s` has the form MIG-8-4-4-4-12 (R470+ format).
bool IsValidMigUuid(const std::string& s);

}  // namespace migd

#endif  // MIGD_BASE_IDS_H_
