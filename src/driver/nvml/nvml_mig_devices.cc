// NvmlDriver's MIG-device walk: from (GPU, GI id, CI id) to the MIG device
// handle, its UUID and its processes. The rules are in nvml_driver.h; the
// facts they rest on, from nvml.h (NVIDIA/go-nvml gen/nvml/nvml.h):
//   * nvmlComputeInstanceInfo_t.device and nvmlGpuInstanceInfo_t.device are
//     "Parent device": the GPU, never the MIG device;
//   * nvmlDeviceGetMaxMigDeviceCount: "the maximum number of MIG devices that
//     can exist under a given parent NVML device";
//   * nvmlDeviceGetMigDeviceHandleByIndex: NOT_FOUND "if no valid MIG device
//     was found at index"; "Handles may be reused and their properties can
//     change";
//   * nvmlDeviceGetGpuInstanceId / nvmlDeviceGetComputeInstanceId: the ids of
//     "the given MIG device handle".
// What the header leaves open (index density and order, whether a new CI is
// walkable at once) is covered by the simulator's variants
// (docs/simulator.md, "Behaviours the header leaves open").
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_status.h"

namespace migd::driver {
namespace {

using S = NvmlSymbol;

// Pause before the n-th extra walk: n x this. The header says nothing about
// when a new CI's MIG device appears; a short pause is cheap next to a CI
// create, and the walks are bounded.
constexpr std::chrono::milliseconds kWalkRetryPause{10};

std::string GpuText(GpuIndex gpu) { return absl::StrCat("GPU ", gpu.value()); }

// Debian's abseil has its own string_view type (not std::string_view).
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string CiText(GpuIndex gpu, uint32_t gi, uint32_t ci) {
  return absl::StrCat("CI ", ci, " of GI ", gi, " on ", GpuText(gpu));
}

}  // namespace

Status ValidateMigUuid(std::string_view mig_uuid, std::string_view parent_uuid) {
  if (absl::StartsWith(Av(mig_uuid), "MIG-") &&
      !absl::EqualsIgnoreCase(Av(mig_uuid), Av(parent_uuid))) {
    return OkStatus();
  }
  return InternalError(absl::StrCat(
      "NVML gave '", Av(mig_uuid), "' as the MIG UUID of a MIG device of GPU '", Av(parent_uuid),
      "': a MIG UUID starts with \"MIG-\" and differs from its GPU's UUID (a \"GPU-\" UUID here "
      "is the parent's, read through a \"Parent device\" handle); the instance is not used"));
}

Mutex& NvmlDriver::MigLock(GpuIndex gpu) {
  MutexLock lock(&mig_locks_mu_);
  std::unique_ptr<Mutex>& mu = mig_locks_[gpu.value()];
  if (mu == nullptr) mu = std::make_unique<Mutex>();
  return *mu;
}

void NvmlDriver::ForgetMigDevices(GpuIndex gpu) {
  MutexLock lock(&mu_);
  auto it = gpus_.find(gpu.value());
  if (it != gpus_.end()) it->second.mig_devices.reset();
}

StatusOr<std::string> NvmlDriver::ParentUuid(GpuIndex gpu, nvmlDevice_t dev) {
  {
    MutexLock lock(&mu_);
    auto it = gpus_.find(gpu.value());
    if (it != gpus_.end() && !it->second.uuid.empty()) return it->second.uuid;
  }
  MIGD_ASSIGN_OR_RETURN(std::string uuid, DeviceString(S::kDeviceGetUuid, dev,
                                                       "reading the UUID of " + GpuText(gpu)));
  MutexLock lock(&mu_);
  gpus_[gpu.value()].uuid = uuid;
  return uuid;
}

StatusOr<uint32_t> NvmlDriver::MaxMigDevices(GpuIndex gpu, nvmlDevice_t dev) {
  {
    MutexLock lock(&mu_);
    auto it = gpus_.find(gpu.value());
    if (it != gpus_.end() && it->second.max_mig_devices) return *it->second.max_mig_devices;
  }
  unsigned int count = 0;
  const nvmlReturn_t r =
      library().Call<nvmlDeviceGetUint_fn>(S::kDeviceGetMaxMigDeviceCount, dev, &count);
  if (r != NVML_SUCCESS) return Err(r, "reading the MIG device count of " + GpuText(gpu));
  // Fixed while MIG mode stays on; ReadMigMode drops it with the profiles.
  MutexLock lock(&mu_);
  gpus_[gpu.value()].max_mig_devices = count;
  return count;
}

StatusOr<NvmlDriver::MigDeviceMap> NvmlDriver::WalkMigDevices(GpuIndex gpu, nvmlDevice_t dev) {
  MIGD_ASSIGN_OR_RETURN(const uint32_t max, MaxMigDevices(gpu, dev));
  MigDeviceMap found;
  for (uint32_t i = 0; i < max; ++i) {
    nvmlDevice_t h = nullptr;
    nvmlReturn_t r = library().Call<nvmlDeviceGetMigDeviceHandleByIndex_fn>(
        S::kDeviceGetMigDeviceHandleByIndex, dev, i, &h);
    // A hole in the index range (sparse numbering, or fewer MIG devices than
    // the maximum).
    if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT) continue;
    const std::string what = absl::StrCat("MIG device index ", i, " of ", GpuText(gpu));
    if (r != NVML_SUCCESS) return Err(r, "walking the MIG devices: getting " + what);
    unsigned int gi = 0;
    unsigned int ci = 0;
    r = library().Call<nvmlDeviceGetUint_fn>(S::kDeviceGetGpuInstanceId, h, &gi);
    if (r == NVML_SUCCESS) {
      r = library().Call<nvmlDeviceGetUint_fn>(S::kDeviceGetComputeInstanceId, h, &ci);
    }
    // Destroyed by another NVML client since the index answered.
    if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_NOT_FOUND) continue;
    if (r != NVML_SUCCESS) return Err(r, "walking the MIG devices: the ids of " + what);
    auto [it, inserted] = found.emplace(MigKey{gi, ci}, MigDevice{h, i, ""});
    if (!inserted) {
      return InternalError(absl::StrCat("MIG device indices ", it->second.index, " and ", i, " of ",
                                        GpuText(gpu), " both report GI ", gi, " CI ", ci));
    }
  }
  return found;
}

StatusOr<NvmlDriver::MigDeviceMap> NvmlDriver::WalkCovering(GpuIndex gpu, nvmlDevice_t dev,
                                                            const std::vector<MigKey>& wanted,
                                                            bool fresh) {
  auto first_missing = [&](const MigDeviceMap& map) -> const MigKey* {
    for (const MigKey& k : wanted) {
      if (!map.contains(k)) return &k;
    }
    return nullptr;
  };
  if (!fresh) {
    std::optional<MigDeviceMap> cached;
    {
      MutexLock lock(&mu_);
      auto it = gpus_.find(gpu.value());
      if (it != gpus_.end()) cached = it->second.mig_devices;
    }
    // A cached handle is trusted only if it still reports its ids: another
    // NVML client may have re-created the instance since the walk.
    bool valid = cached && first_missing(*cached) == nullptr;
    for (const MigKey& k : wanted) {
      if (!valid) break;
      unsigned int gi = 0;
      unsigned int ci = 0;
      const nvmlDevice_t h = cached->at(k).handle;
      valid = library().Call<nvmlDeviceGetUint_fn>(S::kDeviceGetGpuInstanceId, h, &gi) ==
                  NVML_SUCCESS &&
              library().Call<nvmlDeviceGetUint_fn>(S::kDeviceGetComputeInstanceId, h, &ci) ==
                  NVML_SUCCESS &&
              MigKey{gi, ci} == k;
    }
    if (valid) return *std::move(cached);
  }
  MigDeviceMap walk;
  const MigKey* missing = nullptr;
  for (int n = 0; n < kMaxMigWalks; ++n) {
    if (n > 0) std::this_thread::sleep_for(kWalkRetryPause * n);
    MIGD_ASSIGN_OR_RETURN(walk, WalkMigDevices(gpu, dev));
    {
      MutexLock lock(&mu_);
      gpus_[gpu.value()].mig_devices = walk;
    }
    missing = first_missing(walk);
    if (missing == nullptr) return walk;
  }
  return NotFoundError(absl::StrCat(
      "no MIG device of ", CiText(gpu, missing->first, missing->second), " in ", kMaxMigWalks,
      " walks of its GPU's MIG device indices (nvmlDeviceGetMigDeviceHandleByIndex, ", walk.size(),
      " MIG device(s) found); its MIG UUID cannot be known"));
}

StatusOr<MigUuid> NvmlDriver::MigUuidOf(GpuIndex gpu, nvmlDevice_t dev, const MigKey& key,
                                        MigDevice& device) {
  if (device.uuid.empty()) {
    MIGD_ASSIGN_OR_RETURN(
        device.uuid, DeviceString(S::kDeviceGetUuid, device.handle,
                                  "reading the MIG UUID of " + CiText(gpu, key.first, key.second)));
    MutexLock lock(&mu_);
    GpuCache& cache = gpus_[gpu.value()];
    if (cache.mig_devices) {
      auto it = cache.mig_devices->find(key);
      if (it != cache.mig_devices->end() && it->second.handle == device.handle) {
        it->second.uuid = device.uuid;
      }
    }
  }
  MIGD_ASSIGN_OR_RETURN(const std::string parent, ParentUuid(gpu, dev));
  MIGD_RETURN_IF_ERROR(
      ValidateMigUuid(device.uuid, parent).WithContext(CiText(gpu, key.first, key.second)));
  return MigUuid(device.uuid);
}

}  // namespace migd::driver
