#include "driver/nvml/fake_nvml.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace migd::driver::fake_nvml {
namespace {

namespace abi = ::migd::nvml_abi;

struct Profile {
  unsigned int index, id, slices, instances, mem_mib, sms;
  const char* name;
  std::vector<nvmlGpuInstancePlacement_t> placements;
};

const std::vector<Profile>& Profiles() {
  static const std::vector<Profile>* p = new std::vector<Profile>{
      {0x0, 19, 1, 7, 4864, 14, "MIG 1g.5gb", {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}},
      {0x2, 9, 3, 2, 19968, 42, "MIG 3g.20gb", {{0, 4}, {4, 4}}},
      {0x4, 0, 7, 1, 40192, 98, "MIG 7g.40gb", {{0, 8}}},
      {0x9, 15, 1, 4, 9856, 14, "MIG 1g.10gb", {{0, 2}, {2, 2}, {4, 2}, {6, 2}}},
  };
  return *p;
}
constexpr unsigned int kLastIndex = 0x11;  // INVALID_ARGUMENT above it

const Profile* ById(unsigned int id) {
  for (const Profile& p : Profiles()) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

struct Ci {
  unsigned int id, profile_id, slices;
  std::vector<unsigned int> pids;
};
struct Gi {
  unsigned int id, profile_id;
  nvmlGpuInstancePlacement_t placement;
  std::map<unsigned int, Ci> cis;
};

struct State {
  std::mutex mu;
  Options options;
  int init_calls = 0, shutdown_calls = 0, init_depth = 0;
  std::map<unsigned int, Gi> gis;
  unsigned int pending_extra_pid = 0;
};
State& St() {
  static State* s = new State;
  return *s;
}

// Handles are small integers in disguise; the fake never dereferences them.
constexpr uintptr_t kGpuBase = 0x100, kGiBase = 0x1000, kCiBase = 0x2000, kMigBase = 0x4000;
nvmlDevice_t GpuHandle(unsigned int i) { return reinterpret_cast<nvmlDevice_t>(kGpuBase + i); }
nvmlGpuInstance_t GiHandle(unsigned int gi) {
  return reinterpret_cast<nvmlGpuInstance_t>(kGiBase + gi);
}
nvmlComputeInstance_t CiHandle(unsigned int gi, unsigned int ci) {
  return reinterpret_cast<nvmlComputeInstance_t>(kCiBase + gi * 16 + ci);
}
nvmlDevice_t MigHandle(unsigned int gi, unsigned int ci) {
  return reinterpret_cast<nvmlDevice_t>(kMigBase + gi * 16 + ci);
}
uintptr_t U(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Common prologue: injected failure, init check.
bool Fail(const char* fn, nvmlReturn_t* r) {
  State& s = St();
  auto it = s.options.fail_next.find(fn);
  if (it != s.options.fail_next.end()) {
    *r = it->second;
    s.options.fail_next.erase(it);
    return true;
  }
  if (s.init_depth == 0) {
    *r = NVML_ERROR_UNINITIALIZED;
    return true;
  }
  return false;
}
#define FAKE_PROLOGUE(name)                         \
  std::lock_guard<std::mutex> lock(St().mu);        \
  State& s = St();                                  \
  (void)s;                                          \
  {                                                 \
    nvmlReturn_t fail_r;                            \
    if (Fail(name, &fail_r)) return fail_r;         \
  }

bool GpuOk(nvmlDevice_t d) {
  return U(d) >= kGpuBase && U(d) < kGpuBase + St().options.gpu_count;
}
Gi* FindGi(nvmlGpuInstance_t h) {
  auto it = St().gis.find(static_cast<unsigned int>(U(h) - kGiBase));
  return U(h) >= kGiBase && U(h) < kCiBase && it != St().gis.end() ? &it->second : nullptr;
}
Ci* FindCi(nvmlComputeInstance_t h, Gi** gi_out) {
  if (U(h) < kCiBase || U(h) >= kMigBase) return nullptr;
  const uintptr_t v = U(h) - kCiBase;
  auto gi = St().gis.find(static_cast<unsigned int>(v / 16));
  if (gi == St().gis.end()) return nullptr;
  auto ci = gi->second.cis.find(static_cast<unsigned int>(v % 16));
  if (ci == gi->second.cis.end()) return nullptr;
  if (gi_out) *gi_out = &gi->second;
  return &ci->second;
}
Ci* FindMig(nvmlDevice_t h) {
  if (U(h) < kMigBase) return nullptr;
  const uintptr_t v = U(h) - kMigBase;
  auto gi = St().gis.find(static_cast<unsigned int>(v / 16));
  if (gi == St().gis.end()) return nullptr;
  auto ci = gi->second.cis.find(static_cast<unsigned int>(v % 16));
  return ci == gi->second.cis.end() ? nullptr : &ci->second;
}

void CopyStr(char* dst, unsigned int len, const std::string& src) {
  std::snprintf(dst, len, "%s", src.c_str());
}

// CI index -> (slices, id); index 7 exists only in the double-memory GI.
bool CiProfile(unsigned int gi_profile, unsigned int gi_slices, unsigned int index,
               unsigned int* slices) {
  static const unsigned int kSlices[] = {1, 2, 3, 4, 7, 8, 6, 1};
  if (index >= 8) return false;
  if (index == 5 || index == 6) return false;
  if (index == 7) {
    *slices = 1;
    return gi_profile == 15;
  }
  *slices = kSlices[index];
  return kSlices[index] <= gi_slices;
}

// --- the fake entry points ---
nvmlReturn_t Init() {
  std::lock_guard<std::mutex> lock(St().mu);
  ++St().init_calls;
  if (St().options.init_result != NVML_SUCCESS) return St().options.init_result;
  ++St().init_depth;
  return NVML_SUCCESS;
}
nvmlReturn_t Shutdown() {
  std::lock_guard<std::mutex> lock(St().mu);
  ++St().shutdown_calls;
  if (St().init_depth > 0) --St().init_depth;
  return NVML_SUCCESS;
}
const char* ErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    default: return "Fake error";
  }
}
nvmlReturn_t DriverVersion(char* v, unsigned int len) {
  FAKE_PROLOGUE("nvmlSystemGetDriverVersion");
  CopyStr(v, len, "580.95.05");
  return NVML_SUCCESS;
}
nvmlReturn_t NvmlVersion(char* v, unsigned int len) {
  FAKE_PROLOGUE("nvmlSystemGetNVMLVersion");
  CopyStr(v, len, "13.580.95.05");
  return NVML_SUCCESS;
}
nvmlReturn_t Count(unsigned int* n) {
  FAKE_PROLOGUE("nvmlDeviceGetCount_v2");
  *n = s.options.gpu_count;
  return NVML_SUCCESS;
}
nvmlReturn_t HandleByIndex(unsigned int i, nvmlDevice_t* d) {
  FAKE_PROLOGUE("nvmlDeviceGetHandleByIndex_v2");
  if (i >= s.options.gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
  if (static_cast<int>(i) == s.options.no_permission_gpu) return NVML_ERROR_NO_PERMISSION;
  *d = GpuHandle(i);
  return NVML_SUCCESS;
}
nvmlReturn_t Uuid(nvmlDevice_t d, char* buf, unsigned int len) {
  FAKE_PROLOGUE("nvmlDeviceGetUUID");
  if (len < abi::kDeviceUuidV2BufferSize) return NVML_ERROR_INSUFFICIENT_SIZE;
  if (GpuOk(d)) {
    CopyStr(buf, len, "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(U(d) - kGpuBase));
    return NVML_SUCCESS;
  }
  if (FindMig(d) != nullptr) {
    char text[64];
    std::snprintf(text, sizeof(text), "MIG-%08x-0000-5000-0000-000000000000",
                  static_cast<unsigned int>(U(d) - kMigBase));
    CopyStr(buf, len, text);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}
nvmlReturn_t Name(nvmlDevice_t d, char* buf, unsigned int len) {
  FAKE_PROLOGUE("nvmlDeviceGetName");
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  CopyStr(buf, len, "NVIDIA A100-SXM4-40GB");
  return NVML_SUCCESS;
}
nvmlReturn_t Minor(nvmlDevice_t d, unsigned int* m) {
  FAKE_PROLOGUE("nvmlDeviceGetMinorNumber");
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  *m = static_cast<unsigned int>(U(d) - kGpuBase);
  return NVML_SUCCESS;
}
nvmlReturn_t Pci(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  FAKE_PROLOGUE("nvmlDeviceGetPciInfo_v3");
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  CopyStr(pci->busId, sizeof(pci->busId), "00000000:17:00.0");
  pci->pciDeviceId = 0x20B010DE;
  return NVML_SUCCESS;
}
nvmlReturn_t Memory(nvmlDevice_t d, nvmlMemory_t* m) {
  FAKE_PROLOGUE("nvmlDeviceGetMemoryInfo");
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  m->total = 40960ull << 20;
  return NVML_SUCCESS;
}
nvmlReturn_t MigMode(nvmlDevice_t d, unsigned int* cur, unsigned int* pending) {
  FAKE_PROLOGUE("nvmlDeviceGetMigMode");
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!s.options.mig_supported) return NVML_ERROR_NOT_SUPPORTED;
  *cur = *pending = s.options.mig_enabled ? 1 : 0;
  return NVML_SUCCESS;
}
const Profile* ProfileByIndex(unsigned int index) {
  for (const Profile& p : Profiles()) {
    if (p.index == index) return &p;
  }
  return nullptr;
}
nvmlReturn_t ProfileInfoV(nvmlDevice_t d, unsigned int index,
                          nvmlGpuInstanceProfileInfo_v2_t* info) {
  FAKE_PROLOGUE("nvmlDeviceGetGpuInstanceProfileInfoV");
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  const bool v3 = info->version == abi::kGpuInstanceProfileInfoV3;
  if (!(v3 && s.options.max_profile_info_version >= 3) &&
      info->version != abi::kGpuInstanceProfileInfoV2) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!s.options.mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  if (index > kLastIndex) return NVML_ERROR_INVALID_ARGUMENT;
  const Profile* p = ProfileByIndex(index);
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  if (v3) {
    auto* o = reinterpret_cast<nvmlGpuInstanceProfileInfo_v3_t*>(info);
    o->id = p->id;
    o->sliceCount = p->slices;
    o->instanceCount = p->instances;
    o->multiprocessorCount = p->sms;
    o->copyEngineCount = p->slices;
    o->memorySizeMB = p->mem_mib;
    CopyStr(o->name, sizeof(o->name), p->name);
    o->capabilities = abi::kGiCapsP2p;
  } else {
    info->id = p->id;
    info->isP2pSupported = 1;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->sms;
    info->copyEngineCount = p->slices;
    info->memorySizeMB = p->mem_mib;
    CopyStr(info->name, sizeof(info->name), p->name);
  }
  return NVML_SUCCESS;
}
nvmlReturn_t ProfileInfoV1(nvmlDevice_t d, unsigned int index,
                           nvmlGpuInstanceProfileInfo_t* info) {
  FAKE_PROLOGUE("nvmlDeviceGetGpuInstanceProfileInfo");
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  if (index > kLastIndex) return NVML_ERROR_INVALID_ARGUMENT;
  const Profile* p = ProfileByIndex(index);
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  info->id = p->id;
  info->isP2pSupported = 1;
  info->sliceCount = p->slices;
  info->instanceCount = p->instances;
  info->multiprocessorCount = p->sms;
  info->copyEngineCount = p->slices;
  info->memorySizeMB = p->mem_mib;
  return NVML_SUCCESS;
}
nvmlReturn_t PlacementsImpl(nvmlDevice_t d, unsigned int id, nvmlGpuInstancePlacement_t* out,
                            unsigned int* count, bool v2) {
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  const Profile* p = ById(id);
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  const unsigned int n = static_cast<unsigned int>(p->placements.size());
  if (out == nullptr) {
    if (!v2) return NVML_ERROR_INVALID_ARGUMENT;
    *count = n;
    return NVML_SUCCESS;
  }
  if (v2 && *count < n) return NVML_ERROR_INSUFFICIENT_SIZE;
  for (unsigned int i = 0; i < n; ++i) out[i] = p->placements[i];
  *count = n;
  return NVML_SUCCESS;
}
nvmlReturn_t PlacementsV2(nvmlDevice_t d, unsigned int id, nvmlGpuInstancePlacement_t* out,
                          unsigned int* count) {
  FAKE_PROLOGUE("nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  return PlacementsImpl(d, id, out, count, true);
}
nvmlReturn_t PlacementsV1(nvmlDevice_t d, unsigned int id, nvmlGpuInstancePlacement_t* out,
                          unsigned int* count) {
  FAKE_PROLOGUE("nvmlDeviceGetGpuInstancePossiblePlacements");
  return PlacementsImpl(d, id, out, count, false);
}
nvmlReturn_t CreateGi(nvmlDevice_t d, unsigned int id, const nvmlGpuInstancePlacement_t* pl,
                      nvmlGpuInstance_t* out) {
  FAKE_PROLOGUE("nvmlDeviceCreateGpuInstanceWithPlacement");
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!s.options.mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  const Profile* p = ById(id);
  if (p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  bool listed = false;
  for (const auto& q : p->placements) listed |= q.start == pl->start && q.size == pl->size;
  if (!listed) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int same = 0;
  for (const auto& [gid, gi] : s.gis) {
    if (gi.placement.start < pl->start + pl->size && pl->start < gi.placement.start + gi.placement.size) {
      return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    same += gi.profile_id == id;
  }
  if (same >= p->instances) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  unsigned int gid = 1;
  while (s.gis.count(gid)) ++gid;
  s.gis[gid] = Gi{gid, id, *pl, {}};
  *out = GiHandle(gid);
  return NVML_SUCCESS;
}
nvmlReturn_t DestroyGi(nvmlGpuInstance_t h) {
  FAKE_PROLOGUE("nvmlGpuInstanceDestroy");
  Gi* gi = FindGi(h);
  if (gi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gi->cis.empty()) return NVML_ERROR_IN_USE;
  s.gis.erase(gi->id);
  return NVML_SUCCESS;
}
nvmlReturn_t GetGis(nvmlDevice_t d, unsigned int id, nvmlGpuInstance_t* out,
                    unsigned int* count) {
  FAKE_PROLOGUE("nvmlDeviceGetGpuInstances");
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!s.options.mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  unsigned int n = 0;
  for (const auto& [gid, gi] : s.gis) {
    if (gi.profile_id == id) out[n++] = GiHandle(gid);
  }
  *count = n;
  return NVML_SUCCESS;
}
nvmlReturn_t GiById(nvmlDevice_t d, unsigned int id, nvmlGpuInstance_t* out) {
  FAKE_PROLOGUE("nvmlDeviceGetGpuInstanceById");
  if (!GpuOk(d)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!s.options.mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
  if (!s.gis.count(id)) return NVML_ERROR_NOT_FOUND;
  *out = GiHandle(id);
  return NVML_SUCCESS;
}
nvmlReturn_t GiInfo(nvmlGpuInstance_t h, nvmlGpuInstanceInfo_t* info) {
  FAKE_PROLOGUE("nvmlGpuInstanceGetInfo");
  Gi* gi = FindGi(h);
  if (gi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = GpuHandle(0);
  info->id = gi->id;
  info->profileId = gi->profile_id;
  info->placement = gi->placement;
  return NVML_SUCCESS;
}
nvmlReturn_t CiProfileImpl(nvmlGpuInstance_t h, unsigned int index, unsigned int* id,
                           unsigned int* slices) {
  Gi* gi = FindGi(h);
  if (gi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (index > 8) return NVML_ERROR_INVALID_ARGUMENT;
  if (!CiProfile(gi->profile_id, ById(gi->profile_id)->slices, index, slices)) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *id = index;
  return NVML_SUCCESS;
}
nvmlReturn_t CiProfileV(nvmlGpuInstance_t h, unsigned int index, unsigned int eng,
                        nvmlComputeInstanceProfileInfo_v2_t* info) {
  FAKE_PROLOGUE("nvmlGpuInstanceGetComputeInstanceProfileInfoV");
  if (eng != 0) return NVML_ERROR_INVALID_ARGUMENT;
  const bool v3 = info->version == abi::kComputeInstanceProfileInfoV3;
  if (!(v3 && s.options.max_profile_info_version >= 3) &&
      info->version != abi::kComputeInstanceProfileInfoV2) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  unsigned int id = 0, slices = 0;
  const nvmlReturn_t r = CiProfileImpl(h, index, &id, &slices);
  if (r != NVML_SUCCESS) return r;
  info->id = id;
  info->sliceCount = slices;
  info->instanceCount = 7 / slices;
  info->multiprocessorCount = 14 * slices;
  CopyStr(info->name, sizeof(info->name), "MIG " + std::to_string(slices) + "c");
  return NVML_SUCCESS;
}
nvmlReturn_t CiProfileV1(nvmlGpuInstance_t h, unsigned int index, unsigned int eng,
                         nvmlComputeInstanceProfileInfo_t* info) {
  FAKE_PROLOGUE("nvmlGpuInstanceGetComputeInstanceProfileInfo");
  if (eng != 0) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int id = 0, slices = 0;
  const nvmlReturn_t r = CiProfileImpl(h, index, &id, &slices);
  if (r != NVML_SUCCESS) return r;
  info->id = id;
  info->sliceCount = slices;
  info->instanceCount = 7 / slices;
  info->multiprocessorCount = 14 * slices;
  return NVML_SUCCESS;
}
nvmlReturn_t CreateCi(nvmlGpuInstance_t h, unsigned int id, nvmlComputeInstance_t* out) {
  FAKE_PROLOGUE("nvmlGpuInstanceCreateComputeInstance");
  Gi* gi = FindGi(h);
  if (gi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int slices = 0;
  if (!CiProfile(gi->profile_id, ById(gi->profile_id)->slices, id, &slices)) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  if (!gi->cis.empty()) return NVML_ERROR_INSUFFICIENT_RESOURCES;  // full-size CIs only
  gi->cis[0] = Ci{0, id, slices, {}};
  *out = CiHandle(gi->id, 0);
  return NVML_SUCCESS;
}
nvmlReturn_t DestroyCi(nvmlComputeInstance_t h) {
  FAKE_PROLOGUE("nvmlComputeInstanceDestroy");
  Gi* gi = nullptr;
  Ci* ci = FindCi(h, &gi);
  if (ci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!ci->pids.empty()) return NVML_ERROR_IN_USE;
  gi->cis.erase(ci->id);
  return NVML_SUCCESS;
}
nvmlReturn_t GetCis(nvmlGpuInstance_t h, unsigned int id, nvmlComputeInstance_t* out,
                    unsigned int* count) {
  FAKE_PROLOGUE("nvmlGpuInstanceGetComputeInstances");
  Gi* gi = FindGi(h);
  if (gi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int n = 0;
  for (const auto& [cid, ci] : gi->cis) {
    if (ci.profile_id == id) out[n++] = CiHandle(gi->id, cid);
  }
  *count = n;
  return NVML_SUCCESS;
}
nvmlReturn_t CiById(nvmlGpuInstance_t h, unsigned int id, nvmlComputeInstance_t* out) {
  FAKE_PROLOGUE("nvmlGpuInstanceGetComputeInstanceById");
  Gi* gi = FindGi(h);
  if (gi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gi->cis.count(id)) return NVML_ERROR_NOT_FOUND;
  *out = CiHandle(gi->id, id);
  return NVML_SUCCESS;
}
nvmlReturn_t CiInfoImpl(nvmlComputeInstance_t h, nvmlComputeInstanceInfo_t* info, bool v2) {
  Gi* gi = nullptr;
  Ci* ci = FindCi(h, &gi);
  if (ci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = MigHandle(gi->id, ci->id);
  info->gpuInstance = GiHandle(gi->id);
  info->id = ci->id;
  info->profileId = ci->profile_id;
  if (v2) info->placement = {0, ci->slices};
  return NVML_SUCCESS;
}
nvmlReturn_t CiInfoV2(nvmlComputeInstance_t h, nvmlComputeInstanceInfo_t* info) {
  FAKE_PROLOGUE("nvmlComputeInstanceGetInfo_v2");
  return CiInfoImpl(h, info, true);
}
nvmlReturn_t CiInfoV1(nvmlComputeInstance_t h, nvmlComputeInstanceInfo_t* info) {
  FAKE_PROLOGUE("nvmlComputeInstanceGetInfo");
  return CiInfoImpl(h, info, false);
}
template <typename Info>
nvmlReturn_t ProcessesImpl(nvmlDevice_t d, unsigned int* count, Info* infos) {
  Ci* ci = FindMig(d);
  if (ci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  State& s = St();
  const unsigned int n = static_cast<unsigned int>(ci->pids.size());
  if (*count < n || infos == nullptr) {
    *count = n;
    if (n == 0) return NVML_SUCCESS;
    // The list grows between the size query and the fill (nvml.md §7.12).
    if (s.pending_extra_pid != 0) {
      ci->pids.push_back(std::exchange(s.pending_extra_pid, 0));
    }
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned int i = 0; i < n; ++i) {
    infos[i] = Info{};
    infos[i].pid = ci->pids[i];
    infos[i].usedGpuMemory = 1ull << 20;
  }
  *count = n;
  return NVML_SUCCESS;
}
nvmlReturn_t ProcessesV3(nvmlDevice_t d, unsigned int* count, nvmlProcessInfo_t* infos) {
  FAKE_PROLOGUE("nvmlDeviceGetComputeRunningProcesses_v3");
  return ProcessesImpl(d, count, infos);
}
nvmlReturn_t ProcessesV1(nvmlDevice_t d, unsigned int* count, nvmlProcessInfo_v1_t* infos) {
  FAKE_PROLOGUE("nvmlDeviceGetComputeRunningProcesses");
  return ProcessesImpl(d, count, infos);
}

template <typename F>
void* P(F f) {
  return reinterpret_cast<void*>(f);
}

}  // namespace

void Reset(const Options& options) {
  std::lock_guard<std::mutex> lock(St().mu);
  State& s = St();
  s.options = options;
  s.init_calls = s.shutdown_calls = s.init_depth = 0;
  s.gis.clear();
  s.pending_extra_pid = 0;
}

void* Resolve(const char* name, void*) {
  static const std::map<std::string, void*>* table = new std::map<std::string, void*>{
      {"nvmlInit_v2", P(&Init)},
      {"nvmlShutdown", P(&Shutdown)},
      {"nvmlErrorString", P(&ErrorString)},
      {"nvmlSystemGetDriverVersion", P(&DriverVersion)},
      {"nvmlSystemGetNVMLVersion", P(&NvmlVersion)},
      {"nvmlDeviceGetCount_v2", P(&Count)},
      {"nvmlDeviceGetHandleByIndex_v2", P(&HandleByIndex)},
      {"nvmlDeviceGetUUID", P(&Uuid)},
      {"nvmlDeviceGetName", P(&Name)},
      {"nvmlDeviceGetMinorNumber", P(&Minor)},
      {"nvmlDeviceGetPciInfo_v3", P(&Pci)},
      {"nvmlDeviceGetMemoryInfo", P(&Memory)},
      {"nvmlDeviceGetMigMode", P(&MigMode)},
      {"nvmlDeviceGetGpuInstanceProfileInfoV", P(&ProfileInfoV)},
      {"nvmlDeviceGetGpuInstanceProfileInfo", P(&ProfileInfoV1)},
      {"nvmlDeviceGetGpuInstancePossiblePlacements_v2", P(&PlacementsV2)},
      {"nvmlDeviceGetGpuInstancePossiblePlacements", P(&PlacementsV1)},
      {"nvmlDeviceCreateGpuInstanceWithPlacement", P(&CreateGi)},
      {"nvmlGpuInstanceDestroy", P(&DestroyGi)},
      {"nvmlDeviceGetGpuInstances", P(&GetGis)},
      {"nvmlDeviceGetGpuInstanceById", P(&GiById)},
      {"nvmlGpuInstanceGetInfo", P(&GiInfo)},
      {"nvmlGpuInstanceGetComputeInstanceProfileInfoV", P(&CiProfileV)},
      {"nvmlGpuInstanceGetComputeInstanceProfileInfo", P(&CiProfileV1)},
      {"nvmlGpuInstanceCreateComputeInstance", P(&CreateCi)},
      {"nvmlComputeInstanceDestroy", P(&DestroyCi)},
      {"nvmlGpuInstanceGetComputeInstances", P(&GetCis)},
      {"nvmlGpuInstanceGetComputeInstanceById", P(&CiById)},
      {"nvmlComputeInstanceGetInfo_v2", P(&CiInfoV2)},
      {"nvmlComputeInstanceGetInfo", P(&CiInfoV1)},
      {"nvmlDeviceGetComputeRunningProcesses_v3", P(&ProcessesV3)},
      {"nvmlDeviceGetComputeRunningProcesses", P(&ProcessesV1)},
  };
  {
    std::lock_guard<std::mutex> lock(St().mu);
    if (St().options.hidden_symbols.count(name)) return nullptr;
  }
  auto it = table->find(name);
  return it == table->end() ? nullptr : it->second;
}

void FailNext(const std::string& function, nvmlReturn_t r) {
  std::lock_guard<std::mutex> lock(St().mu);
  St().options.fail_next[function] = r;
}

int InitCalls() {
  std::lock_guard<std::mutex> lock(St().mu);
  return St().init_calls;
}
int ShutdownCalls() {
  std::lock_guard<std::mutex> lock(St().mu);
  return St().shutdown_calls;
}
int LiveGiCount() {
  std::lock_guard<std::mutex> lock(St().mu);
  return static_cast<int>(St().gis.size());
}
void AttachProcess(unsigned int gi, unsigned int ci, unsigned int pid) {
  std::lock_guard<std::mutex> lock(St().mu);
  St().gis.at(gi).cis.at(ci).pids.push_back(pid);
}
void GrowProcessesAfterCountQuery(unsigned int extra_pid) {
  std::lock_guard<std::mutex> lock(St().mu);
  St().pending_extra_pid = extra_pid;
}

}  // namespace migd::driver::fake_nvml
