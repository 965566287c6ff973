// libnvidia-ml-sim.so: the bodies of the device calls (identity, PCI,
// memory, MIG mode, MIG device handles, processes). sim/nvml_sim_calls.h.
#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/nvml_sim_calls.h"

namespace migd::sim::lib {
namespace {

absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string GpuName(const Ctx& c, const SimGpu& gpu) {
  const mig::GpuModel& model = c.m.ModelOf(gpu);
  return model.names.empty() ? model.key : model.names[0];
}

std::string DeviceName(const Ctx& c, const Resolved& r) {
  if (!r.is_mig()) return GpuName(c, *r.gpu);
  const mig::GiProfile& gp = c.m.GiProfileOf(*r.gpu, *r.gi);
  return GpuName(c, *r.gpu) + " MIG " + CiProfileName(gp, c.m.CiProfileOf(*r.gpu, *r.gi, *r.ci));
}

template <size_t N>
void CopyName(char (&dst)[N], const std::string& s) {
  std::memset(dst, 0, N);
  std::memcpy(dst, s.data(), std::min(s.size(), N - 1));
}

struct PciFields {
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t function = 0;
  friend bool operator==(const PciFields&, const PciFields&) = default;
};

// "[domain:]bus:device.function", hex, any case. nullopt if malformed.
std::optional<PciFields> ParsePciBusId(std::string_view s) {
  const std::vector<absl::string_view> parts = absl::StrSplit(Av(s), ':');
  if (parts.size() < 2 || parts.size() > 3) return std::nullopt;
  auto hex = [](absl::string_view t, uint32_t* out) {
    return !t.empty() && t.size() <= 8 && absl::SimpleHexAtoi(t, out);
  };
  PciFields f;
  size_t i = 0;
  if (parts.size() == 3 && !hex(parts[i++], &f.domain)) return std::nullopt;
  if (!hex(parts[i++], &f.bus)) return std::nullopt;
  const std::vector<absl::string_view> dev_fn = absl::StrSplit(parts[i], '.');
  if (dev_fn.size() != 2 || !hex(dev_fn[0], &f.device) || !hex(dev_fn[1], &f.function)) {
    return std::nullopt;
  }
  return f;
}

uint64_t UsedBytes(const SimGi& gi) {
  uint64_t used = 0;
  for (const SimCi& ci : gi.compute_instances) {
    for (const SimProcess& p : ci.processes) used += p.used_gpu_memory;
  }
  return used;
}

// total, used of a device in bytes.
std::pair<uint64_t, uint64_t> DeviceMemory(const Ctx& c, const Resolved& r) {
  constexpr uint64_t kMiB = 1024 * 1024;
  if (r.is_mig()) {
    const uint64_t total = c.m.GiProfileOf(*r.gpu, *r.gi).memory_mib * kMiB;
    return {total, std::min(total, UsedBytes(*r.gi))};
  }
  const uint64_t total = c.m.ModelOf(*r.gpu).memory_mib * kMiB;
  uint64_t used = 0;
  for (const SimGi& gi : r.gpu->gpu_instances) used += UsedBytes(gi);
  return {total, std::min(total, used)};
}

struct ProcRow {
  uint32_t pid;
  uint64_t used;
  uint32_t gi;
  uint32_t ci;
};

std::vector<ProcRow> DeviceProcesses(const Resolved& r) {
  std::vector<ProcRow> rows;
  auto add_ci = [&](const SimGi& gi, const SimCi& ci) {
    for (const SimProcess& p : ci.processes) {
      rows.push_back({p.pid, p.used_gpu_memory, gi.id.value(), ci.id.value()});
    }
  };
  if (r.is_mig()) {
    add_ci(*r.gi, *r.ci);
  } else {
    for (const SimGi& gi : r.gpu->gpu_instances) {
      for (const SimCi& ci : gi.compute_instances) add_ci(gi, ci);
    }
  }
  return rows;
}

// Parses "MIG-GPU-<gpu uuid>/<gi>/<ci>" (the pre-R470 MIG UUID form).
std::optional<std::tuple<std::string, uint32_t, uint32_t>> ParseLegacyMigUuid(std::string_view s) {
  if (!s.starts_with("MIG-GPU-")) return std::nullopt;
  const std::vector<absl::string_view> parts = absl::StrSplit(Av(s.substr(4)), '/');
  uint32_t gi = 0;
  uint32_t ci = 0;
  if (parts.size() != 3 || parts[0].empty() || parts[1].size() > 2 || parts[2].size() > 2 ||
      !absl::SimpleAtoi(parts[1], &gi) || !absl::SimpleAtoi(parts[2], &ci)) {
    return std::nullopt;
  }
  return std::make_tuple(std::string(parts[0]), gi, ci);
}

// The CI a legacy-form UUID names, if the knob lets it be looked up.
std::optional<CiLocation> FindByLegacyUuid(const Ctx& c, std::string_view want,
                                           nvmlReturn_t* refused) {
  auto legacy = ParseLegacyMigUuid(want);
  if (!legacy) return std::nullopt;
  // Whether the pre-R470 form is still accepted is not in the header.
  switch (c.config().legacy_mig_uuid) {
    case LegacyMigUuidLookup::kAccepted:
      break;
    case LegacyMigUuidLookup::kNotFound:
      *refused = NVML_ERROR_NOT_FOUND;
      return std::nullopt;
    case LegacyMigUuidLookup::kInvalidArgument:
      *refused = NVML_ERROR_INVALID_ARGUMENT;
      return std::nullopt;
  }
  const auto& [gpu_uuid, gi, ci] = *legacy;
  for (const SimGpu& gpu : c.m.state().gpus) {
    if (absl::EqualsIgnoreCase(Av(gpu.uuid.value()), gpu_uuid) &&
        c.m.FindCi(gpu.index, NvmlGiId(gi), NvmlCiId(ci)) != nullptr) {
      return CiLocation{gpu.index, NvmlGiId(gi), NvmlCiId(ci)};
    }
  }
  return std::nullopt;
}

}  // namespace

nvmlReturn_t CopyString(const std::string& s, char* buf, unsigned int length) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < s.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t GetCount(const Ctx& c, unsigned int* count) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned int>(c.m.state().gpus.size());
  return NVML_SUCCESS;
}

nvmlReturn_t GetHandleByIndex(Ctx& c, unsigned int index, nvmlDevice_t* device) {
  if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const SimGpu* gpu = c.m.FindGpu(GpuIndex(index));
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu->permission) return NVML_ERROR_NO_PERMISSION;
  if (c.Lost(*gpu)) return NVML_ERROR_GPU_IS_LOST;
  *device = c.GpuHandle(*gpu);
  return NVML_SUCCESS;
}

nvmlReturn_t GetHandleByUuid(Ctx& c, const char* uuid, nvmlDevice_t* device) {
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const std::string_view want(uuid);
  for (const SimGpu& gpu : c.m.state().gpus) {
    if (absl::EqualsIgnoreCase(Av(gpu.uuid.value()), Av(want))) {
      if (!gpu.permission) return NVML_ERROR_NO_PERMISSION;
      if (c.Lost(gpu)) return NVML_ERROR_GPU_IS_LOST;
      *device = c.GpuHandle(gpu);
      return NVML_SUCCESS;
    }
  }
  std::optional<CiLocation> loc = c.m.FindCiByUuid(want);
  nvmlReturn_t refused = NVML_ERROR_NOT_FOUND;
  if (!loc) loc = FindByLegacyUuid(c, want, &refused);
  if (!loc) return refused;
  const SimGpu* gpu = c.m.FindGpu(loc->gpu);
  if (!gpu->permission) return NVML_ERROR_NO_PERMISSION;
  if (c.Lost(*gpu)) return NVML_ERROR_GPU_IS_LOST;
  *device =
      c.MigHandle(*gpu, *c.m.FindGi(loc->gpu, loc->gi), *c.m.FindCi(loc->gpu, loc->gi, loc->ci));
  return NVML_SUCCESS;
}

nvmlReturn_t GetHandleByPciBusId(Ctx& c, const char* pci_bus_id, nvmlDevice_t* device) {
  if (pci_bus_id == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::optional<PciFields> want = ParsePciBusId(pci_bus_id);
  if (!want) return NVML_ERROR_INVALID_ARGUMENT;
  for (const SimGpu& gpu : c.m.state().gpus) {
    if (ParsePciBusId(gpu.pci_bus_id) == want) {
      if (!gpu.permission) return NVML_ERROR_NO_PERMISSION;
      if (c.Lost(gpu)) return NVML_ERROR_GPU_IS_LOST;
      *device = c.GpuHandle(gpu);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t GetUuid(const Ctx& c, nvmlDevice_t device, char* uuid, unsigned int length) {
  std::optional<Resolved> r = c.Device(device);
  if (!r) return NVML_ERROR_INVALID_ARGUMENT;
  return CopyString(r->is_mig() ? r->ci->uuid.value() : r->gpu->uuid.value(), uuid, length);
}

nvmlReturn_t GetName(const Ctx& c, nvmlDevice_t device, char* name, unsigned int length) {
  std::optional<Resolved> r = c.Device(device);
  if (!r) return NVML_ERROR_INVALID_ARGUMENT;
  return CopyString(DeviceName(c, *r), name, length);
}

nvmlReturn_t GetIndex(Ctx& c, nvmlDevice_t device, unsigned int* index) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!r->is_mig()) {
    *index = r->gpu->index.value();
    return NVML_SUCCESS;
  }
  const auto slots = c.m.MigDeviceSlots(r->gpu->index, c.config().mig_index,
                                        c.HiddenCis(*r->gpu, /*walk_start=*/false));
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] && slots[i]->gi == r->gi->id && slots[i]->ci == r->ci->id) {
      *index = static_cast<unsigned int>(i);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;  // not visible to the walk yet
}

nvmlReturn_t GetMinorNumber(const Ctx& c, nvmlDevice_t device, unsigned int* minor) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (r->is_mig()) return NVML_ERROR_NOT_SUPPORTED;
  *minor = r->gpu->minor;
  return NVML_SUCCESS;
}

nvmlReturn_t FillPci(const Ctx& c, nvmlDevice_t device, nvmlPciInfo_t* pci, PciVersion version) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::optional<PciFields> f = ParsePciBusId(r->gpu->pci_bus_id);
  if (!f) return NVML_ERROR_UNKNOWN;
  const mig::GpuModel& model = c.m.ModelOf(*r->gpu);
  nvmlPciInfo_t out{};
  char legacy[16];
  std::snprintf(legacy, sizeof(legacy), "%04X:%02X:%02X.%X", f->domain, f->bus, f->device,
                f->function);
  CopyName(out.busIdLegacy, legacy);
  out.domain = f->domain;
  out.bus = f->bus;
  out.device = f->device;
  out.pciDeviceId = model.pci_device_ids.empty() ? 0 : model.pci_device_ids[0];
  out.pciSubSystemId = out.pciDeviceId;
  // v3 fills busId with the 8-digit domain; v2 with the legacy 4-digit form;
  // v1's struct ends before busId, so it is left untouched.
  CopyName(out.busId, version == PciVersion::kV3 ? r->gpu->pci_bus_id : std::string(legacy));
  std::memcpy(pci, &out, version == PciVersion::kV1 ? offsetof(nvmlPciInfo_t, busId) : sizeof(out));
  return NVML_SUCCESS;
}

nvmlReturn_t GetMemory(const Ctx& c, nvmlDevice_t device, nvmlMemory_t* memory) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto [total, used] = DeviceMemory(c, *r);
  memory->total = total;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}

nvmlReturn_t GetMemoryV2(const Ctx& c, nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvml_abi::kMemoryV2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  auto [total, used] = DeviceMemory(c, *r);
  memory->total = total;
  memory->reserved = 0;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}

nvmlReturn_t GetMigMode(const Ctx& c, nvmlDevice_t device, unsigned int* current,
                        unsigned int* pending) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *current = r->gpu->mig_current ? nvml_abi::kMigEnable : nvml_abi::kMigDisable;
  *pending = r->gpu->mig_pending ? nvml_abi::kMigEnable : nvml_abi::kMigDisable;
  return NVML_SUCCESS;
}

Outcome SetMigMode(Ctx& c, nvmlDevice_t device, unsigned int mode, nvmlReturn_t* activation) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || activation == nullptr ||
      (mode != nvml_abi::kMigEnable && mode != nvml_abi::kMigDisable)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const bool changed = r->gpu->mig_pending != (mode == nvml_abi::kMigEnable);
  SimOr<nvmlReturn_t> status = c.m.SetMigMode(r->gpu->index, mode == nvml_abi::kMigEnable);
  if (!status.ok()) return status.code();
  *activation = *status;
  return Outcome(NVML_SUCCESS, changed);
}

nvmlReturn_t GetMaxMigDeviceCount(const Ctx& c, nvmlDevice_t device, unsigned int* count) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = c.m.MaxMigDeviceCount(r->gpu->index);
  return NVML_SUCCESS;
}

nvmlReturn_t GetMigDeviceHandleByIndex(Ctx& c, nvmlDevice_t device, unsigned int index,
                                       nvmlDevice_t* mig_device) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || mig_device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= c.m.MaxMigDeviceCount(r->gpu->index)) return NVML_ERROR_INVALID_ARGUMENT;
  const auto slots = c.m.MigDeviceSlots(r->gpu->index, c.config().mig_index,
                                        c.HiddenCis(*r->gpu, /*walk_start=*/index == 0));
  // "NVML_ERROR_NOT_FOUND if no valid MIG device was found at index".
  if (index >= slots.size() || !slots[index]) return NVML_ERROR_NOT_FOUND;
  const MigDeviceRef ref = *slots[index];
  *mig_device = c.MigHandle(*r->gpu, *c.m.FindGi(r->gpu->index, ref.gi),
                            *c.m.FindCi(r->gpu->index, ref.gi, ref.ci));
  return NVML_SUCCESS;
}

nvmlReturn_t IsMigDeviceHandle(const Ctx& c, nvmlDevice_t device, unsigned int* is_mig) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || is_mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *is_mig = r->is_mig() ? 1 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t GetParentDevice(Ctx& c, nvmlDevice_t mig_device, nvmlDevice_t* device) {
  std::optional<Resolved> r = c.Device(mig_device);
  if (!r || !r->is_mig() || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *device = c.GpuHandle(*r->gpu);
  return NVML_SUCCESS;
}

nvmlReturn_t GetInstanceId(const Ctx& c, nvmlDevice_t device, bool gi, unsigned int* id) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!r->is_mig()) {
    // Documented for "the given MIG device handle" only
    // (MIGD_SIM_PARENT_INSTANCE_ID picks the answer for a GPU handle).
    return c.config().parent_instance_id == ParentInstanceIdAnswer::kInvalidArgument
               ? NVML_ERROR_INVALID_ARGUMENT
               : NVML_ERROR_NOT_SUPPORTED;
  }
  *id = gi ? r->gi->id.value() : r->ci->id.value();
  return NVML_SUCCESS;
}

template <typename Info>
nvmlReturn_t ListProcesses(const Ctx& c, nvmlDevice_t device, unsigned int* count, Info* infos) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const std::vector<ProcRow> rows = DeviceProcesses(*r);
  if (*count < rows.size()) {
    *count = static_cast<unsigned int>(rows.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (!rows.empty() && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < rows.size(); ++i) {
    Info info{};
    info.pid = rows[i].pid;
    info.usedGpuMemory = rows[i].used;
    if constexpr (std::is_same_v<Info, nvmlProcessInfo_t>) {
      info.gpuInstanceId = r->gpu->mig_current ? rows[i].gi : nvml_abi::kInvalidInstanceId;
      info.computeInstanceId = r->gpu->mig_current ? rows[i].ci : nvml_abi::kInvalidInstanceId;
    }
    infos[i] = info;
  }
  *count = static_cast<unsigned int>(rows.size());
  return NVML_SUCCESS;
}
template nvmlReturn_t ListProcesses(const Ctx&, nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
template nvmlReturn_t ListProcesses(const Ctx&, nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);

nvmlReturn_t ListGraphicsProcesses(const Ctx& c, nvmlDevice_t device, unsigned int* count) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = 0;  // the simulator models no graphics clients
  return NVML_SUCCESS;
}

}  // namespace migd::sim::lib
