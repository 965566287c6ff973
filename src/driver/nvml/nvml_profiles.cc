// NvmlDriver's GI and CI profile queries: the index walks with the v3 -> v2
// -> v1 struct fallbacks, placements, the default CI profile, and their
// caches (the rules are in nvml_driver.h).
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_status.h"
#include "driver/nvml/nvml_text.h"

namespace migd::driver {
namespace {

namespace abi = ::migd::nvml_abi;
using S = NvmlSymbol;

// Safety caps for the index walks: far above any header's PROFILE_COUNT (the
// walk goes past it: "enumerate all MIG profiles supported by NVML in a
// forward compatible way by invoking it on profile values starting from 0,
// until the API returns NVML_ERROR_INVALID_ARGUMENT"), low enough to stop a
// library that never answers INVALID_ARGUMENT.
constexpr uint32_t kMaxGiProfileIndex = 64;
constexpr uint32_t kMaxCiProfileIndex = 32;

std::string StripMigPrefix(std::string name) {
  constexpr std::string_view kPrefix = "MIG ";
  if (name.compare(0, kPrefix.size(), kPrefix) == 0) name.erase(0, kPrefix.size());
  return name;
}

bool IsGfxIndex(uint32_t index) {
  return index == abi::kGiProfile1SliceGfx || index == abi::kGiProfile2SliceGfx ||
         index == abi::kGiProfile4SliceGfx || index == abi::kGiProfile3SliceGfx;
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
    case 1:
      return abi::kCiProfile1Slice;
    case 2:
      return abi::kCiProfile2Slice;
    case 3:
      return abi::kCiProfile3Slice;
    case 4:
      return abi::kCiProfile4Slice;
    case 6:
      return abi::kCiProfile6Slice;
    case 7:
      return abi::kCiProfile7Slice;
    case 8:
      return abi::kCiProfile8Slice;
    default:
      return std::nullopt;
  }
}

}  // namespace

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
  r = library().Call<nvmlDeviceGetGpuInstanceProfileInfoV_fn>(S::kDeviceGetGpuInstanceProfileInfoV,
                                                              dev, index, &v2);
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
          S::kDeviceGetGpuInstancePossiblePlacementsV2, dev, profile.value(), buf.data(), &count);
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
    return FailedPreconditionError("MIG mode is disabled on " + GpuText(gpu) +
                                   " (pending: " + std::string(ModeName(mode.pending)) + ")");
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
    StatusOr<std::vector<mig::Placement>> placements = Placements(gpu, dev, p.id, p.instance_count);
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
    return InternalError("no CI profile spans GI profile " + std::to_string(gp.id.value()) + " (" +
                         std::to_string(gp.slice_count) + " slices) on " + GpuText(gpu));
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

}  // namespace migd::driver
