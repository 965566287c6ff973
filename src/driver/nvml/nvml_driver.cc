#include "driver/nvml/nvml_driver.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/logging.h"
#include "base/status_macros.h"
#include "driver/nvml/nvml_status.h"

namespace migd::driver {
namespace {

namespace abi = ::migd::nvml_abi;
using S = NvmlSymbol;

// Safety caps for the index walks (nvml.md §7.13): far above any header's
// PROFILE_COUNT, low enough to stop a library that never answers
// INVALID_ARGUMENT.
constexpr uint32_t kMaxGiProfileIndex = 64;
constexpr uint32_t kMaxCiProfileIndex = 32;
// Extra process-list room for the retry after INSUFFICIENT_SIZE (§7.12).
constexpr unsigned int kExtraProcessRoom = 8;
constexpr int kMaxSizeRetries = 5;

std::string CStr(const char* buf, size_t size) { return std::string(buf, strnlen(buf, size)); }

std::string StripMigPrefix(std::string name) {
  constexpr std::string_view kPrefix = "MIG ";
  if (name.compare(0, kPrefix.size(), kPrefix) == 0) name.erase(0, kPrefix.size());
  return name;
}

std::string PlacementText(uint32_t start, uint32_t size) {
  return std::to_string(start) + ":" + std::to_string(size);
}

std::string GpuText(GpuIndex gpu) { return "GPU " + std::to_string(gpu.value()); }

bool IsGfxIndex(uint32_t index) {
  return index == abi::kGiProfile1SliceGfx || index == abi::kGiProfile2SliceGfx ||
         index == abi::kGiProfile4SliceGfx || index == abi::kGiProfile3SliceGfx;
}

MigMode ToMode(unsigned int m) {
  return m == abi::kMigEnable ? MigMode::kEnabled : MigMode::kDisabled;
}

std::string_view ModeName(MigMode m) { return m == MigMode::kEnabled ? "enabled" : "disabled"; }

// The CI a plain `nvidia-smi mig -cgi … -C` creates (nvml.md §7.17): on the
// double-memory 1g GI (index 0x9) CI index 7 (1_SLICE_REV1) when offered,
// otherwise the CI whose sliceCount equals the GI's, preferring the plain
// profile over REV1/NVL variants.
const CiProfileInfo* ChooseDefaultCi(const std::vector<CiProfileInfo>& cis, uint32_t gi_slices,
                                     bool double_memory) {
  if (double_memory) {
    for (const CiProfileInfo& c : cis) {
      if (c.index.value() == abi::kCiProfile1SliceRev1) return &c;
    }
  }
  for (const CiProfileInfo& c : cis) {
    if (c.slice_count == gi_slices && c.index.value() != abi::kCiProfile1SliceRev1 &&
        c.index.value() != abi::kCiProfile7SliceNvl) {
      return &c;
    }
  }
  for (const CiProfileInfo& c : cis) {
    if (c.slice_count == gi_slices) return &c;
  }
  return nullptr;
}

// The CI profile index whose profile spans `slices` compute slices
// (NVML_COMPUTE_INSTANCE_PROFILE_<N>_SLICE, nvml.md §5.3); nullopt if none.
std::optional<uint32_t> CiIndexForSlices(uint32_t slices) {
  switch (slices) {
    case 1: return abi::kCiProfile1Slice;
    case 2: return abi::kCiProfile2Slice;
    case 3: return abi::kCiProfile3Slice;
    case 4: return abi::kCiProfile4Slice;
    case 6: return abi::kCiProfile6Slice;
    case 7: return abi::kCiProfile7Slice;
    case 8: return abi::kCiProfile8Slice;
    default: return std::nullopt;
  }
}

template <typename Info, typename Fn>
nvmlReturn_t QueryProcesses(const NvmlLibrary& lib, NvmlSymbol s, nvmlDevice_t dev,
                            std::vector<ProcessInfo>* out) {
  // Size query first (*infoCount = 0, NULL buffer): SUCCESS means nothing runs.
  unsigned int needed = 0;
  nvmlReturn_t r = lib.Call<Fn>(s, dev, &needed, static_cast<Info*>(nullptr));
  for (int attempt = 0; attempt < kMaxSizeRetries && r == NVML_ERROR_INSUFFICIENT_SIZE;
       ++attempt) {
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
  const nvmlReturn_t r = library().Call<nvmlDeviceGetMigMode_fn>(S::kDeviceGetMigMode, dev,
                                                                  &current, &pending);
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
        if (info.pci_bus_id.empty()) info.pci_bus_id = CStr(pci.busIdLegacy, sizeof(pci.busIdLegacy));
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

nvmlReturn_t NvmlDriver::QueryGiProfile(nvmlDevice_t dev, uint32_t index, int* accepted,
                                        GiProfileInfo* out, bool force_v1) {
  out->index = GiProfileIndex(index);
  if (!library().Has(S::kDeviceGetGpuInstanceProfileInfoV) ||
      (force_v1 && library().Has(S::kDeviceGetGpuInstanceProfileInfo))) {
    // Pre-11.6 driver: the unversioned v1 struct, no name, no capabilities.
    nvmlGpuInstanceProfileInfo_t v1{};
    const nvmlReturn_t r = library().Call<nvmlDeviceGetGpuInstanceProfileInfo_fn>(
        S::kDeviceGetGpuInstanceProfileInfo, dev, index, &v1);
    if (r != NVML_SUCCESS) return r;
    out->id = GiProfileId(v1.id);
    out->slice_count = v1.sliceCount;
    out->instance_count = v1.instanceCount;
    out->multiprocessor_count = v1.multiprocessorCount;
    out->copy_engines = v1.copyEngineCount;
    out->decoders = v1.decoderCount;
    out->encoders = v1.encoderCount;
    out->jpeg = v1.jpegCount;
    out->ofa = v1.ofaCount;
    out->memory_mib = v1.memorySizeMB;
    out->p2p_supported = v1.isP2pSupported != 0;
    out->gfx_capable = IsGfxIndex(index);
    out->info_version = 1;
    *accepted = 1;
    return r;
  }
  nvmlReturn_t r = NVML_ERROR_INVALID_ARGUMENT;
  if (*accepted == 0 || *accepted == 3) {
    nvmlGpuInstanceProfileInfo_v3_t v3{};
    v3.version = abi::kGpuInstanceProfileInfoV3;
    r = library().Call<nvmlDeviceGetGpuInstanceProfileInfoV_fn>(
        S::kDeviceGetGpuInstanceProfileInfoV, dev, index,
        reinterpret_cast<nvmlGpuInstanceProfileInfo_v2_t*>(&v3));
    if (r == NVML_SUCCESS) {
      out->id = GiProfileId(v3.id);
      out->name = StripMigPrefix(CStr(v3.name, sizeof(v3.name)));
      out->slice_count = v3.sliceCount;
      out->instance_count = v3.instanceCount;
      out->multiprocessor_count = v3.multiprocessorCount;
      out->copy_engines = v3.copyEngineCount;
      out->decoders = v3.decoderCount;
      out->encoders = v3.encoderCount;
      out->jpeg = v3.jpegCount;
      out->ofa = v3.ofaCount;
      out->memory_mib = v3.memorySizeMB;
      out->p2p_supported = (v3.capabilities & abi::kGiCapsP2p) != 0;
      out->gfx_capable = (v3.capabilities & abi::kGiCapsGfx) != 0;
      out->info_version = 3;
      *accepted = 3;
      return r;
    }
    // Once v3 is known to work here, INVALID_ARGUMENT means "past the last
    // index", not "unknown version": no v2 retry.
    if (*accepted == 3) return r;
    if (r != NVML_ERROR_INVALID_ARGUMENT && r != NVML_ERROR_ARGUMENT_VERSION_MISMATCH) return r;
  }
  nvmlGpuInstanceProfileInfo_v2_t v2{};
  v2.version = abi::kGpuInstanceProfileInfoV2;
  r = library().Call<nvmlDeviceGetGpuInstanceProfileInfoV_fn>(
      S::kDeviceGetGpuInstanceProfileInfoV, dev, index, &v2);
  if (r != NVML_SUCCESS) return r;
  out->id = GiProfileId(v2.id);
  out->name = StripMigPrefix(CStr(v2.name, sizeof(v2.name)));
  out->slice_count = v2.sliceCount;
  out->instance_count = v2.instanceCount;
  out->multiprocessor_count = v2.multiprocessorCount;
  out->copy_engines = v2.copyEngineCount;
  out->decoders = v2.decoderCount;
  out->encoders = v2.encoderCount;
  out->jpeg = v2.jpegCount;
  out->ofa = v2.ofaCount;
  out->memory_mib = v2.memorySizeMB;
  out->p2p_supported = v2.isP2pSupported != 0;
  out->gfx_capable = IsGfxIndex(index);
  out->info_version = 2;
  *accepted = 2;
  return r;
}

nvmlReturn_t NvmlDriver::QueryCiProfile(nvmlGpuInstance_t gi, uint32_t index, int* accepted,
                                        CiProfileInfo* out) {
  out->index = CiProfileIndex(index);
  const unsigned int eng = abi::kCiEngineProfileShared;
  if (!library().Has(S::kGpuInstanceGetComputeInstanceProfileInfoV)) {
    nvmlComputeInstanceProfileInfo_t v1{};
    const nvmlReturn_t r = library().Call<nvmlGpuInstanceGetComputeInstanceProfileInfo_fn>(
        S::kGpuInstanceGetComputeInstanceProfileInfo, gi, index, eng, &v1);
    if (r != NVML_SUCCESS) return r;
    out->id = CiProfileId(v1.id);
    out->slice_count = v1.sliceCount;
    out->instance_count = v1.instanceCount;
    out->multiprocessor_count = v1.multiprocessorCount;
    out->info_version = 1;
    *accepted = 1;
    return r;
  }
  nvmlReturn_t r = NVML_ERROR_INVALID_ARGUMENT;
  if (*accepted == 0 || *accepted == 3) {
    nvmlComputeInstanceProfileInfo_v3_t v3{};
    v3.version = abi::kComputeInstanceProfileInfoV3;
    r = library().Call<nvmlGpuInstanceGetComputeInstanceProfileInfoV_fn>(
        S::kGpuInstanceGetComputeInstanceProfileInfoV, gi, index, eng,
        reinterpret_cast<nvmlComputeInstanceProfileInfo_v2_t*>(&v3));
    if (r == NVML_SUCCESS) {
      out->id = CiProfileId(v3.id);
      out->name = StripMigPrefix(CStr(v3.name, sizeof(v3.name)));
      out->slice_count = v3.sliceCount;
      out->instance_count = v3.instanceCount;
      out->multiprocessor_count = v3.multiprocessorCount;
      out->info_version = 3;
      *accepted = 3;
      return r;
    }
    if (*accepted == 3) return r;
    if (r != NVML_ERROR_INVALID_ARGUMENT && r != NVML_ERROR_ARGUMENT_VERSION_MISMATCH) return r;
  }
  nvmlComputeInstanceProfileInfo_v2_t v2{};
  v2.version = abi::kComputeInstanceProfileInfoV2;
  r = library().Call<nvmlGpuInstanceGetComputeInstanceProfileInfoV_fn>(
      S::kGpuInstanceGetComputeInstanceProfileInfoV, gi, index, eng, &v2);
  if (r != NVML_SUCCESS) return r;
  out->id = CiProfileId(v2.id);
  out->name = StripMigPrefix(CStr(v2.name, sizeof(v2.name)));
  out->slice_count = v2.sliceCount;
  out->instance_count = v2.instanceCount;
  out->multiprocessor_count = v2.multiprocessorCount;
  out->info_version = 2;
  *accepted = 2;
  return r;
}

StatusOr<std::vector<mig::Placement>> NvmlDriver::Placements(GpuIndex gpu, nvmlDevice_t dev,
                                                             GiProfileId profile,
                                                             uint32_t instance_count) {
  const std::string what = "reading the placements of GI profile " +
                            std::to_string(profile.value()) + " on " + GpuText(gpu);
  std::vector<nvmlGpuInstancePlacement_t> buf;
  unsigned int count = 0;
  nvmlReturn_t r;
  if (library().Has(S::kDeviceGetGpuInstancePossiblePlacementsV2)) {
    // NULL buffer: count query.
    r = library().Call<nvmlDeviceGetGpuInstancePossiblePlacements_fn>(
        S::kDeviceGetGpuInstancePossiblePlacementsV2, dev, profile.value(),
        static_cast<nvmlGpuInstancePlacement_t*>(nullptr), &count);
    if (r != NVML_SUCCESS) return Err(r, what);
    r = NVML_ERROR_INSUFFICIENT_SIZE;
    for (int attempt = 0; attempt < kMaxSizeRetries && r == NVML_ERROR_INSUFFICIENT_SIZE;
         ++attempt) {
      buf.assign(count, nvmlGpuInstancePlacement_t{});
      if (buf.empty()) return std::vector<mig::Placement>{};
      r = library().Call<nvmlDeviceGetGpuInstancePossiblePlacements_fn>(
          S::kDeviceGetGpuInstancePossiblePlacementsV2, dev, profile.value(), buf.data(),
          &count);
      if (r == NVML_ERROR_INSUFFICIENT_SIZE) count = std::max<unsigned int>(count, 2 * buf.size());
    }
  } else {
    // v1 (11.2/11.3): no count query; the buffer must hold every placement. A
    // placement list never has more entries than memory slices, and never
    // fewer than instanceCount.
    buf.assign(std::max<uint32_t>(instance_count, mig::kMaxMemorySlices),
               nvmlGpuInstancePlacement_t{});
    count = static_cast<unsigned int>(buf.size());
    r = library().Call<nvmlDeviceGetGpuInstancePossiblePlacements_fn>(
        S::kDeviceGetGpuInstancePossiblePlacements, dev, profile.value(), buf.data(), &count);
  }
  if (r != NVML_SUCCESS) return Err(r, what);
  std::vector<mig::Placement> out;
  for (unsigned int i = 0; i < count && i < buf.size(); ++i) {
    out.push_back(mig::Placement{buf[i].start, buf[i].size});
  }
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<std::vector<GiProfileInfo>> NvmlDriver::WalkGiProfiles(GpuIndex gpu, nvmlDevice_t dev) {
  std::vector<GiProfileInfo> out;
  int accepted = 0;
  for (uint32_t index = 0; index < kMaxGiProfileIndex; ++index) {
    GiProfileInfo p;
    nvmlReturn_t r = QueryGiProfile(dev, index, &accepted, &p);
    // Asked twice before the profile counts as absent: the table is cached
    // while MIG mode stays on, so one transient NOT_SUPPORTED would drop the
    // profile (and every request for it) until migd restarts.
    if (r == NVML_ERROR_NOT_SUPPORTED) r = QueryGiProfile(dev, index, &accepted, &p);
    if (r == NVML_ERROR_INVALID_ARGUMENT) break;  // past the last index this driver knows
    if (r == NVML_ERROR_NOT_SUPPORTED) continue;  // profile absent on this GPU
    if (r != NVML_SUCCESS) {
      return Err(r, "reading GI profile index " + std::to_string(index) + " on " + GpuText(gpu));
    }
    MIGD_ASSIGN_OR_RETURN(p.placements, Placements(gpu, dev, p.id, p.instance_count));
    out.push_back(std::move(p));
  }
  return out;
}

StatusOr<std::vector<GiProfileInfo>> NvmlDriver::Profiles(GpuIndex gpu, nvmlDevice_t dev,
                                                          bool force_mode_check) {
  if (!force_mode_check) {
    MutexLock lock(&mu_);
    auto it = gpus_.find(gpu.value());
    if (it != gpus_.end() && it->second.profiles_valid) return it->second.profiles;
  }
  MIGD_ASSIGN_OR_RETURN(MigModeInfo mode, ReadMigMode(gpu, dev));
  if (!mode.supported) return FailedPreconditionError(GpuText(gpu) + " does not support MIG");
  if (mode.current != MigMode::kEnabled) {
    return FailedPreconditionError("MIG mode is disabled on " + GpuText(gpu) + " (pending: " +
                                   std::string(ModeName(mode.pending)) + ")");
  }
  {
    MutexLock lock(&mu_);
    auto it = gpus_.find(gpu.value());
    if (it != gpus_.end() && it->second.profiles_valid) return it->second.profiles;
  }
  MIGD_ASSIGN_OR_RETURN(std::vector<GiProfileInfo> profiles, WalkGiProfiles(gpu, dev));
  MutexLock lock(&mu_);
  GpuCache& cache = gpus_[gpu.value()];
  cache.profiles = profiles;
  cache.profiles_valid = true;
  return profiles;
}

StatusOr<std::vector<GiProfileInfo>> NvmlDriver::GetGiProfiles(GpuIndex gpu) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  return Profiles(gpu, dev, /*force_mode_check=*/true);
}

StatusOr<std::vector<GiProfileInfo>> NvmlDriver::GetGiProfilesWithoutMig(GpuIndex gpu) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  std::vector<GiProfileInfo> out;
  int accepted = 0;
  for (uint32_t index = 0; index < kMaxGiProfileIndex; ++index) {
    GiProfileInfo p;
    const nvmlReturn_t r = QueryGiProfile(dev, index, &accepted, &p, /*force_v1=*/true);
    if (r == NVML_ERROR_INVALID_ARGUMENT) break;
    if (r == NVML_ERROR_NOT_SUPPORTED) continue;
    if (r != NVML_SUCCESS) {
      return Err(r, "reading GI profile index " + std::to_string(index) + " on " + GpuText(gpu) +
                        " with MIG mode off");
    }
    StatusOr<std::vector<mig::Placement>> placements =
        Placements(gpu, dev, p.id, p.instance_count);
    if (placements.ok()) p.placements = *std::move(placements);
    out.push_back(std::move(p));
  }
  return out;
}

StatusOr<std::vector<mig::Placement>> NvmlDriver::GetGiPossiblePlacements(GpuIndex gpu,
                                                                          GiProfileId profile) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  uint32_t instance_count = 0;
  if (!library().Has(S::kDeviceGetGpuInstancePossiblePlacementsV2)) {
    // The v1 buffer is sized from the profile's instanceCount.
    MutexLock lock(&mu_);
    auto it = gpus_.find(gpu.value());
    if (it != gpus_.end() && it->second.profiles_valid) {
      for (const GiProfileInfo& p : it->second.profiles) {
        if (p.id == profile) instance_count = p.instance_count;
      }
    }
  }
  return Placements(gpu, dev, profile, instance_count);
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

StatusOr<std::vector<CiProfileInfo>> NvmlDriver::CiProfiles(GpuIndex gpu, GiProfileId gi_profile,
                                                            nvmlGpuInstance_t gi) {
  {
    MutexLock lock(&mu_);
    auto it = gpus_.find(gpu.value());
    if (it != gpus_.end()) {
      auto ci = it->second.ci_profiles.find(gi_profile.value());
      if (ci != it->second.ci_profiles.end()) return ci->second;
    }
  }
  std::vector<CiProfileInfo> out;
  int accepted = 0;
  for (uint32_t index = 0; index < kMaxCiProfileIndex; ++index) {
    CiProfileInfo c;
    const nvmlReturn_t r = QueryCiProfile(gi, index, &accepted, &c);
    if (r == NVML_ERROR_INVALID_ARGUMENT) break;
    if (r == NVML_ERROR_NOT_SUPPORTED) continue;  // e.g. a CI larger than the GI
    if (r != NVML_SUCCESS) {
      return Err(r, "reading CI profile index " + std::to_string(index) + " of GI profile " +
                        std::to_string(gi_profile.value()) + " on " + GpuText(gpu));
    }
    out.push_back(std::move(c));
  }
  MutexLock lock(&mu_);
  gpus_[gpu.value()].ci_profiles[gi_profile.value()] = out;
  return out;
}

StatusOr<CiProfileInfo> NvmlDriver::DefaultCiProfile(GpuIndex gpu, const GiProfileInfo& gp,
                                                     nvmlGpuInstance_t gi) {
  const bool double_memory = gp.index.value() == abi::kGiProfile1SliceRev2;
  {
    MutexLock lock(&mu_);
    GpuCache& cache = gpus_[gpu.value()];
    auto hit = cache.default_ci.find(gp.id.value());
    if (hit != cache.default_ci.end()) return hit->second;
    auto walked = cache.ci_profiles.find(gp.id.value());
    if (walked != cache.ci_profiles.end()) {
      const CiProfileInfo* c = ChooseDefaultCi(walked->second, gp.slice_count, double_memory);
      if (c != nullptr) return cache.default_ci[gp.id.value()] = *c;
    }
  }
  std::vector<uint32_t> candidates;
  if (double_memory) candidates.push_back(abi::kCiProfile1SliceRev1);
  if (std::optional<uint32_t> index = CiIndexForSlices(gp.slice_count)) {
    candidates.push_back(*index);
  }
  int accepted = 0;
  for (uint32_t index : candidates) {
    CiProfileInfo c;
    const nvmlReturn_t r = QueryCiProfile(gi, index, &accepted, &c);
    if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_NOT_SUPPORTED) continue;
    if (r != NVML_SUCCESS) {
      return Err(r, "reading CI profile index " + std::to_string(index) + " of GI profile " +
                        std::to_string(gp.id.value()) + " on " + GpuText(gpu));
    }
    if (c.slice_count != gp.slice_count) continue;
    MutexLock lock(&mu_);
    return gpus_[gpu.value()].default_ci[gp.id.value()] = c;
  }
  // An unexpected table: fall back to walking every CI profile index.
  MIGD_ASSIGN_OR_RETURN(std::vector<CiProfileInfo> cis, CiProfiles(gpu, gp.id, gi));
  const CiProfileInfo* c = ChooseDefaultCi(cis, gp.slice_count, double_memory);
  if (c == nullptr) {
    return InternalError("no CI profile spans GI profile " + std::to_string(gp.id.value()) +
                         " (" + std::to_string(gp.slice_count) + " slices) on " + GpuText(gpu));
  }
  MutexLock lock(&mu_);
  return gpus_[gpu.value()].default_ci[gp.id.value()] = *c;
}

StatusOr<std::vector<CiProfileInfo>> NvmlDriver::GetCiProfiles(GpuIndex gpu, NvmlGiId gi) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  MIGD_ASSIGN_OR_RETURN(nvmlGpuInstance_t gih, GiHandle(gpu, dev, gi));
  nvmlGpuInstanceInfo_t info{};
  const nvmlReturn_t r =
      library().Call<nvmlGpuInstanceGetInfo_fn>(S::kGpuInstanceGetInfo, gih, &info);
  if (r != NVML_SUCCESS) {
    return Err(r, "reading the info of GI " + std::to_string(gi.value()) + " on " + GpuText(gpu));
  }
  return CiProfiles(gpu, GiProfileId(info.profileId), gih);
}

StatusOr<GpuInstanceInfo> NvmlDriver::CreateGi(GpuIndex gpu, GiProfileId profile,
                                               const mig::Placement& placement) {
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(token, gpu));
  const std::string what = "creating GI profile " + std::to_string(profile.value()) + " at " +
                           PlacementText(placement.start, placement.size) + " on " +
                           GpuText(gpu);
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
    return Status(failure.code(),
                  std::string(failure.message()) + "; rolling back: " +
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
  r = library().Call<nvmlGpuInstanceCreateComputeInstance_fn>(
      S::kGpuInstanceCreateComputeInstance, gih, ci_profile.id.value(), &ci);
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
  spdlog::error("CI left behind after a failed create{}",
                Fields().Add("gpu_index", gpu.value()).Add("gi", gi.value())
                    .Add("nvml", NvmlReturnName(d)));
  return Status(failure.code(), what + ": " + std::string(failure.message()) +
                                    "; rolling back: " +
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

StatusOr<std::vector<nvmlGpuInstance_t>> NvmlDriver::GisOfProfile(GpuIndex gpu,
                                                                  nvmlDevice_t dev,
                                                                  const GiProfileInfo& p) {
  const std::string what =
      "listing GIs of profile " + std::to_string(p.id.value()) + " on " + GpuText(gpu);
  // The buffer holds the profile's instanceCount entries; *count is output
  // only ("The count of returned GPU instances").
  std::vector<nvmlGpuInstance_t> gis(std::max<uint32_t>(p.instance_count, 1));
  unsigned int count = static_cast<unsigned int>(gis.size());
  nvmlReturn_t r = library().Call<nvmlDeviceGetGpuInstances_fn>(S::kDeviceGetGpuInstances, dev,
                                                                 p.id.value(), gis.data(), &count);
  for (int attempt = 0; attempt < kMaxSizeRetries && r == NVML_ERROR_INSUFFICIENT_SIZE;
       ++attempt) {
    gis.resize(std::max<size_t>(count, 2 * gis.size()));
    count = static_cast<unsigned int>(gis.size());
    r = library().Call<nvmlDeviceGetGpuInstances_fn>(S::kDeviceGetGpuInstances, dev,
                                                     p.id.value(), gis.data(), &count);
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
  if (!library().FirstBound({S::kDeviceGetComputeRunningProcessesV3,
                             S::kDeviceGetComputeRunningProcessesV2,
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
