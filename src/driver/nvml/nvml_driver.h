// File: driver/nvml/nvml_driver.h
//
// NvmlDriver: the GpuDriver over the real NVML (or the simulator's
// libnvidia-ml-sim.so, which exposes the same C ABI), through an NvmlSession.
// It follows the call sequences of nvml.md §6 and the rules of §7:
//   * profile index != profile id; GI profiles are found by walking indices
//     from 0 until INVALID_ARGUMENT, skipping NOT_SUPPORTED, past the header's
//     PROFILE_COUNT (§7.13);
//   * ...ProfileInfoV is tried with the v3 version word, then v2 on
//     INVALID_ARGUMENT / ARGUMENT_VERSION_MISMATCH, then the unversioned v1
//     function when the V symbol is absent; the struct is decoded with the
//     version the driver accepted (§7.9);
//   * every GI is created with an explicit placement;
//   * GI/CI handles are never cached: every call re-resolves them by id
//     (GetGpuInstanceById, GetComputeInstanceById). Only GPU handles are
//     cached, tagged with the session generation;
//   * GI profile info is cached per GPU (immutable while MIG mode is on) and
//     dropped when a MIG-mode read differs from the mode it was read under; CI
//     profile info is cached per (GPU, GI profile id). A GI profile index that
//     answers NOT_SUPPORTED is asked a second time before it counts as absent
//     (one extra call per absent index and walk): the table stays cached, so a
//     transient NOT_SUPPORTED would otherwise drop a profile until restart;
//   * a CI's MIG device (its UUID, its processes) is found by walking the
//     parent's MIG device handles, nvmlDeviceGetMigDeviceHandleByIndex over
//     0..nvmlDeviceGetMaxMigDeviceCount-1 (skipping NOT_FOUND and
//     INVALID_ARGUMENT: indices may be sparse), matching
//     nvmlDeviceGetGpuInstanceId / nvmlDeviceGetComputeInstanceId. The
//     .device field of GpuInstanceGetInfo / ComputeInstanceGetInfo is the
//     parent GPU ("Parent device" in nvml.h) and is never used for identity.
//     One walk per GPU serves every CI of that GPU: the (GI, CI) -> handle
//     map is kept and dropped at every CI create and destroy; inventory
//     (ListGpuInstances) always walks afresh. A CI no walk finds is re-walked
//     (kMaxMigWalks walks in all, a short pause between them: whether a new
//     CI is visible to the walk at once is not documented), then an error;
//     CreateCi then destroys the CI it made. Every MIG UUID read must start
//     with "MIG-" and differ from the parent GPU's UUID, else kInternal;
//   * every NVML call is counted per (function, result): CallCounts().
//
// NVML call counts with warm caches (GPU handle, parent UUID, profile caches,
// max MIG device count filled, e.g. by ListGpus, one GetGiProfiles and one
// earlier CreateCi of the same GI profile); M = nvmlDeviceGetMaxMigDeviceCount
// (7 on A100/H100, 4 on A30), N = CIs on the GPU after the call:
//   CreateGi   2  nvmlDeviceCreateGpuInstanceWithPlacement, nvmlGpuInstanceGetInfo
//   CreateCi   5+M+2N  nvmlDeviceGetGpuInstanceById, nvmlGpuInstanceGetInfo,
//                 nvmlGpuInstanceCreateComputeInstance, nvmlComputeInstanceGetInfo_v2,
//                 the walk (M x nvmlDeviceGetMigDeviceHandleByIndex, N x
//                 nvmlDeviceGetGpuInstanceId + nvmlDeviceGetComputeInstanceId),
//                 nvmlDeviceGetUUID of the new MIG device
//   DestroyCi  3  nvmlDeviceGetGpuInstanceById, nvmlGpuInstanceGetComputeInstanceById,
//                 nvmlComputeInstanceDestroy
//   DestroyGi  2  nvmlDeviceGetGpuInstanceById, nvmlGpuInstanceDestroy
// A walk that misses the CI costs M+2N more per extra walk.
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(std::unique_ptr<NvmlDriver> driver, NvmlDriver::Open());
//   MIGD_ASSIGN_OR_RETURN(auto gpus, driver->ListGpus());
//
// Thread-safety: all methods are thread-safe (GpuDriver contract). The cache
// lock is never held across an NVML call. A per-GPU MIG-device lock is: it
// serialises, within this process, CI create, CI destroy and the walk of one
// GPU (walk indices mean something only while the set of MIG devices stays
// put); lock order: MIG-device lock, then the cache lock.
#ifndef MIGD_DRIVER_NVML_NVML_DRIVER_H_
#define MIGD_DRIVER_NVML_NVML_DRIVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "driver/gpu_driver.h"
#include "driver/nvml/nvml_abi.h"
#include "driver/nvml/nvml_library.h"
#include "driver/nvml/nvml_session.h"

namespace migd::driver {

// A compute-instance profile as NVML reports it inside one GI profile.
struct CiProfileInfo {
  CiProfileIndex index;
  CiProfileId id;
  std::string name;  // "MIG " stripped; empty from the v1 struct
  uint32_t slice_count = 0;
  uint32_t instance_count = 0;
  uint32_t multiprocessor_count = 0;
  int info_version = 0;  // 1, 2 or 3
};

// OK if `mig_uuid` is a MIG device's UUID as NVML gives it: starting with
// "MIG-" (R470+ "MIG-<uuid>" and the older "MIG-GPU-<uuid>/<gi>/<ci>") and not
// equal to `parent_uuid`, the UUID of its GPU. kInternal naming both values
// otherwise: the value came from NVML but cannot be a MIG device's identity
// (e.g. the parent's UUID read through a "Parent device" field).
Status ValidateMigUuid(std::string_view mig_uuid, std::string_view parent_uuid);

// What the hardware answers where nvml.h leaves the behaviour open, read
// without changing anything (NvmlDriver::ObserveMigDevices, for
// `migctl probe --hardware-check` and scripts/hardware-check.sh). Result
// names are NvmlReturnName's without "NVML_" ("SUCCESS", "ERROR_NOT_FOUND").
struct MigIndexObservation {
  uint32_t index = 0;
  std::string result;  // nvmlDeviceGetMigDeviceHandleByIndex
  std::optional<uint32_t> gi_id;  // set when the handle answered
  std::optional<uint32_t> ci_id;
  std::string mig_uuid;  // nvmlDeviceGetUUID of the handle; "" if unread
};
struct CiObservation {
  uint32_t gi_id = 0;
  uint32_t ci_id = 0;
  std::string mig_uuid;  // from the walk ("" if the walk did not find it)
  int walk_hits = 0;  // how many indices of the first walk reported (gi_id, ci_id)
  std::string ci_info_device_uuid;  // UUID of nvmlComputeInstanceGetInfo_v2().device
  std::string gi_info_device_uuid;  // UUID of nvmlGpuInstanceGetInfo().device
  std::string handle_by_uuid;  // nvmlDeviceGetHandleByUUID(mig_uuid): result
  bool handle_by_uuid_matches = false;  // and that handle reports (gi_id, ci_id)
  std::string handle_by_legacy_uuid;  // the same for "MIG-<GPU uuid>/<gi>/<ci>"
};
struct MigDeviceObservations {
  std::string gpu_uuid;
  uint32_t max_mig_devices = 0;
  std::vector<MigIndexObservation> walk;  // every index below the maximum
  bool second_walk_identical = false;  // an immediate second walk saw the same
  std::string parent_gpu_instance_id;  // GetGpuInstanceId on the GPU handle
  std::string parent_compute_instance_id;  // GetComputeInstanceId on it
  std::vector<CiObservation> compute_instances;  // every live CI, by (GI, CI)
};

class NvmlDriver : public GpuDriver {
 public:
  // Loads the library at `library_path` (NvmlLibrary::kDefaultPath when
  // empty), opens an NvmlSession on it and returns a driver that owns both;
  // destroying the driver closes the session (nvmlShutdown).
  // kUnavailable when the library is absent or too old (NvmlLibrary::Load);
  // kFailedPrecondition if another session is open in this process; the
  // FromNvml status of nvmlInit_v2 otherwise.
  static StatusOr<std::unique_ptr<NvmlDriver>> Open(const std::string& library_path = "");

  // A driver over an existing session, which may be opened and closed
  // independently: while it is closed every method returns kUnavailable.
  // REQUIRES: `session` is not null.
  explicit NvmlDriver(std::shared_ptr<NvmlSession> session);
  ~NvmlDriver() override;

  StatusOr<DriverVersions> GetVersions() override;
  StatusOr<std::vector<GpuInfo>> ListGpus() override;
  std::vector<GpuIndex> SkippedGpus() override;
  StatusOr<MigModeInfo> GetMigMode(GpuIndex gpu) override;
  StatusOr<std::vector<GiProfileInfo>> GetGiProfiles(GpuIndex gpu) override;
  StatusOr<std::vector<mig::Placement>> GetGiPossiblePlacements(GpuIndex gpu,
                                                                GiProfileId profile) override;
  StatusOr<GpuInstanceInfo> CreateGi(GpuIndex gpu, GiProfileId profile,
                                     const mig::Placement& placement) override;
  StatusOr<ComputeInstanceInfo> CreateCi(GpuIndex gpu, NvmlGiId gi) override;
  Status DestroyCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci) override;
  Status DestroyGi(GpuIndex gpu, NvmlGiId gi) override;
  StatusOr<std::vector<GpuInstanceInfo>> ListGpuInstances(GpuIndex gpu) override;
  StatusOr<std::vector<ProcessInfo>> ListProcesses(GpuIndex gpu, NvmlGiId gi,
                                                   NvmlCiId ci) override;
  // An NvmlEventWatch (driver/nvml/nvml_events.h) of this driver's session.
  // The watch shares the session: it stays open until the driver and every
  // watch are gone, and closing it frees the watch's set first.
  StatusOr<std::unique_ptr<GpuEventWatch>> OpenEventWatch() override;

  // The CI profiles NVML offers inside the GI `gi` (walks CI profile indices
  // with the same v3 -> v2 -> v1 rules; cached per (GPU, GI profile id)).
  // kNotFound if the GI does not exist.
  StatusOr<std::vector<CiProfileInfo>> GetCiProfiles(GpuIndex gpu, NvmlGiId gi);

  // Best effort for a GPU whose MIG mode is off (`migctl probe`): walks the
  // unversioned ...ProfileInfo, which 12.4+ drivers answer without MIG mode,
  // and adds PossiblePlacements_v2 where the driver answers (empty otherwise).
  // Never cached. An empty list when the driver answers NOT_SUPPORTED for
  // every index; the FromNvml status of any other failure.
  StatusOr<std::vector<GiProfileInfo>> GetGiProfilesWithoutMig(GpuIndex gpu);

  // Read-only: the raw answers of the MIG-device walk, of the instance
  // info's .device fields and of the UUID lookups for every live CI of the
  // GPU (MigDeviceObservations). Creates, destroys and changes nothing; does
  // not use or fill the walk cache. kFailedPrecondition when MIG is off.
  StatusOr<MigDeviceObservations> ObserveMigDevices(GpuIndex gpu);

  // Every NVML call made through this driver's library (all sessions and
  // drivers sharing it), by (function, result). Non-zero rows only.
  std::vector<NvmlCallCount> CallCounts() const { return library().CallCounts(); }
  uint64_t TotalCalls() const { return library().TotalCalls(); }

  // Which symbol variant was bound for each logical NVML function.
  std::vector<NvmlBinding> Bindings() const { return library().Bindings(); }

  NvmlLibrary& library() const { return session_->library(); }
  NvmlSession& session() const { return *session_; }

 private:
  // Walks before a CI counts as having no MIG device (see the file comment).
  static constexpr int kMaxMigWalks = 3;

  // A MIG device the walk found.
  struct MigDevice {
    nvmlDevice_t handle = nullptr;
    uint32_t index = 0;  // the MIG device index it answered at
    std::string uuid;  // "" until read
  };
  using MigKey = std::pair<uint32_t, uint32_t>;  // (GI id, CI id)
  using MigDeviceMap = std::map<MigKey, MigDevice>;

  struct GpuCache {
    nvmlDevice_t handle = nullptr;
    std::string uuid;  // the GPU's own UUID; "" until read
    bool profiles_valid = false;
    std::vector<GiProfileInfo> profiles;  // sorted by index
    std::map<uint32_t, std::vector<CiProfileInfo>> ci_profiles;  // by GI profile id
    std::map<uint32_t, CiProfileInfo> default_ci;  // by GI profile id
    std::optional<uint32_t> max_mig_devices;  // valid while MIG mode stays on
    std::optional<MigDeviceMap> mig_devices;  // the last walk; dropped by CI create/destroy
  };

  StatusOr<nvmlDevice_t> Device(const NvmlSession::Token& token, GpuIndex gpu);
  // Reads the MIG mode and drops the GPU's profile caches unless MIG is on
  // (the caches are only filled, and only valid, while it is).
  StatusOr<MigModeInfo> ReadMigMode(GpuIndex gpu, nvmlDevice_t dev);
  // The GPU's GI profiles with placements: from the cache, or walked after a
  // MIG-mode check (kFailedPrecondition when MIG is disabled or unsupported).
  // `force_mode_check` reads the mode even when the cache is warm.
  StatusOr<std::vector<GiProfileInfo>> Profiles(GpuIndex gpu, nvmlDevice_t dev,
                                                bool force_mode_check);
  StatusOr<std::vector<GiProfileInfo>> WalkGiProfiles(GpuIndex gpu, nvmlDevice_t dev);
  // One ...ProfileInfo[V] query; *accepted is the struct version known to
  // work on this GPU (0 = not known yet) and is updated. Returns the final
  // NVML code: SUCCESS with *out filled, INVALID_ARGUMENT past the last index,
  // NOT_SUPPORTED for an absent profile, or an error.
  // `force_v1` uses the unversioned function even when the V one is bound.
  nvmlReturn_t QueryGiProfile(nvmlDevice_t dev, uint32_t index, int* accepted,
                              GiProfileInfo* out, bool force_v1 = false);
  nvmlReturn_t QueryCiProfile(nvmlGpuInstance_t gi, uint32_t index, int* accepted,
                              CiProfileInfo* out);
  StatusOr<std::vector<mig::Placement>> Placements(GpuIndex gpu, nvmlDevice_t dev,
                                                   GiProfileId profile,
                                                   uint32_t instance_count);
  // CI profiles of a GI profile, cached per (GPU, GI profile id); `gi` is any
  // live GI of that profile, used to walk on a cache miss.
  StatusOr<std::vector<CiProfileInfo>> CiProfiles(GpuIndex gpu, GiProfileId gi_profile,
                                                  nvmlGpuInstance_t gi);
  // The default (full) CI profile of GI profile `gp`, cached per (GPU, GI
  // profile id). On a miss it queries only the candidate indices (REV1 for
  // the double-memory 1g, then the index whose slice count equals the GI's:
  // one call on a v3 driver), so that a create stays within its NVML call
  // budget; the full walk is the fallback when neither answers as expected.
  StatusOr<CiProfileInfo> DefaultCiProfile(GpuIndex gpu, const GiProfileInfo& gp,
                                           nvmlGpuInstance_t gi);
  StatusOr<nvmlGpuInstance_t> GiHandle(GpuIndex gpu, nvmlDevice_t dev, NvmlGiId gi);
  StatusOr<nvmlComputeInstance_t> CiHandle(GpuIndex gpu, nvmlGpuInstance_t gih, NvmlGiId gi,
                                           NvmlCiId ci);
  // ComputeInstanceGetInfo_v2 (or the v1 fallback): id, profile, placement.
  // The MIG UUID is left empty (it comes from the MIG device walk).
  StatusOr<ComputeInstanceInfo> DescribeCi(nvmlComputeInstance_t ci, const std::string& what);
  // The GIs of profile `p` (nvmlDeviceGetGpuInstances).
  StatusOr<std::vector<nvmlGpuInstance_t>> GisOfProfile(GpuIndex gpu, nvmlDevice_t dev,
                                                        const GiProfileInfo& p);
  // One GI with its CIs (MIG UUIDs left empty).
  StatusOr<GpuInstanceInfo> DescribeGi(GpuIndex gpu, nvmlGpuInstance_t gih);
  StatusOr<std::string> DeviceString(NvmlSymbol s, nvmlDevice_t dev, const std::string& what);
  // CreateCi after the NVML create: describe the new CI and find its MIG
  // device. REQUIRES: MigLock(gpu) held.
  StatusOr<ComputeInstanceInfo> FinishCreateCi(GpuIndex gpu, nvmlDevice_t dev, NvmlGiId gi,
                                               nvmlComputeInstance_t ci,
                                               const std::string& gi_text);
  // Destroys the CI `ci` that a failed CreateCi made and adds the outcome to
  // `failure`.
  Status RollBackCi(GpuIndex gpu, NvmlGiId gi, nvmlComputeInstance_t ci, const Status& failure,
                    const std::string& what);

  // The MIG-device walk (nvml_mig_devices.cc). REQUIRES for all of them:
  // MigLock(gpu) held.
  Mutex& MigLock(GpuIndex gpu);
  // Drops the GPU's cached walk (every CI create and destroy does).
  void ForgetMigDevices(GpuIndex gpu);
  StatusOr<uint32_t> MaxMigDevices(GpuIndex gpu, nvmlDevice_t dev);
  // One walk over every MIG device index of the GPU.
  StatusOr<MigDeviceMap> WalkMigDevices(GpuIndex gpu, nvmlDevice_t dev);
  // A walk that contains every key of `wanted`: the cached one unless
  // `fresh`, else up to kMaxMigWalks walks. The last walk is cached. kNotFound
  // naming the first missing CI if no walk has them all.
  StatusOr<MigDeviceMap> WalkCovering(GpuIndex gpu, nvmlDevice_t dev,
                                      const std::vector<MigKey>& wanted, bool fresh);
  // The validated MIG UUID of `device` (read once, then cached with the walk).
  StatusOr<MigUuid> MigUuidOf(GpuIndex gpu, nvmlDevice_t dev, const MigKey& key,
                              MigDevice& device);
  // The GPU's own UUID (cached; read once if ListGpus has not).
  StatusOr<std::string> ParentUuid(GpuIndex gpu, nvmlDevice_t dev);

  Status Err(nvmlReturn_t r, const std::string& what) const;
  // Drops every cached handle if `token` belongs to a newer generation.
  void SyncGeneration(const NvmlSession::Token& token);

  const std::shared_ptr<NvmlSession> session_;

  Mutex mu_;
  uint64_t cache_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint32_t, GpuCache> gpus_ ABSL_GUARDED_BY(mu_);  // by GPU index
  // The last ListGpus's NO_PERMISSION indices.
  std::vector<GpuIndex> skipped_ ABSL_GUARDED_BY(mu_);

  Mutex mig_locks_mu_;
  // Never erased: a MIG-device lock outlives session generations.
  std::map<uint32_t, std::unique_ptr<Mutex>> mig_locks_ ABSL_GUARDED_BY(mig_locks_mu_);
};

}  // namespace migd::driver

#endif  // MIGD_DRIVER_NVML_NVML_DRIVER_H_
