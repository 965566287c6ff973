// NvmlDriver::ObserveMigDevices: what the hardware answers where nvml.h is
// silent (docs/simulator.md §1.4), recorded read-only for
// scripts/hardware-check.sh. It reads the "Parent device" fields on purpose,
// to record what they hold; nothing here is used as an identity.
#include <absl/strings/str_cat.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_status.h"

namespace migd::driver {
namespace {

using S = NvmlSymbol;

std::string ResultName(nvmlReturn_t r) { return std::string(NvmlReturnName(r).substr(5)); }

// The UUID of `h`, or "(<RESULT>)" when the call fails.
std::string UuidOf(const NvmlLibrary& lib, nvmlDevice_t h) {
  char buf[nvml_abi::kDeviceUuidV2BufferSize] = {};
  const nvmlReturn_t r = lib.Call<nvmlDeviceGetString_fn>(S::kDeviceGetUuid, h, buf,
                                                          static_cast<unsigned int>(sizeof(buf)));
  return r == NVML_SUCCESS ? std::string(buf) : "(" + ResultName(r) + ")";
}

// The ids `h` reports, if it answers both.
bool IdsOf(const NvmlLibrary& lib, nvmlDevice_t h, uint32_t* gi, uint32_t* ci) {
  unsigned int g = 0;
  unsigned int c = 0;
  if (lib.Call<nvmlDeviceGetUint_fn>(S::kDeviceGetGpuInstanceId, h, &g) != NVML_SUCCESS ||
      lib.Call<nvmlDeviceGetUint_fn>(S::kDeviceGetComputeInstanceId, h, &c) != NVML_SUCCESS) {
    return false;
  }
  *gi = g;
  *ci = c;
  return true;
}

// Every index below `max`, as the hardware answers it.
std::vector<MigIndexObservation> RawWalk(const NvmlLibrary& lib, nvmlDevice_t dev, uint32_t max,
                                         bool read_uuids) {
  std::vector<MigIndexObservation> seen;
  for (uint32_t i = 0; i < max; ++i) {
    MigIndexObservation w;
    w.index = i;
    nvmlDevice_t h = nullptr;
    const nvmlReturn_t r = lib.Call<nvmlDeviceGetMigDeviceHandleByIndex_fn>(
        S::kDeviceGetMigDeviceHandleByIndex, dev, i, &h);
    w.result = ResultName(r);
    uint32_t gi = 0;
    uint32_t ci = 0;
    if (r == NVML_SUCCESS && IdsOf(lib, h, &gi, &ci)) {
      w.gi_id = gi;
      w.ci_id = ci;
      if (read_uuids) w.mig_uuid = UuidOf(lib, h);
    }
    seen.push_back(std::move(w));
  }
  return seen;
}

bool SameWalk(const std::vector<MigIndexObservation>& a,
              const std::vector<MigIndexObservation>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].result != b[i].result || a[i].gi_id != b[i].gi_id || a[i].ci_id != b[i].ci_id) {
      return false;
    }
  }
  return true;
}

// What the walk found for `o`, and nvmlDeviceGetHandleByUUID of its UUID in
// both forms.
void ObserveCi(const NvmlLibrary& lib, const MigDeviceObservations& gpu, CiObservation& o) {
  for (const MigIndexObservation& w : gpu.walk) {
    if (w.gi_id == o.gi_id && w.ci_id == o.ci_id) {
      ++o.walk_hits;
      if (o.mig_uuid.empty()) o.mig_uuid = w.mig_uuid;
    }
  }
  if (!lib.Has(S::kDeviceGetHandleByUuid)) return;
  auto lookup = [&](const std::string& uuid, bool* matches) {
    nvmlDevice_t h = nullptr;
    const nvmlReturn_t r =
        lib.Call<nvmlDeviceGetHandleByUUID_fn>(S::kDeviceGetHandleByUuid, uuid.c_str(), &h);
    uint32_t gi = 0;
    uint32_t ci = 0;
    *matches = r == NVML_SUCCESS && IdsOf(lib, h, &gi, &ci) && gi == o.gi_id && ci == o.ci_id;
    return ResultName(r);
  };
  bool legacy_matches = false;
  if (!o.mig_uuid.empty()) o.handle_by_uuid = lookup(o.mig_uuid, &o.handle_by_uuid_matches);
  o.handle_by_legacy_uuid =
      lookup(absl::StrCat("MIG-", gpu.gpu_uuid, "/", o.gi_id, "/", o.ci_id), &legacy_matches);
}

}  // namespace

StatusOr<MigDeviceObservations> NvmlDriver::ObserveMigDevices(GpuIndex gpu) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  MIGD_ASSIGN_OR_RETURN(std::vector<GiProfileInfo> profiles,
                        Profiles(gpu, dev, /*force_mode_check=*/true));
  MigDeviceObservations out;
  MIGD_ASSIGN_OR_RETURN(out.gpu_uuid, ParentUuid(gpu, dev));
  unsigned int id = 0;
  out.parent_gpu_instance_id =
      ResultName(library().Call<nvmlDeviceGetUint_fn>(S::kDeviceGetGpuInstanceId, dev, &id));
  out.parent_compute_instance_id =
      ResultName(library().Call<nvmlDeviceGetUint_fn>(S::kDeviceGetComputeInstanceId, dev, &id));

  MutexLock mig_lock(&MigLock(gpu));
  // The live CIs, with what their info structs' .device fields hold.
  for (const GiProfileInfo& p : profiles) {
    MIGD_ASSIGN_OR_RETURN(std::vector<nvmlGpuInstance_t> gis, GisOfProfile(gpu, dev, p));
    for (nvmlGpuInstance_t gih : gis) {
      nvmlGpuInstanceInfo_t gi_info{};
      nvmlReturn_t r =
          library().Call<nvmlGpuInstanceGetInfo_fn>(S::kGpuInstanceGetInfo, gih, &gi_info);
      if (r != NVML_SUCCESS)
        return Err(r, absl::StrCat("reading the info of a GI on GPU ", gpu.value()));
      MIGD_ASSIGN_OR_RETURN(std::vector<CiProfileInfo> cps,
                            CiProfiles(gpu, GiProfileId(gi_info.profileId), gih));
      for (const CiProfileInfo& cp : cps) {
        std::vector<nvmlComputeInstance_t> cis(std::max<uint32_t>(cp.instance_count, 1));
        unsigned int n = 0;
        r = library().Call<nvmlGpuInstanceGetComputeInstances_fn>(
            S::kGpuInstanceGetComputeInstances, gih, cp.id.value(), cis.data(), &n);
        if (r != NVML_SUCCESS) return Err(r, absl::StrCat("listing the CIs of GI ", gi_info.id));
        for (unsigned int j = 0; j < n && j < cis.size(); ++j) {
          nvmlComputeInstanceInfo_t ci_info{};
          NvmlSymbol sym = S::kComputeInstanceGetInfoV2;
          library().FirstBound({S::kComputeInstanceGetInfoV2, S::kComputeInstanceGetInfo}, &sym);
          r = library().Call<nvmlComputeInstanceGetInfo_fn>(sym, cis[j], &ci_info);
          if (r != NVML_SUCCESS) return Err(r, absl::StrCat("reading a CI of GI ", gi_info.id));
          CiObservation o;
          o.gi_id = gi_info.id;
          o.ci_id = ci_info.id;
          o.ci_info_device_uuid = UuidOf(library(), ci_info.device);
          o.gi_info_device_uuid = UuidOf(library(), gi_info.device);
          out.compute_instances.push_back(std::move(o));
        }
      }
    }
  }
  std::sort(out.compute_instances.begin(), out.compute_instances.end(),
            [](const CiObservation& a, const CiObservation& b) {
              return std::pair(a.gi_id, a.ci_id) < std::pair(b.gi_id, b.ci_id);
            });
  MIGD_ASSIGN_OR_RETURN(out.max_mig_devices, MaxMigDevices(gpu, dev));
  out.walk = RawWalk(library(), dev, out.max_mig_devices, /*read_uuids=*/true);
  out.second_walk_identical =
      SameWalk(out.walk, RawWalk(library(), dev, out.max_mig_devices, /*read_uuids=*/false));
  for (CiObservation& o : out.compute_instances) ObserveCi(library(), out, o);
  return out;
}

}  // namespace migd::driver
