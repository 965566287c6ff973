// File: sim/nvml_sim_calls.h
//
// The bodies of libnvidia-ml-sim.so's NVML calls (internal to the library):
// each resolves its handles through the Ctx (sim/nvml_sim_session.h), asks
// the Machine (sim/machine.h) and fills the caller's structs in the layouts
// of driver/nvml/nvml_abi.h, answering with the code nvml.h documents (and,
// where it is silent, the variant the process knobs choose). The extern "C"
// entry points (nvml_sim_exports.cc) only forward here through RunCall.
//
// Thread-safety: called inside RunCall's transaction only.
#ifndef MIGD_SIM_NVML_SIM_CALLS_H_
#define MIGD_SIM_NVML_SIM_CALLS_H_

#include <string>

#include "driver/nvml/nvml_abi.h"
#include "sim/nvml_sim_session.h"

namespace migd::sim::lib {

// "3g.20gb" for a CI spanning the GI, "1c.3g.20gb" for a smaller one.
std::string CiProfileName(const mig::GiProfile& gi, const mig::CiProfile& ci);

// Copies `s` and its NUL; INSUFFICIENT_SIZE if `length` is short.
nvmlReturn_t CopyString(const std::string& s, char* buf, unsigned int length);

// Identity.
nvmlReturn_t GetCount(const Ctx& c, unsigned int* count);
nvmlReturn_t GetHandleByIndex(Ctx& c, unsigned int index, nvmlDevice_t* device);
nvmlReturn_t GetHandleByUuid(Ctx& c, const char* uuid, nvmlDevice_t* device);
nvmlReturn_t GetHandleByPciBusId(Ctx& c, const char* pci_bus_id, nvmlDevice_t* device);
nvmlReturn_t GetUuid(const Ctx& c, nvmlDevice_t device, char* uuid, unsigned int length);
nvmlReturn_t GetName(const Ctx& c, nvmlDevice_t device, char* name, unsigned int length);
nvmlReturn_t GetIndex(Ctx& c, nvmlDevice_t device, unsigned int* index);
nvmlReturn_t GetMinorNumber(const Ctx& c, nvmlDevice_t device, unsigned int* minor);
// Which layout GetPciInfo writes.
enum class PciVersion { kV1, kV2, kV3 };
nvmlReturn_t FillPci(const Ctx& c, nvmlDevice_t device, nvmlPciInfo_t* pci, PciVersion version);
nvmlReturn_t GetMemory(const Ctx& c, nvmlDevice_t device, nvmlMemory_t* memory);
nvmlReturn_t GetMemoryV2(const Ctx& c, nvmlDevice_t device, nvmlMemory_v2_t* memory);

// MIG mode and MIG devices.
nvmlReturn_t GetMigMode(const Ctx& c, nvmlDevice_t device, unsigned int* current,
                        unsigned int* pending);
Outcome SetMigMode(Ctx& c, nvmlDevice_t device, unsigned int mode, nvmlReturn_t* activation);
nvmlReturn_t GetMaxMigDeviceCount(const Ctx& c, nvmlDevice_t device, unsigned int* count);
nvmlReturn_t GetMigDeviceHandleByIndex(Ctx& c, nvmlDevice_t device, unsigned int index,
                                       nvmlDevice_t* mig_device);
nvmlReturn_t IsMigDeviceHandle(const Ctx& c, nvmlDevice_t device, unsigned int* is_mig);
nvmlReturn_t GetParentDevice(Ctx& c, nvmlDevice_t mig_device, nvmlDevice_t* device);
// GetGpuInstanceId (`gi` true) or GetComputeInstanceId of a MIG handle.
nvmlReturn_t GetInstanceId(const Ctx& c, nvmlDevice_t device, bool gi, unsigned int* id);

// GPU instances.
nvmlReturn_t GiProfileInfoV1(const Ctx& c, nvmlDevice_t device, unsigned int profile,
                             nvmlGpuInstanceProfileInfo_t* info);
nvmlReturn_t GiProfileInfoV(Ctx& c, nvmlDevice_t device, unsigned int profile, bool by_id,
                            nvmlGpuInstanceProfileInfo_v2_t* info);
nvmlReturn_t GiPlacements(Ctx& c, nvmlDevice_t device, unsigned int profile_id,
                          nvmlGpuInstancePlacement_t* placements, unsigned int* count, bool v2);
nvmlReturn_t GiRemainingCapacity(const Ctx& c, nvmlDevice_t device, unsigned int profile_id,
                                 unsigned int* count);
// `placement` null: the driver chooses (nvmlDeviceCreateGpuInstance).
Outcome CreateGi(Ctx& c, nvmlDevice_t device, unsigned int profile_id,
                 const nvmlGpuInstancePlacement_t* placement, nvmlGpuInstance_t* gpu_instance);
Outcome DestroyGi(Ctx& c, nvmlGpuInstance_t gpu_instance);
nvmlReturn_t GetGis(Ctx& c, nvmlDevice_t device, unsigned int profile_id,
                    nvmlGpuInstance_t* gpu_instances, unsigned int* count);
nvmlReturn_t GetGiById(Ctx& c, nvmlDevice_t device, unsigned int id,
                       nvmlGpuInstance_t* gpu_instance);
nvmlReturn_t GiInfo(Ctx& c, nvmlGpuInstance_t gpu_instance, nvmlGpuInstanceInfo_t* info);

// Compute instances.
nvmlReturn_t CiProfileInfoV1(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile,
                             unsigned int eng_profile, nvmlComputeInstanceProfileInfo_t* info);
nvmlReturn_t CiProfileInfoV(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile,
                            unsigned int eng_profile, nvmlComputeInstanceProfileInfo_v2_t* info);
nvmlReturn_t CiRemainingCapacity(const Ctx& c, nvmlGpuInstance_t gpu_instance,
                                 unsigned int profile_id, unsigned int* count);
nvmlReturn_t CiPlacements(const Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
                          nvmlComputeInstancePlacement_t* placements, unsigned int* count);
// `placement` null: the lowest free listed start.
Outcome CreateCi(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
                 const nvmlComputeInstancePlacement_t* placement,
                 nvmlComputeInstance_t* compute_instance);
Outcome DestroyCi(Ctx& c, nvmlComputeInstance_t compute_instance);
nvmlReturn_t GetCis(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
                    nvmlComputeInstance_t* compute_instances, unsigned int* count);
nvmlReturn_t GetCiById(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int id,
                       nvmlComputeInstance_t* compute_instance);
// The 32-byte _v2 struct; `v1` writes only the 24-byte 11.1 layout.
nvmlReturn_t CiInfo(Ctx& c, nvmlComputeInstance_t compute_instance, nvmlComputeInstanceInfo_t* out,
                    bool v1);

// Processes; Info is nvmlProcessInfo_t (v2/v3) or nvmlProcessInfo_v1_t.
template <typename Info>
nvmlReturn_t ListProcesses(const Ctx& c, nvmlDevice_t device, unsigned int* count, Info* infos);
nvmlReturn_t ListGraphicsProcesses(const Ctx& c, nvmlDevice_t device, unsigned int* count);

// Events (nvml_sim_event_calls.cc).
nvmlReturn_t EventSetCreate(Ctx& c, nvmlEventSet_t* set);
nvmlReturn_t EventSetFree(Ctx& c, nvmlEventSet_t set);
nvmlReturn_t SupportedEventTypes(const Ctx& c, nvmlDevice_t device, unsigned long long* types);
nvmlReturn_t RegisterEvents(Ctx& c, nvmlDevice_t device, unsigned long long types,
                            nvmlEventSet_t set);
// One look at the log: the next event (SUCCESS), GPU_IS_LOST, or TIMEOUT.
nvmlReturn_t EventSetWait(Ctx& c, nvmlEventSet_t set, nvmlEventData_t* data);
// What EventSetWait would answer now, without changing anything: true
// unless it would answer TIMEOUT.
bool EventReady(const SimState& state, const SimConfig& config, const EventSetObj& set);

}  // namespace migd::sim::lib

#endif  // MIGD_SIM_NVML_SIM_CALLS_H_
