// libnvidia-ml-sim.so: the extern "C" entry points. Every NVML function of
// driver/nvml/nvml_functions.h is declared here from that list, with the
// list's type, so a definition with another signature does not compile; the
// exports table at the end makes the link fail if a listed function (of the
// 11.4 header, for the R470 library) has no definition. Each one forwards to
// its body (sim/nvml_sim_calls.h) through RunCall (sim/nvml_sim_session.h).
// The library's behaviour is documented in docs/simulator.md.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "driver/nvml/nvml_functions.h"
#include "sim/events.h"
#include "sim/nvml_names.h"
#include "sim/nvml_sim_calls.h"
#include "sim/nvml_sim_session.h"

// The declarations, from the list.
#define MIGD_SIM_DECLARE(id, name, type, since, header, use, head, effect) \
  MIGD_SIM_EXPORT std::remove_pointer_t<type> name;
MIGD_NVML_FUNCTIONS(MIGD_SIM_DECLARE)
#undef MIGD_SIM_DECLARE
#define MIGD_SIM_DECLARE_CONTROL(name, type) MIGD_SIM_EXPORT std::remove_pointer_t<type> name;
MIGD_SIM_CONTROLS(MIGD_SIM_DECLARE_CONTROL)
#undef MIGD_SIM_DECLARE_CONTROL

namespace lib = ::migd::sim::lib;
using lib::Ctx;
using lib::Outcome;
using lib::RunCall;

// Library lifecycle and system.

nvmlReturn_t nvmlInit_v2(void) { return lib::InitImpl(__func__); }
nvmlReturn_t nvmlInit(void) { return lib::InitImpl(__func__); }
nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) { return lib::InitImpl(__func__); }
nvmlReturn_t nvmlShutdown(void) { return lib::ShutdownImpl(__func__); }
const char* nvmlErrorString(nvmlReturn_t result) { return migd::sim::NvmlErrorText(result); }

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::CopyString(c.m.state().driver_version, version, length);
  });
}
nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::CopyString(c.m.state().nvml_version, version, length);
  });
}

// Device discovery and identity.

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::GetCount(c, count); });
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::GetCount(c, count); });
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetHandleByIndex(c, index, device); });
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetHandleByIndex(c, index, device); });
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetHandleByUuid(c, uuid, device); });
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pci_bus_id, nvmlDevice_t* device) {
  return RunCall(
      __func__, [&](Ctx& c) -> Outcome { return lib::GetHandleByPciBusId(c, pci_bus_id, device); });
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetUuid(c, device, uuid, length); });
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetName(c, device, name, length); });
}
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::GetIndex(c, device, index); });
}
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetMinorNumber(c, device, minor); });
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::FillPci(c, device, pci, lib::PciVersion::kV3);
  });
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::FillPci(c, device, pci, lib::PciVersion::kV2);
  });
}
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::FillPci(c, device, pci, lib::PciVersion::kV1);
  });
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::GetMemory(c, device, memory); });
}
#ifndef MIGD_SIM_LEGACY_R470
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::GetMemoryV2(c, device, memory); });
}
#endif

// MIG mode and MIG device handles.

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                  unsigned int* pending) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetMigMode(c, device, current, pending); });
}
nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                  nvmlReturn_t* activation_status) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::SetMigMode(c, device, mode, activation_status);
  });
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetMaxMigDeviceCount(c, device, count); });
}
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* mig_device) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::GetMigDeviceHandleByIndex(c, device, index, mig_device);
  });
}
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* is_mig_device) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::IsMigDeviceHandle(c, device, is_mig_device);
  });
}
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig_device,
                                                          nvmlDevice_t* device) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetParentDevice(c, mig_device, device); });
}
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetInstanceId(c, device, true, id); });
}
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetInstanceId(c, device, false, id); });
}

// GPU instances.

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t* info) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GiProfileInfoV1(c, device, profile, info); });
}
#ifndef MIGD_SIM_LEGACY_R470
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::GiProfileInfoV(c, device, profile, /*by_id=*/false, info);
  });
}
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t device, unsigned int profile_id,
                                                      nvmlGpuInstanceProfileInfo_v2_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::GiProfileInfoV(c, device, profile_id, /*by_id=*/true, info);
  });
}
#endif
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profile_id,
                                                           nvmlGpuInstancePlacement_t* placements,
                                                           unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::GiPlacements(c, device, profile_id, placements, count, /*v2=*/true);
  });
}
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(nvmlDevice_t device,
                                                        unsigned int profile_id,
                                                        nvmlGpuInstancePlacement_t* placements,
                                                        unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::GiPlacements(c, device, profile_id, placements, count, /*v2=*/false);
  });
}
nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profile_id,
                                                       unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::GiRemainingCapacity(c, device, profile_id, count);
  });
}
nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profile_id,
                                         nvmlGpuInstance_t* gpu_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::CreateGi(c, device, profile_id, nullptr, gpu_instance);
  });
}
nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profile_id,
                                                      const nvmlGpuInstancePlacement_t* placement,
                                                      nvmlGpuInstance_t* gpu_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    if (placement == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return lib::CreateGi(c, device, profile_id, placement, gpu_instance);
  });
}
nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpu_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::DestroyGi(c, gpu_instance); });
}
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profile_id,
                                       nvmlGpuInstance_t* gpu_instances, unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::GetGis(c, device, profile_id, gpu_instances, count);
  });
}
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t* gpu_instance) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::GetGiById(c, device, id, gpu_instance); });
}
nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpu_instance, nvmlGpuInstanceInfo_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::GiInfo(c, gpu_instance, info); });
}

// Compute instances.

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpu_instance,
                                                          unsigned int profile,
                                                          unsigned int eng_profile,
                                                          nvmlComputeInstanceProfileInfo_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::CiProfileInfoV1(c, gpu_instance, profile, eng_profile, info);
  });
}
#ifndef MIGD_SIM_LEGACY_R470
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    nvmlGpuInstance_t gpu_instance, unsigned int profile, unsigned int eng_profile,
    nvmlComputeInstanceProfileInfo_v2_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::CiProfileInfoV(c, gpu_instance, profile, eng_profile, info);
  });
}
#endif
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpu_instance,
                                                                unsigned int profile_id,
                                                                unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::CiRemainingCapacity(c, gpu_instance, profile_id, count);
  });
}
#ifndef MIGD_SIM_LEGACY_R470
nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(
    nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
    nvmlComputeInstancePlacement_t* placements, unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::CiPlacements(c, gpu_instance, profile_id, placements, count);
  });
}
#endif
nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpu_instance,
                                                  unsigned int profile_id,
                                                  nvmlComputeInstance_t* compute_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::CreateCi(c, gpu_instance, profile_id, nullptr, compute_instance);
  });
}
#ifndef MIGD_SIM_LEGACY_R470
nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(
    nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
    const nvmlComputeInstancePlacement_t* placement, nvmlComputeInstance_t* compute_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    if (placement == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return lib::CreateCi(c, gpu_instance, profile_id, placement, compute_instance);
  });
}
#endif
nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t compute_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::DestroyCi(c, compute_instance); });
}
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpu_instance,
                                                unsigned int profile_id,
                                                nvmlComputeInstance_t* compute_instances,
                                                unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::GetCis(c, gpu_instance, profile_id, compute_instances, count);
  });
}
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpu_instance, unsigned int id,
                                                   nvmlComputeInstance_t* compute_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::GetCiById(c, gpu_instance, id, compute_instance);
  });
}
nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t compute_instance,
                                           nvmlComputeInstanceInfo_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::CiInfo(c, compute_instance, info, /*v1=*/false);
  });
}
nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t compute_instance,
                                        nvmlComputeInstanceInfo_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::CiInfo(c, compute_instance, info, /*v1=*/true);
  });
}

// Processes.

#ifndef MIGD_SIM_LEGACY_R470
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* info_count,
                                                     nvmlProcessInfo_t* infos) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::ListProcesses(c, device, info_count, infos);
  });
}
#endif
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* info_count,
                                                     nvmlProcessInfo_t* infos) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::ListProcesses(c, device, info_count, infos);
  });
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* info_count,
                                                  nvmlProcessInfo_v1_t* infos) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::ListProcesses(c, device, info_count, infos);
  });
}
#ifndef MIGD_SIM_LEGACY_R470
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* info_count,
                                                      nvmlProcessInfo_t* /*infos*/) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return lib::ListGraphicsProcesses(c, device, info_count);
  });
}
#endif

// Events.

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::EventSetCreate(c, set); });
}
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::EventSetFree(c, set); });
}
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* types) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::SupportedEventTypes(c, device, types); });
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return lib::RegisterEvents(c, device, types, set); });
}
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeoutms) {
  lib::AwaitEvent(set, timeoutms);  // uncounted polling; the call below is counted once
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return lib::EventSetWait(c, set, data); });
}

// The simulator's own controls (docs/simulator.md §9).

nvmlReturn_t migdSimAttachProcess(const char* mig_uuid, unsigned int pid,
                                  unsigned long long used_bytes) {
  if (mig_uuid == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return lib::RunControl(
      __func__, [&](migd::sim::Machine& m) { return m.AttachProcess(mig_uuid, pid, used_bytes); });
}
nvmlReturn_t migdSimDetachProcess(const char* mig_uuid, unsigned int pid) {
  if (mig_uuid == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return lib::RunControl(__func__,
                         [&](migd::sim::Machine& m) { return m.DetachProcess(mig_uuid, pid); });
}
nvmlReturn_t migdSimReboot(void) {
  return lib::RunControl(__func__, [](migd::sim::Machine& m) {
    m.Reboot();
    return migd::sim::SimStatus();
  });
}

nvmlReturn_t migdSimInjectEvents(const char* specs) {
  if (specs == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  migd::StatusOr<std::vector<migd::sim::EventSpec>> parsed =
      migd::sim::ParseEventSpecs(specs, /*allow_delay=*/false);
  if (!parsed.ok()) {
    lib::Report(std::string(__func__) + ": " + parsed.status().ToString());
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return lib::RunControl(__func__, [&](migd::sim::Machine& m) {
    for (const migd::sim::EventSpec& spec : *parsed) {
      migd::sim::SimStatus st = m.InjectEvent(spec);
      if (!st.ok()) return st;
    }
    return migd::sim::SimStatus();
  });
}

// Every function of the list this library exports: referencing each makes
// the link fail if one is missing.
#ifdef MIGD_SIM_LEGACY_R470
#define MIGD_SIM_IF_EXPORTED(header, ...) MIGD_NVML_IF_R470_##header(__VA_ARGS__)
#else
#define MIGD_SIM_IF_EXPORTED(header, ...) __VA_ARGS__
#endif
#define MIGD_SIM_ADDRESS(id, name, type, since, header, use, head, effect) \
  MIGD_SIM_IF_EXPORTED(header, reinterpret_cast<const void*>(&name), )
#define MIGD_SIM_CONTROL_ADDRESS(name, type) reinterpret_cast<const void*>(&name),
[[gnu::used]] static const void* const kExported[] = {
    MIGD_NVML_FUNCTIONS(MIGD_SIM_ADDRESS) MIGD_SIM_CONTROLS(MIGD_SIM_CONTROL_ADDRESS)};
#undef MIGD_SIM_ADDRESS
#undef MIGD_SIM_CONTROL_ADDRESS
#undef MIGD_SIM_IF_EXPORTED
