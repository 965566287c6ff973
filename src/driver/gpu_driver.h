// File: driver/gpu_driver.h
//
// GpuDriver: the only door to MIG hardware (docs/architecture.md),
// in the manner of leveldb's Env. Implementations:
//   NvmlDriver (driver/nvml/)     - the real NVML through dlopen
//   FakeGpuDriver (sim/)          - the simulator's hardware model in-process
//   GpuDriverWrapper              - forwards every call; base for decorators
//   FaultInjectingDriver          - fails chosen calls, for rollback tests
//
// Conventions:
//   * GPUs are addressed by their NVML index within the current session; the
//     stable identity is GpuInfo::uuid.
//   * GIs and CIs are addressed by (GPU, GI id, CI id); no handle is cached
//     across create/destroy (nvml.md §7.6).
//   * Every placement is explicit: CreateGi never lets the driver choose.
//   * Errors from NVML keep NVML's error name in the message, e.g.
//     "creating GI profile 9 at 4:4 on GPU 0: NVML_ERROR_INSUFFICIENT_RESOURCES
//     (Insufficient Resources)". Code mapping: driver/nvml/nvml_status.h.
//
// Thread-safety: every implementation is safe for concurrent use without
// external locking.
#ifndef MIGD_DRIVER_GPU_DRIVER_H_
#define MIGD_DRIVER_GPU_DRIVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "driver/gpu_events.h"
#include "mig/placement.h"

namespace migd::driver {

enum class MigMode { kDisabled = 0, kEnabled = 1 };

struct MigModeInfo {
  bool supported = false;  // false when the GPU has no MIG (NOT_SUPPORTED)
  MigMode current = MigMode::kDisabled;
  MigMode pending = MigMode::kDisabled;
};

struct GpuInfo {
  GpuIndex index;
  GpuUuid uuid;
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
  uint32_t minor = 0;  // N of /dev/nvidiaN and of gpuN in the MIG capability paths
  std::string pci_bus_id;  // "00000000:17:00.0"
  uint32_t pci_device_id = 0;  // (device << 16) | vendor, e.g. 0x233010DE
  uint64_t memory_total_mib = 0;  // 0 if not readable
  MigModeInfo mig;
};

struct GiProfileInfo {
  GiProfileIndex index;  // what ProfileInfo took
  GiProfileId id;  // what every other call takes
  std::string name;  // "1g.10gb" ("MIG " prefix stripped); empty from the v1 struct
  uint32_t slice_count = 0;
  uint32_t instance_count = 0;
  uint32_t multiprocessor_count = 0;
  uint32_t copy_engines = 0;
  uint32_t decoders = 0;
  uint32_t encoders = 0;
  uint32_t jpeg = 0;
  uint32_t ofa = 0;
  uint64_t memory_mib = 0;
  bool p2p_supported = false;  // v1/v2 isP2pSupported; v3 the CAPS_P2P bit
  bool gfx_capable = false;  // v3 capability bit; on v1/v2 derived from the index
  int info_version = 0;  // 1, 2 or 3: the struct version the driver accepted
  std::vector<mig::Placement> placements;  // every legal placement, occupied or not
};

struct ComputeInstanceInfo {
  NvmlCiId id;
  CiProfileId profile_id;
  mig::Placement placement;  // compute slices relative to the GI; size 0 if unknown
  MigUuid mig_uuid;
};

struct GpuInstanceInfo {
  NvmlGiId id;
  GiProfileId profile_id;
  mig::Placement placement;  // memory slices
  std::vector<ComputeInstanceInfo> compute_instances;  // sorted by id
};

struct ProcessInfo {
  uint32_t pid = 0;
  uint64_t used_gpu_memory_bytes = 0;
};

struct DriverVersions {
  std::string driver;  // nvmlSystemGetDriverVersion, e.g. "580.95.05"
  std::string nvml;  // nvmlSystemGetNVMLVersion, e.g. "13.580.95.05"
};

class GpuDriver {
 public:
  virtual ~GpuDriver() = default;

  virtual StatusOr<DriverVersions> GetVersions() = 0;

  // Every GPU the driver reports, by index. GPUs the caller may not access
  // (NO_PERMISSION on GetHandleByIndex, nvml.md §7.16) are skipped.
  virtual StatusOr<std::vector<GpuInfo>> ListGpus() = 0;

  // The indices the last successful ListGpus skipped for NO_PERMISSION, in
  // index order (a later ListGpus may list them: the engine probes them
  // again). Makes no driver call. Default: none (implementations that never
  // skip).
  virtual std::vector<GpuIndex> SkippedGpus() { return {}; }

  virtual StatusOr<MigModeInfo> GetMigMode(GpuIndex gpu) = 0;

  // Every GI profile the GPU offers, found by walking profile indices from 0
  // until INVALID_ARGUMENT (skipping NOT_SUPPORTED), each with its possible
  // placements. kFailedPrecondition if MIG is disabled.
  virtual StatusOr<std::vector<GiProfileInfo>> GetGiProfiles(GpuIndex gpu) = 0;

  // The static placement list of one profile id.
  virtual StatusOr<std::vector<mig::Placement>> GetGiPossiblePlacements(GpuIndex gpu,
                                                                        GiProfileId profile) = 0;

  // Creates a GI of `profile` at exactly `placement`. On success returns its
  // info with no compute instances.
  // kResourceExhausted: overlap, instance cap or engine budget;
  // kInvalidArgument: placement not listed for the profile / unknown profile;
  // kFailedPrecondition: MIG disabled; kPermissionDenied: no mig/config.
  virtual StatusOr<GpuInstanceInfo> CreateGi(GpuIndex gpu, GiProfileId profile,
                                             const mig::Placement& placement) = 0;

  // Creates the GI's default CI, which spans the whole GI (nvml.md §7.17:
  // C == G, except the double-memory 1g whose default is CI index 7), and
  // returns it with its MIG UUID. kNotFound if the GI does not exist.
  virtual StatusOr<ComputeInstanceInfo> CreateCi(GpuIndex gpu, NvmlGiId gi) = 0;

  // Destroys one CI. kNotFound if the GI or CI does not exist (already gone);
  // kFailedPrecondition with NVML_ERROR_IN_USE when processes run on it.
  virtual Status DestroyCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci) = 0;

  // Destroys a GI. REQUIRES: its CIs were destroyed first. kNotFound if it
  // does not exist; kFailedPrecondition (IN_USE) while CIs or processes remain.
  virtual Status DestroyGi(GpuIndex gpu, NvmlGiId gi) = 0;

  // Every live GI of every profile id (including +me, REV, GFX, -me and
  // +me.all variants), each with its CIs and their MIG UUIDs, sorted by GI id.
  // A GI with no CI is listed with an empty compute_instances.
  virtual StatusOr<std::vector<GpuInstanceInfo>> ListGpuInstances(GpuIndex gpu) = 0;

  // Processes running on the MIG device (GI, CI). kNotFound if absent.
  virtual StatusOr<std::vector<ProcessInfo>> ListProcesses(GpuIndex gpu, NvmlGiId gi,
                                                           NvmlCiId ci) = 0;

  // A new event set (driver/gpu_events.h: its contract and thread-safety).
  // kUnimplemented when the driver has no event API (the default here);
  // kUnavailable when the driver's session is not open.
  virtual StatusOr<std::unique_ptr<GpuEventWatch>> OpenEventWatch() {
    return UnimplementedError("this GPU driver delivers no events");
  }
};

}  // namespace migd::driver

#endif  // MIGD_DRIVER_GPU_DRIVER_H_
