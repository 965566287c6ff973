#include "driver/nvml/nvml_driver.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "base/logging.h"
#include "base/status_macros.h"
#include "driver/nvml/nvml_events.h"
#include "driver/nvml/nvml_status.h"
#include "driver/nvml/nvml_text.h"

namespace migd::driver {
namespace {

namespace abi = ::migd::nvml_abi;
using S = NvmlSymbol;

// Extra process-list room for the retry after INSUFFICIENT_SIZE ("Allocate
// more space for infos table in case new compute processes are spawned").
constexpr unsigned int kExtraProcessRoom = 8;

std::string PlacementText(uint32_t start, uint32_t size) {
  return std::to_string(start) + ":" + std::to_string(size);
}

MigMode ToMode(unsigned int m) {
  return m == abi::kMigEnable ? MigMode::kEnabled : MigMode::kDisabled;
}

template <typename Info, typename Fn>
nvmlReturn_t QueryProcesses(const NvmlLibrary& lib, NvmlSymbol s, nvmlDevice_t dev,
                            std::vector<ProcessInfo>* out) {
  // Size query first (*infoCount = 0, NULL buffer): SUCCESS means nothing runs.
  unsigned int needed = 0;
  nvmlReturn_t r = lib.Call<Fn>(s, dev, &needed, static_cast<Info*>(nullptr));
  for (int attempt = 0; attempt < kMaxSizeRetries && r == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    // The list can grow between the two calls: ask with extra room.
    std::vector<Info> buf(needed + kExtraProcessRoom);
    unsigned int count = static_cast<unsigned int>(buf.size());
    r = lib.Call<Fn>(s, dev, &count, buf.data());
    if (r == NVML_SUCCESS) {
      for (unsigned int i = 0; i < count && i < buf.size(); ++i) {
        out->push_back(ProcessInfo{buf[i].pid, buf[i].usedGpuMemory});
      }
    } else {
      needed = std::max(count, static_cast<unsigned int>(buf.size()));
    }
  }
  return r;
}

}  // namespace

StatusOr<std::unique_ptr<NvmlDriver>> NvmlDriver::Open(const std::string& library_path) {
  MIGD_ASSIGN_OR_RETURN(std::shared_ptr<NvmlLibrary> lib, NvmlLibrary::Load(library_path));
  auto session = std::make_shared<NvmlSession>(std::move(lib));
  MIGD_RETURN_IF_ERROR(session->Open());
  return std::make_unique<NvmlDriver>(std::move(session));
}

NvmlDriver::NvmlDriver(std::shared_ptr<NvmlSession> session) : session_(std::move(session)) {}

NvmlDriver::~NvmlDriver() = default;

StatusOr<std::unique_ptr<GpuEventWatch>> NvmlDriver::OpenEventWatch() {
  MIGD_ASSIGN_OR_RETURN(std::unique_ptr<NvmlEventWatch> watch, NvmlEventWatch::Open(session_));
  return std::unique_ptr<GpuEventWatch>(std::move(watch));
}

Status NvmlDriver::Err(nvmlReturn_t r, const std::string& what) const {
  return FromNvml(r, what, library().ErrorString(r));
}

void NvmlDriver::SyncGeneration(const NvmlSession::Token& token) {
  MutexLock lock(&mu_);
  if (cache_generation_ != token.generation()) {
    // A new nvmlInit: every handle and cached answer of the old one is void.
    gpus_.clear();
    cache_generation_ = token.generation();
  }
}

StatusOr<nvmlDevice_t> NvmlDriver::Device(const NvmlSession::Token& token, GpuIndex gpu) {
  SyncGeneration(token);
  {
    MutexLock lock(&mu_);
    auto it = gpus_.find(gpu.value());
    if (it != gpus_.end() && it->second.handle != nullptr) return it->second.handle;
  }
  NvmlSymbol s = S::kDeviceGetHandleByIndexV2;
  library().FirstBound({S::kDeviceGetHandleByIndexV2, S::kDeviceGetHandleByIndex}, &s);
  nvmlDevice_t dev = nullptr;
  const nvmlReturn_t r = library().Call<nvmlDeviceGetHandleByIndex_fn>(s, gpu.value(), &dev);
  if (r != NVML_SUCCESS) return Err(r, "getting the handle of " + GpuText(gpu));
  MutexLock lock(&mu_);
  gpus_[gpu.value()].handle = dev;
  return dev;
}

StatusOr<std::string> NvmlDriver::DeviceString(NvmlSymbol s, nvmlDevice_t dev,
                                               const std::string& what) {
  char buf[abi::kDeviceUuidV2BufferSize] = {};
  static_assert(abi::kDeviceUuidV2BufferSize == abi::kDeviceNameV2BufferSize);
  const nvmlReturn_t r =
      library().Call<nvmlDeviceGetString_fn>(s, dev, buf, static_cast<unsigned int>(sizeof(buf)));
  if (r != NVML_SUCCESS) return Err(r, what);
  return CStr(buf, sizeof(buf));
}

StatusOr<DriverVersions> NvmlDriver::GetVersions() {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  DriverVersions v;
  if (library().Has(S::kSystemGetDriverVersion)) {
    char buf[abi::kSystemDriverVersionBufferSize] = {};
    const nvmlReturn_t r = library().Call<nvmlSystemGetDriverVersion_fn>(
        S::kSystemGetDriverVersion, buf, static_cast<unsigned int>(sizeof(buf)));
    if (r != NVML_SUCCESS) return Err(r, "reading the driver version");
    v.driver = CStr(buf, sizeof(buf));
  }
  if (library().Has(S::kSystemGetNvmlVersion)) {
    char buf[abi::kSystemNvmlVersionBufferSize] = {};
    const nvmlReturn_t r = library().Call<nvmlSystemGetNVMLVersion_fn>(
        S::kSystemGetNvmlVersion, buf, static_cast<unsigned int>(sizeof(buf)));
    if (r != NVML_SUCCESS) return Err(r, "reading the NVML version");
    v.nvml = CStr(buf, sizeof(buf));
  }
  return v;
}

StatusOr<MigModeInfo> NvmlDriver::ReadMigMode(GpuIndex gpu, nvmlDevice_t dev) {
  unsigned int current = 0;
  unsigned int pending = 0;
  const nvmlReturn_t r =
      library().Call<nvmlDeviceGetMigMode_fn>(S::kDeviceGetMigMode, dev, &current, &pending);
  MigModeInfo info;
  if (r == NVML_SUCCESS) {
    info.supported = true;
    info.current = ToMode(current);
    info.pending = ToMode(pending);
  } else if (r != NVML_ERROR_NOT_SUPPORTED) {
    return Err(r, "reading the MIG mode of " + GpuText(gpu));
  }
  // Profile info is immutable only while MIG mode stays on (nvml.md §7.13);
  // the cache is filled only in that mode.
  if (!info.supported || info.current != MigMode::kEnabled) {
    MutexLock lock(&mu_);
    auto it = gpus_.find(gpu.value());
    if (it != gpus_.end()) {
      it->second.profiles_valid = false;
      it->second.profiles.clear();
      it->second.ci_profiles.clear();
      it->second.default_ci.clear();
      it->second.max_mig_devices.reset();
      it->second.mig_devices.reset();
    }
  }
  return info;
}

StatusOr<std::vector<GpuInfo>> NvmlDriver::ListGpus() {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  SyncGeneration(token);
  NvmlSymbol count_sym = S::kDeviceGetCountV2;
  library().FirstBound({S::kDeviceGetCountV2, S::kDeviceGetCount}, &count_sym);
  unsigned int count = 0;
  nvmlReturn_t r = library().Call<nvmlDeviceGetCount_fn>(count_sym, &count);
  if (r != NVML_SUCCESS) return Err(r, "counting GPUs");

  NvmlSymbol handle_sym = S::kDeviceGetHandleByIndexV2;
  library().FirstBound({S::kDeviceGetHandleByIndexV2, S::kDeviceGetHandleByIndex}, &handle_sym);
  std::vector<GpuInfo> gpus;
  std::vector<GpuIndex> skipped;
  for (unsigned int i = 0; i < count; ++i) {
    const GpuIndex gpu(i);
    nvmlDevice_t dev = nullptr;
    r = library().Call<nvmlDeviceGetHandleByIndex_fn>(handle_sym, i, &dev);
    if (r == NVML_ERROR_NO_PERMISSION) {
      // cgroup device restrictions (nvml.md §7.16): skip, do not abort.
      spdlog::warn("skipping GPU the caller may not access{}",
                   Fields().Add("gpu_index", i).Add("nvml", NvmlReturnName(r)));
      skipped.push_back(gpu);
      continue;
    }
    if (r == NVML_ERROR_GPU_IS_LOST) {
      // nvmlDeviceGetHandleByIndex_v2: "NVML_ERROR_GPU_IS_LOST if the target
      // GPU has fallen off the bus or is otherwise inaccessible". The other
      // GPUs are still managed; this one is known by index until it answers.
      spdlog::warn("skipping GPU that has fallen off the bus{}",
                   Fields().Add("gpu_index", i).Add("nvml", NvmlReturnName(r)));
      skipped.push_back(gpu);
      continue;
    }
    if (r != NVML_SUCCESS) return Err(r, "getting the handle of " + GpuText(gpu));
    GpuInfo info;
    info.index = gpu;
    MIGD_ASSIGN_OR_RETURN(std::string uuid, DeviceString(S::kDeviceGetUuid, dev,
                                                         "reading the UUID of " + GpuText(gpu)));
    {
      MutexLock lock(&mu_);
      gpus_[i].handle = dev;
      gpus_[i].uuid = uuid;
    }
    info.uuid = GpuUuid(uuid);
    if (library().Has(S::kDeviceGetName)) {
      StatusOr<std::string> name =
          DeviceString(S::kDeviceGetName, dev, "reading the name of " + GpuText(gpu));
      if (name.ok()) {
        info.name = *name;
      } else {
        spdlog::warn("cannot read GPU name{}",
                     Fields().Add("gpu", uuid).Add("error", name.status().message()));
      }
    }
    if (library().Has(S::kDeviceGetMinorNumber)) {
      unsigned int minor = 0;
      r = library().Call<nvmlDeviceGetUint_fn>(S::kDeviceGetMinorNumber, dev, &minor);
      if (r == NVML_SUCCESS) info.minor = minor;
    }
    NvmlSymbol pci_sym;
    if (library().FirstBound({S::kDeviceGetPciInfoV3, S::kDeviceGetPciInfoV2, S::kDeviceGetPciInfo},
                             &pci_sym)) {
      nvmlPciInfo_t pci{};
      r = library().Call<nvmlDeviceGetPciInfo_fn>(pci_sym, dev, &pci);
      if (r == NVML_SUCCESS) {
        // _v3 fills busId; older variants only the 16-byte legacy field.
        info.pci_bus_id = CStr(pci.busId, sizeof(pci.busId));
        if (info.pci_bus_id.empty())
          info.pci_bus_id = CStr(pci.busIdLegacy, sizeof(pci.busIdLegacy));
        info.pci_device_id = pci.pciDeviceId;
      }
    }
    if (library().Has(S::kDeviceGetMemoryInfo)) {
      nvmlMemory_t mem{};
      r = library().Call<nvmlDeviceGetMemoryInfo_fn>(S::kDeviceGetMemoryInfo, dev, &mem);
      if (r == NVML_SUCCESS) info.memory_total_mib = mem.total / (1024 * 1024);
    }
    MIGD_ASSIGN_OR_RETURN(info.mig, ReadMigMode(gpu, dev));
    gpus.push_back(std::move(info));
  }
  MutexLock lock(&mu_);
  skipped_ = std::move(skipped);
  return gpus;
}

std::vector<GpuIndex> NvmlDriver::SkippedGpus() {
  MutexLock lock(&mu_);
  return skipped_;
}

StatusOr<MigModeInfo> NvmlDriver::GetMigMode(GpuIndex gpu) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  return ReadMigMode(gpu, dev);
}

StatusOr<nvmlGpuInstance_t> NvmlDriver::GiHandle(GpuIndex gpu, nvmlDevice_t dev, NvmlGiId gi) {
  nvmlGpuInstance_t h = nullptr;
  const nvmlReturn_t r = library().Call<nvmlDeviceGetGpuInstanceById_fn>(
      S::kDeviceGetGpuInstanceById, dev, gi.value(), &h);
  if (r != NVML_SUCCESS) {
    return Err(r, "looking up GI " + std::to_string(gi.value()) + " on " + GpuText(gpu));
  }
  return h;
}

StatusOr<nvmlComputeInstance_t> NvmlDriver::CiHandle(GpuIndex gpu, nvmlGpuInstance_t gih,
                                                     NvmlGiId gi, NvmlCiId ci) {
  nvmlComputeInstance_t h = nullptr;
  const nvmlReturn_t r = library().Call<nvmlGpuInstanceGetComputeInstanceById_fn>(
      S::kGpuInstanceGetComputeInstanceById, gih, ci.value(), &h);
  if (r != NVML_SUCCESS) {
    return Err(r, "looking up CI " + std::to_string(ci.value()) + " of GI " +
                      std::to_string(gi.value()) + " on " + GpuText(gpu));
  }
  return h;
}

StatusOr<ComputeInstanceInfo> NvmlDriver::DescribeCi(nvmlComputeInstance_t ci,
                                                     const std::string& what) {
  // The v1 fallback may write the old 24-byte layout without `placement`:
  // the zeroed tail then reads as "placement unknown" (size 0). Its `device`
  // is the parent GPU ("Parent device"), so the MIG UUID is not read here.
  nvmlComputeInstanceInfo_t info{};
  NvmlSymbol s = S::kComputeInstanceGetInfoV2;
  library().FirstBound({S::kComputeInstanceGetInfoV2, S::kComputeInstanceGetInfo}, &s);
  const nvmlReturn_t r = library().Call<nvmlComputeInstanceGetInfo_fn>(s, ci, &info);
  if (r != NVML_SUCCESS) return Err(r, "reading the info of " + what);
  ComputeInstanceInfo out;
  out.id = NvmlCiId(info.id);
  out.profile_id = CiProfileId(info.profileId);
  out.placement = mig::Placement{info.placement.start, info.placement.size};
  return out;
}

StatusOr<GpuInstanceInfo> NvmlDriver::CreateGi(GpuIndex gpu, GiProfileId profile,
                                               const mig::Placement& placement) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  const std::string what = "creating GI profile " + std::to_string(profile.value()) + " at " +
                           PlacementText(placement.start, placement.size) + " on " + GpuText(gpu);
  const nvmlGpuInstancePlacement_t pl{placement.start, placement.size};
  nvmlGpuInstance_t gi = nullptr;
  nvmlReturn_t r = library().Call<nvmlDeviceCreateGpuInstanceWithPlacement_fn>(
      S::kDeviceCreateGpuInstanceWithPlacement, dev, profile.value(), &pl, &gi);
  if (r != NVML_SUCCESS) return Err(r, what);

  // Anything failing from here on must not leave the new GI behind.
  auto rollback = [&](Status failure) -> Status {
    const nvmlReturn_t d = library().Call<nvmlGpuInstanceDestroy_fn>(S::kGpuInstanceDestroy, gi);
    if (d == NVML_SUCCESS) return std::move(failure).WithContext("(the new GI was destroyed)");
    spdlog::error("GI left behind after a failed create{}",
                  Fields()
                      .Add("gpu_index", gpu.value())
                      .Add("profile", profile.value())
                      .Add("placement", PlacementText(placement.start, placement.size))
                      .Add("nvml", NvmlReturnName(d)));
    return Status(failure.code(), std::string(failure.message()) + "; rolling back: " +
                                      Err(d, "destroying the new GI").ToString());
  };
  nvmlGpuInstanceInfo_t info{};
  r = library().Call<nvmlGpuInstanceGetInfo_fn>(S::kGpuInstanceGetInfo, gi, &info);
  if (r != NVML_SUCCESS) return rollback(Err(r, what + ": reading the new GI's info"));
  if (info.placement.start != placement.start || info.placement.size != placement.size ||
      info.profileId != profile.value()) {
    return rollback(InternalError(what + ": NVML reports profile " +
                                  std::to_string(info.profileId) + " at " +
                                  PlacementText(info.placement.start, info.placement.size)));
  }
  GpuInstanceInfo out;
  out.id = NvmlGiId(info.id);
  out.profile_id = GiProfileId(info.profileId);
  out.placement = mig::Placement{info.placement.start, info.placement.size};
  return out;
}

StatusOr<ComputeInstanceInfo> NvmlDriver::CreateCi(GpuIndex gpu, NvmlGiId gi) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  const std::string gi_text = "GI " + std::to_string(gi.value()) + " on " + GpuText(gpu);
  MIGD_ASSIGN_OR_RETURN(nvmlGpuInstance_t gih, GiHandle(gpu, dev, gi));
  nvmlGpuInstanceInfo_t gi_info{};
  nvmlReturn_t r = library().Call<nvmlGpuInstanceGetInfo_fn>(S::kGpuInstanceGetInfo, gih, &gi_info);
  if (r != NVML_SUCCESS) return Err(r, "reading the info of " + gi_text);
  const GiProfileId gi_profile(gi_info.profileId);

  MIGD_ASSIGN_OR_RETURN(std::vector<GiProfileInfo> profiles,
                        Profiles(gpu, dev, /*force_mode_check=*/false));
  const GiProfileInfo* gp = nullptr;
  for (const GiProfileInfo& p : profiles) {
    if (p.id == gi_profile) gp = &p;
  }
  if (gp == nullptr) {
    return InternalError(gi_text + " has GI profile id " + std::to_string(gi_profile.value()) +
                         ", which NVML did not list");
  }
  MIGD_ASSIGN_OR_RETURN(const CiProfileInfo ci_profile, DefaultCiProfile(gpu, *gp, gih));
  // The parent's UUID is needed to check the new MIG UUID; read it (once per
  // GPU) before anything is created.
  MIGD_RETURN_IF_ERROR(ParentUuid(gpu, dev).status());
  const std::string what =
      "creating CI profile " + std::to_string(ci_profile.id.value()) + " in " + gi_text;
  MutexLock mig_lock(&MigLock(gpu));
  nvmlComputeInstance_t ci = nullptr;
  r = library().Call<nvmlGpuInstanceCreateComputeInstance_fn>(S::kGpuInstanceCreateComputeInstance,
                                                              gih, ci_profile.id.value(), &ci);
  ForgetMigDevices(gpu);
  if (r != NVML_SUCCESS) return Err(r, what);
  StatusOr<ComputeInstanceInfo> info = FinishCreateCi(gpu, dev, gi, ci, gi_text);
  if (info.ok()) return info;
  return RollBackCi(gpu, gi, ci, info.status(), what);
}

StatusOr<ComputeInstanceInfo> NvmlDriver::FinishCreateCi(GpuIndex gpu, nvmlDevice_t dev,
                                                         NvmlGiId gi, nvmlComputeInstance_t ci,
                                                         const std::string& gi_text) {
  MIGD_ASSIGN_OR_RETURN(ComputeInstanceInfo info, DescribeCi(ci, "the new CI in " + gi_text));
  const MigKey key{gi.value(), info.id.value()};
  MIGD_ASSIGN_OR_RETURN(MigDeviceMap walk, WalkCovering(gpu, dev, {key}, /*fresh=*/true));
  MIGD_ASSIGN_OR_RETURN(info.mig_uuid, MigUuidOf(gpu, dev, key, walk.at(key)));
  return info;
}

Status NvmlDriver::RollBackCi(GpuIndex gpu, NvmlGiId gi, nvmlComputeInstance_t ci,
                              const Status& failure, const std::string& what) {
  // Do not leave the CI this call created behind (nvml.md §6).
  const nvmlReturn_t d =
      library().Call<nvmlComputeInstanceDestroy_fn>(S::kComputeInstanceDestroy, ci);
  ForgetMigDevices(gpu);
  if (d == NVML_SUCCESS) return failure.WithContext(what + " (the new CI was destroyed)");
  spdlog::error(
      "CI left behind after a failed create{}",
      Fields().Add("gpu_index", gpu.value()).Add("gi", gi.value()).Add("nvml", NvmlReturnName(d)));
  return Status(failure.code(), what + ": " + std::string(failure.message()) + "; rolling back: " +
                                    Err(d, "destroying the new CI").ToString());
}

Status NvmlDriver::DestroyCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  MIGD_ASSIGN_OR_RETURN(nvmlGpuInstance_t gih, GiHandle(gpu, dev, gi));
  MIGD_ASSIGN_OR_RETURN(nvmlComputeInstance_t cih, CiHandle(gpu, gih, gi, ci));
  MutexLock mig_lock(&MigLock(gpu));
  const nvmlReturn_t r =
      library().Call<nvmlComputeInstanceDestroy_fn>(S::kComputeInstanceDestroy, cih);
  ForgetMigDevices(gpu);
  if (r != NVML_SUCCESS) {
    return Err(r, "destroying CI " + std::to_string(ci.value()) + " of GI " +
                      std::to_string(gi.value()) + " on " + GpuText(gpu));
  }
  return OkStatus();
}

Status NvmlDriver::DestroyGi(GpuIndex gpu, NvmlGiId gi) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  MIGD_ASSIGN_OR_RETURN(nvmlGpuInstance_t gih, GiHandle(gpu, dev, gi));
  const nvmlReturn_t r = library().Call<nvmlGpuInstanceDestroy_fn>(S::kGpuInstanceDestroy, gih);
  if (r != NVML_SUCCESS) {
    return Err(r, "destroying GI " + std::to_string(gi.value()) + " on " + GpuText(gpu));
  }
  return OkStatus();
}

StatusOr<std::vector<nvmlGpuInstance_t>> NvmlDriver::GisOfProfile(GpuIndex gpu, nvmlDevice_t dev,
                                                                  const GiProfileInfo& p) {
  const std::string what =
      "listing GIs of profile " + std::to_string(p.id.value()) + " on " + GpuText(gpu);
  // The buffer holds the profile's instanceCount entries; *count is output
  // only ("The count of returned GPU instances").
  std::vector<nvmlGpuInstance_t> gis(std::max<uint32_t>(p.instance_count, 1));
  unsigned int count = static_cast<unsigned int>(gis.size());
  nvmlReturn_t r = library().Call<nvmlDeviceGetGpuInstances_fn>(S::kDeviceGetGpuInstances, dev,
                                                                p.id.value(), gis.data(), &count);
  for (int attempt = 0; attempt < kMaxSizeRetries && r == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    gis.resize(std::max<size_t>(count, 2 * gis.size()));
    count = static_cast<unsigned int>(gis.size());
    r = library().Call<nvmlDeviceGetGpuInstances_fn>(S::kDeviceGetGpuInstances, dev, p.id.value(),
                                                     gis.data(), &count);
  }
  if (r != NVML_SUCCESS) return Err(r, what);
  gis.resize(std::min<size_t>(count, gis.size()));
  return gis;
}

StatusOr<GpuInstanceInfo> NvmlDriver::DescribeGi(GpuIndex gpu, nvmlGpuInstance_t gih) {
  nvmlGpuInstanceInfo_t gi_info{};
  nvmlReturn_t r = library().Call<nvmlGpuInstanceGetInfo_fn>(S::kGpuInstanceGetInfo, gih, &gi_info);
  if (r != NVML_SUCCESS) return Err(r, "reading the info of a GI on " + GpuText(gpu));
  GpuInstanceInfo gi;
  gi.id = NvmlGiId(gi_info.id);
  gi.profile_id = GiProfileId(gi_info.profileId);
  gi.placement = mig::Placement{gi_info.placement.start, gi_info.placement.size};
  const std::string gi_text = "GI " + std::to_string(gi.id.value()) + " on " + GpuText(gpu);
  MIGD_ASSIGN_OR_RETURN(std::vector<CiProfileInfo> cis, CiProfiles(gpu, gi.profile_id, gih));
  for (const CiProfileInfo& c : cis) {
    std::vector<nvmlComputeInstance_t> handles(std::max<uint32_t>(c.instance_count, 1));
    unsigned int count = static_cast<unsigned int>(handles.size());
    r = library().Call<nvmlGpuInstanceGetComputeInstances_fn>(
        S::kGpuInstanceGetComputeInstances, gih, c.id.value(), handles.data(), &count);
    if (r != NVML_SUCCESS) {
      return Err(r, "listing CIs of profile " + std::to_string(c.id.value()) + " in " + gi_text);
    }
    for (unsigned int j = 0; j < count && j < handles.size(); ++j) {
      MIGD_ASSIGN_OR_RETURN(ComputeInstanceInfo ci, DescribeCi(handles[j], "a CI of " + gi_text));
      gi.compute_instances.push_back(std::move(ci));
    }
  }
  std::sort(gi.compute_instances.begin(), gi.compute_instances.end(),
            [](const ComputeInstanceInfo& a, const ComputeInstanceInfo& b) { return a.id < b.id; });
  return gi;
}

StatusOr<std::vector<GpuInstanceInfo>> NvmlDriver::ListGpuInstances(GpuIndex gpu) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  MIGD_ASSIGN_OR_RETURN(std::vector<GiProfileInfo> profiles,
                        Profiles(gpu, dev, /*force_mode_check=*/false));
  // This process's CI creates and destroys on the GPU wait until the listing
  // and its walk are done: one consistent picture.
  MutexLock mig_lock(&MigLock(gpu));
  std::vector<GpuInstanceInfo> out;
  // Every profile id, including +me, REV, GFX, -me and +me.all variants: a GI
  // of any of them occupies slices (nvml.md §6 "Inventory").
  for (const GiProfileInfo& p : profiles) {
    MIGD_ASSIGN_OR_RETURN(std::vector<nvmlGpuInstance_t> gis, GisOfProfile(gpu, dev, p));
    for (nvmlGpuInstance_t gih : gis) {
      MIGD_ASSIGN_OR_RETURN(GpuInstanceInfo gi, DescribeGi(gpu, gih));
      out.push_back(std::move(gi));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const GpuInstanceInfo& a, const GpuInstanceInfo& b) { return a.id < b.id; });
  std::vector<MigKey> wanted;
  for (const GpuInstanceInfo& gi : out) {
    for (const ComputeInstanceInfo& ci : gi.compute_instances) {
      wanted.emplace_back(gi.id.value(), ci.id.value());
    }
  }
  if (wanted.empty()) return out;
  // One walk serves every CI of the GPU; it is always fresh here, since
  // another NVML client may have changed the MIG devices since the last one.
  MIGD_ASSIGN_OR_RETURN(MigDeviceMap walk, WalkCovering(gpu, dev, wanted, /*fresh=*/true));
  for (GpuInstanceInfo& gi : out) {
    for (ComputeInstanceInfo& ci : gi.compute_instances) {
      const MigKey key{gi.id.value(), ci.id.value()};
      MIGD_ASSIGN_OR_RETURN(ci.mig_uuid, MigUuidOf(gpu, dev, key, walk.at(key)));
    }
  }
  return out;
}

StatusOr<std::vector<ProcessInfo>> NvmlDriver::ListProcesses(GpuIndex gpu, NvmlGiId gi,
                                                             NvmlCiId ci) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  const std::string what = "CI " + std::to_string(ci.value()) + " of GI " +
                           std::to_string(gi.value()) + " on " + GpuText(gpu);
  NvmlSymbol s;
  if (!library().FirstBound(
          {S::kDeviceGetComputeRunningProcessesV3, S::kDeviceGetComputeRunningProcessesV2,
           S::kDeviceGetComputeRunningProcesses},
          &s)) {
    return UnimplementedError("listing processes of " + what + ": " + library().path() +
                              " exports no nvmlDeviceGetComputeRunningProcesses symbol");
  }
  // The instance's own MIG device: the parent handle would give the
  // aggregate of the whole GPU, and only to a privileged caller (nvml.h,
  // nvmlDeviceGetComputeRunningProcesses_v3: "Per-instance information can be
  // queried by using specific MIG device handles").
  nvmlDevice_t mig_device = nullptr;
  {
    MutexLock mig_lock(&MigLock(gpu));
    StatusOr<MigDeviceMap> walk =
        WalkCovering(gpu, dev, {MigKey{gi.value(), ci.value()}}, /*fresh=*/false);
    if (!walk.ok()) return walk.status().WithContext("listing processes of " + what);
    mig_device = walk->at(MigKey{gi.value(), ci.value()}).handle;
  }
  std::vector<ProcessInfo> out;
  // Each variant with its own struct (nvml.md §3.6): v1 is 16 bytes, v2/v3 24.
  const nvmlReturn_t r =
      s == S::kDeviceGetComputeRunningProcesses
          ? QueryProcesses<nvmlProcessInfo_v1_t, nvmlDeviceGetComputeRunningProcessesV1_fn>(
                library(), s, mig_device, &out)
          : QueryProcesses<nvmlProcessInfo_t, nvmlDeviceGetComputeRunningProcesses_fn>(
                library(), s, mig_device, &out);
  if (r != NVML_SUCCESS) return Err(r, "listing processes of " + what);
  return out;
}

}  // namespace migd::driver
