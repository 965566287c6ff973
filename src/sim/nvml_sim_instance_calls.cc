// libnvidia-ml-sim.so: the bodies of the GPU-instance and compute-instance
// calls (profile info in the v1/v2/v3 layouts, placements, create, destroy,
// listings, instance info). sim/nvml_sim_calls.h.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "sim/nvml_sim_calls.h"

namespace migd::sim::lib {
namespace {

template <size_t N>
void CopyName(char (&dst)[N], const std::string& s) {
  std::memset(dst, 0, N);
  std::memcpy(dst, s.data(), std::min(s.size(), N - 1));
}

const mig::CiProfile* FindCiProfileById(const mig::GiProfile& gi, CiProfileId id) {
  for (const mig::CiProfile& cp : gi.ci_profiles) {
    if (cp.id == id) return &cp;
  }
  return nullptr;
}

// The GI profile `id` of the GPU's model, if this library knows it: the R470
// library knows only the first 8 profile indices.
const mig::GiProfile* KnownProfileById(const Ctx& c, const SimGpu& gpu, GiProfileId id) {
  const mig::GiProfile* p = c.m.ModelOf(gpu).FindProfileById(id);
  if (p == nullptr || p->index.value() > kMaxGiProfileIndex) return nullptr;
  return p;
}

void FillGiV1(const mig::GiProfile& p, nvmlGpuInstanceProfileInfo_t* o) {
  *o = {};
  o->id = p.id.value();
  o->isP2pSupported = 0;
  o->sliceCount = p.slice_count;
  o->instanceCount = p.instance_count;
  o->multiprocessorCount = p.sm_count;
  o->copyEngineCount = p.engines.copy_engines;
  o->decoderCount = p.engines.decoders;
  o->encoderCount = p.engines.encoders;
  o->jpegCount = p.engines.jpeg;
  o->ofaCount = p.engines.ofa;
  o->memorySizeMB = p.memory_mib;
}

// Writes the v2 or v3 layout, chosen by `version`, into the caller's buffer.
void FillGiV(const mig::GiProfile& p, unsigned int version, void* out) {
  nvmlGpuInstanceProfileInfo_t v1{};
  FillGiV1(p, &v1);
  if (version == nvml_abi::kGpuInstanceProfileInfoV3) {
    nvmlGpuInstanceProfileInfo_v3_t v3{};
    v3.version = version;
    v3.id = v1.id;
    v3.sliceCount = v1.sliceCount;
    v3.instanceCount = v1.instanceCount;
    v3.multiprocessorCount = v1.multiprocessorCount;
    v3.copyEngineCount = v1.copyEngineCount;
    v3.decoderCount = v1.decoderCount;
    v3.encoderCount = v1.encoderCount;
    v3.jpegCount = v1.jpegCount;
    v3.ofaCount = v1.ofaCount;
    v3.memorySizeMB = v1.memorySizeMB;
    CopyName(v3.name, "MIG " + p.name);
    v3.capabilities = p.variant == mig::Variant::kGfx ? nvml_abi::kGiCapsGfx : 0;
    std::memcpy(out, &v3, sizeof(v3));
    return;
  }
  nvmlGpuInstanceProfileInfo_v2_t v2{};
  v2.version = version;
  v2.id = v1.id;
  v2.isP2pSupported = 0;
  v2.sliceCount = v1.sliceCount;
  v2.instanceCount = v1.instanceCount;
  v2.multiprocessorCount = v1.multiprocessorCount;
  v2.copyEngineCount = v1.copyEngineCount;
  v2.decoderCount = v1.decoderCount;
  v2.encoderCount = v1.encoderCount;
  v2.jpegCount = v1.jpegCount;
  v2.ofaCount = v1.ofaCount;
  v2.memorySizeMB = v1.memorySizeMB;
  CopyName(v2.name, "MIG " + p.name);
  std::memcpy(out, &v2, sizeof(v2));
}

bool AcceptedGiVersion(const Ctx& c, unsigned int version) {
  return version == nvml_abi::kGpuInstanceProfileInfoV2 ||
         (version == nvml_abi::kGpuInstanceProfileInfoV3 &&
          c.config().profile_info_max_version >= 3);
}

bool AcceptedCiVersion(const Ctx& c, unsigned int version) {
  return version == nvml_abi::kComputeInstanceProfileInfoV2 ||
         (version == nvml_abi::kComputeInstanceProfileInfoV3 &&
          c.config().profile_info_max_version >= 3);
}

nvmlComputeInstanceProfileInfo_t CiV1(const mig::GiProfile& gi, const mig::CiProfile& ci) {
  nvmlComputeInstanceProfileInfo_t o{};
  o.id = ci.id.value();
  o.sliceCount = ci.slice_count;
  o.instanceCount = ci.instance_count;
  o.multiprocessorCount = gi.slice_count == 0 ? 0 : gi.sm_count * ci.slice_count / gi.slice_count;
  o.sharedCopyEngineCount = gi.engines.copy_engines;
  o.sharedDecoderCount = gi.engines.decoders;
  o.sharedEncoderCount = gi.engines.encoders;
  o.sharedJpegCount = gi.engines.jpeg;
  o.sharedOfaCount = gi.engines.ofa;
  return o;
}

void FillCiV(const mig::GiProfile& gi, const mig::CiProfile& ci, unsigned int version, void* out) {
  const nvmlComputeInstanceProfileInfo_t v1 = CiV1(gi, ci);
  nvmlComputeInstanceProfileInfo_v3_t v3{};
  v3.version = version;
  v3.id = v1.id;
  v3.sliceCount = v1.sliceCount;
  v3.instanceCount = v1.instanceCount;
  v3.multiprocessorCount = v1.multiprocessorCount;
  v3.sharedCopyEngineCount = v1.sharedCopyEngineCount;
  v3.sharedDecoderCount = v1.sharedDecoderCount;
  v3.sharedEncoderCount = v1.sharedEncoderCount;
  v3.sharedJpegCount = v1.sharedJpegCount;
  v3.sharedOfaCount = v1.sharedOfaCount;
  CopyName(v3.name, "MIG " + CiProfileName(gi, ci));
  v3.capabilities = gi.variant == mig::Variant::kGfx ? nvml_abi::kCiCapsGfx : 0;
  // v2 is v3 without the trailing capabilities word.
  std::memcpy(out, &v3,
              version == nvml_abi::kComputeInstanceProfileInfoV3
                  ? sizeof(nvmlComputeInstanceProfileInfo_v3_t)
                  : sizeof(nvmlComputeInstanceProfileInfo_v2_t));
}

// The GI and CI profile a CI profile query names.
nvmlReturn_t FindCiProfile(const Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile,
                           unsigned int eng_profile, const mig::GiProfile** gi_out,
                           const mig::CiProfile** ci_out) {
  std::optional<Resolved> r = c.Gi(gpu_instance);
  if (!r) return NVML_ERROR_INVALID_ARGUMENT;
  if (profile >= nvml_abi::kCiProfileCount) return NVML_ERROR_INVALID_ARGUMENT;
  if (eng_profile != nvml_abi::kCiEngineProfileShared) return NVML_ERROR_INVALID_ARGUMENT;
  const mig::GiProfile* gp = &c.m.GiProfileOf(*r->gpu, *r->gi);
  const mig::CiProfile* cp = gp->FindCiByIndex(CiProfileIndex(profile));
  if (cp == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *gi_out = gp;
  *ci_out = cp;
  return NVML_SUCCESS;
}

}  // namespace

std::string CiProfileName(const mig::GiProfile& gi, const mig::CiProfile& ci) {
  if (ci.slice_count >= gi.slice_count) return gi.name;
  return std::to_string(ci.slice_count) + "c." + gi.name;
}

nvmlReturn_t GiProfileInfoV1(const Ctx& c, nvmlDevice_t device, unsigned int profile,
                             nvmlGpuInstanceProfileInfo_t* info) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (profile > kMaxGiProfileIndex) return NVML_ERROR_INVALID_ARGUMENT;
  // 12.4+ doc: NOT_SUPPORTED "If device doesn't support MIG", so it answers
  // with MIG disabled; the 11.4 doc (R470): "doesn't have MIG mode enabled".
  if (kLegacy && !r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
  const mig::GiProfile* p = c.m.ModelOf(*r->gpu).FindProfileByIndex(GiProfileIndex(profile));
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  FillGiV1(*p, info);
  return NVML_SUCCESS;
}

nvmlReturn_t GiProfileInfoV(Ctx& c, nvmlDevice_t device, unsigned int profile, bool by_id,
                            nvmlGpuInstanceProfileInfo_v2_t* info) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int version = 0;
  std::memcpy(&version, info, sizeof(version));
  if (!AcceptedGiVersion(c, version)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
  const mig::GpuModel& model = c.m.ModelOf(*r->gpu);
  const mig::GiProfile* p = nullptr;
  if (by_id) {
    p = model.FindProfileById(GiProfileId(profile));
  } else {
    if (profile > kMaxGiProfileIndex) return NVML_ERROR_INVALID_ARGUMENT;
    p = model.FindProfileByIndex(GiProfileIndex(profile));
  }
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  FillGiV(*p, version, info);
  return NVML_SUCCESS;
}

nvmlReturn_t GiPlacements(Ctx& c, nvmlDevice_t device, unsigned int profile_id,
                          nvmlGpuInstancePlacement_t* placements, unsigned int* count, bool v2) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // _v2 answers "regardless of whether MIG is enabled or not" (13.x doc); the
  // 11.4 doc of _v2 and the v1 call need MIG mode on.
  if ((!v2 || kLegacy) && !r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
  const mig::GiProfile* p = KnownProfileById(c, *r->gpu, GiProfileId(profile_id));
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  const auto n = static_cast<unsigned int>(p->placements.size());
  if (placements == nullptr) {
    if (!v2) return NVML_ERROR_INVALID_ARGUMENT;  // no count query before _v2
    *count = n;
    return NVML_SUCCESS;
  }
  // `count` is output only ("Returns number of allowed placements"): the
  // buffer "must be large enough to accommodate the placements supported by
  // the profile", whatever *count held.
  for (unsigned int i = 0; i < n; ++i) {
    placements[i] = {p->placements[i].start, p->placements[i].size};
  }
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t GiRemainingCapacity(const Ctx& c, nvmlDevice_t device, unsigned int profile_id,
                                 unsigned int* count) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (r->gpu->mig_current && KnownProfileById(c, *r->gpu, GiProfileId(profile_id)) == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  SimOr<uint32_t> cap = c.m.GiRemainingCapacity(r->gpu->index, GiProfileId(profile_id));
  if (!cap.ok()) return cap.code();
  *count = *cap;
  return NVML_SUCCESS;
}

Outcome CreateGi(Ctx& c, nvmlDevice_t device, unsigned int profile_id,
                 const nvmlGpuInstancePlacement_t* placement, nvmlGpuInstance_t* gpu_instance) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || gpu_instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (r->gpu->mig_current && KnownProfileById(c, *r->gpu, GiProfileId(profile_id)) == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  std::optional<mig::Placement> where;
  if (placement != nullptr) where = mig::Placement{placement->start, placement->size};
  SimOr<SimGi> gi = c.m.CreateGi(r->gpu->index, GiProfileId(profile_id), where);
  if (!gi.ok()) return gi.code();
  *gpu_instance = c.GiHandle(*r->gpu, *gi);
  return Outcome(NVML_SUCCESS, true);
}

Outcome DestroyGi(Ctx& c, nvmlGpuInstance_t gpu_instance) {
  std::optional<Resolved> r = c.Gi(gpu_instance);
  if (!r) return NVML_ERROR_INVALID_ARGUMENT;
  return Mutation(c.m.DestroyGi(r->gpu->index, r->gi->id));
}

nvmlReturn_t GetGis(Ctx& c, nvmlDevice_t device, unsigned int profile_id,
                    nvmlGpuInstance_t* gpu_instances, unsigned int* count) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || gpu_instances == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
  if (KnownProfileById(c, *r->gpu, GiProfileId(profile_id)) == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  // "the buffer must be large enough to accommodate the instances supported
  // by the profile" (instanceCount bounds how many GIs of one profile exist);
  // *count is output only.
  unsigned int n = 0;
  for (const SimGi& gi : r->gpu->gpu_instances) {
    if (gi.profile_id.value() == profile_id) gpu_instances[n++] = c.GiHandle(*r->gpu, gi);
  }
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t GetGiById(Ctx& c, nvmlDevice_t device, unsigned int id,
                       nvmlGpuInstance_t* gpu_instance) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || gpu_instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
  const SimGi* gi = c.m.FindGi(r->gpu->index, NvmlGiId(id));
  if (gi == nullptr) return NVML_ERROR_NOT_FOUND;
  *gpu_instance = c.GiHandle(*r->gpu, *gi);
  return NVML_SUCCESS;
}

nvmlReturn_t GiInfo(Ctx& c, nvmlGpuInstance_t gpu_instance, nvmlGpuInstanceInfo_t* info) {
  std::optional<Resolved> r = c.Gi(gpu_instance);
  if (!r || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = c.GpuHandle(*r->gpu);  // "Parent device"
  info->id = r->gi->id.value();
  info->profileId = r->gi->profile_id.value();
  info->placement = {r->gi->placement.start, r->gi->placement.size};
  return NVML_SUCCESS;
}

nvmlReturn_t CiProfileInfoV1(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile,
                             unsigned int eng_profile, nvmlComputeInstanceProfileInfo_t* info) {
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const mig::GiProfile* gp = nullptr;
  const mig::CiProfile* cp = nullptr;
  const nvmlReturn_t r = FindCiProfile(c, gpu_instance, profile, eng_profile, &gp, &cp);
  if (r != NVML_SUCCESS) return r;
  *info = CiV1(*gp, *cp);
  return NVML_SUCCESS;
}

nvmlReturn_t CiProfileInfoV(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile,
                            unsigned int eng_profile, nvmlComputeInstanceProfileInfo_v2_t* info) {
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int version = 0;
  std::memcpy(&version, info, sizeof(version));
  if (!c.Gi(gpu_instance)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!AcceptedCiVersion(c, version)) return NVML_ERROR_INVALID_ARGUMENT;
  const mig::GiProfile* gp = nullptr;
  const mig::CiProfile* cp = nullptr;
  const nvmlReturn_t r = FindCiProfile(c, gpu_instance, profile, eng_profile, &gp, &cp);
  if (r != NVML_SUCCESS) return r;
  FillCiV(*gp, *cp, version, info);
  return NVML_SUCCESS;
}

nvmlReturn_t CiRemainingCapacity(const Ctx& c, nvmlGpuInstance_t gpu_instance,
                                 unsigned int profile_id, unsigned int* count) {
  std::optional<Resolved> r = c.Gi(gpu_instance);
  if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  SimOr<uint32_t> cap = c.m.CiRemainingCapacity(r->gpu->index, r->gi->id, CiProfileId(profile_id));
  if (!cap.ok()) return cap.code();
  *count = *cap;
  return NVML_SUCCESS;
}

nvmlReturn_t CiPlacements(const Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
                          nvmlComputeInstancePlacement_t* placements, unsigned int* count) {
  std::optional<Resolved> r = c.Gi(gpu_instance);
  if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const mig::CiProfile* cp =
      FindCiProfileById(c.m.GiProfileOf(*r->gpu, *r->gi), CiProfileId(profile_id));
  if (cp == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  const auto n = static_cast<unsigned int>(cp->placements.size());
  if (placements == nullptr) {
    *count = n;
    return NVML_SUCCESS;
  }
  // `count` is output only, as for the GI placements.
  for (unsigned int i = 0; i < n; ++i) {
    placements[i] = {cp->placements[i].start, cp->placements[i].size};
  }
  *count = n;
  return NVML_SUCCESS;
}

Outcome CreateCi(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
                 const nvmlComputeInstancePlacement_t* placement,
                 nvmlComputeInstance_t* compute_instance) {
  std::optional<Resolved> r = c.Gi(gpu_instance);
  if (!r || compute_instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::optional<mig::Placement> where;
  if (placement != nullptr) where = mig::Placement{placement->start, placement->size};
  SimOr<SimCi> ci = c.m.CreateCi(r->gpu->index, r->gi->id, CiProfileId(profile_id), where);
  if (!ci.ok()) return ci.code();
  const SimGi* gi = c.m.FindGi(r->gpu->index, r->gi->id);
  *compute_instance = c.CiHandle(*r->gpu, *gi, *ci);
  c.NoteNewCi(*r->gpu, *ci);
  return Outcome(NVML_SUCCESS, true);
}

Outcome DestroyCi(Ctx& c, nvmlComputeInstance_t compute_instance) {
  std::optional<Resolved> r = c.Ci(compute_instance);
  if (!r) return NVML_ERROR_INVALID_ARGUMENT;
  return Mutation(c.m.DestroyCi(r->gpu->index, r->gi->id, r->ci->id));
}

nvmlReturn_t GetCis(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
                    nvmlComputeInstance_t* compute_instances, unsigned int* count) {
  std::optional<Resolved> r = c.Gi(gpu_instance);
  if (!r || compute_instances == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // nvml.h: NOT_SUPPORTED "If profileId isn't supported" (by this GI).
  if (FindCiProfileById(c.m.GiProfileOf(*r->gpu, *r->gi), CiProfileId(profile_id)) == nullptr) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  unsigned int n = 0;
  for (const SimCi& ci : r->gi->compute_instances) {
    if (ci.profile_id.value() == profile_id) {
      compute_instances[n++] = c.CiHandle(*r->gpu, *r->gi, ci);
    }
  }
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t GetCiById(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int id,
                       nvmlComputeInstance_t* compute_instance) {
  std::optional<Resolved> r = c.Gi(gpu_instance);
  if (!r || compute_instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
  const SimCi* ci = c.m.FindCi(r->gpu->index, r->gi->id, NvmlCiId(id));
  if (ci == nullptr) return NVML_ERROR_NOT_FOUND;
  *compute_instance = c.CiHandle(*r->gpu, *r->gi, *ci);
  return NVML_SUCCESS;
}

nvmlReturn_t CiInfo(Ctx& c, nvmlComputeInstance_t compute_instance, nvmlComputeInstanceInfo_t* out,
                    bool v1) {
  std::optional<Resolved> r = c.Ci(compute_instance);
  if (!r || out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlComputeInstanceInfo_t info{};
  // nvml.h: "nvmlDevice_t device; //!< Parent device" -- the GPU, not the
  // MIG device (which only GetMigDeviceHandleByIndex / GetHandleByUUID give).
  info.device = c.GpuHandle(*r->gpu);
  info.gpuInstance = c.GiHandle(*r->gpu, *r->gi);
  info.id = r->ci->id.value();
  info.profileId = r->ci->profile_id.value();
  info.placement = {r->ci->placement.start, r->ci->placement.size};
  // The unsuffixed 11.1 call's struct ends before `placement` (24 bytes).
  std::memcpy(out, &info, v1 ? offsetof(nvmlComputeInstanceInfo_t, placement) : sizeof(info));
  return NVML_SUCCESS;
}

}  // namespace migd::sim::lib
