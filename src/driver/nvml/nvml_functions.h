/* File: driver/nvml/nvml_functions.h
 *
 * The one list of NVML entry points (an X-macro, after DCGM's generated
 * list). Everything that names NVML functions derives from it:
 *   - NvmlLibrary's dlsym table, its NvmlSymbol enum, the fallback chains of
 *     NvmlFunctionSpecs() and the per-function call counters
 *     (driver/nvml/nvml_library.h);
 *   - the simulator's export declarations (a definition whose signature
 *     differs from the listed type does not compile), the check that every
 *     listed function is defined (the R470 library: those in the 11.4
 *     header), SimulatedNvmlFunctions() and IsPostR470Function()
 *     (sim/nvml_names.h), which the fault and latency knobs accept;
 *   - the symbols tests/abi_check expects (that C client keeps its own
 *     declarations of the signatures).
 * Plain C preprocessor only: abi_check includes it from C.
 *
 * MIGD_NVML_FUNCTIONS(X) calls X(id, name, type, since, header, use, head, effect):
 *   id      NvmlSymbol enumerator (driver), e.g. kDeviceGetUuid
 *   name    the exported symbol, e.g. nvmlDeviceGetUUID (always dlsym this
 *           suffixed name: nvml.h #defines the unsuffixed ones to it)
 *   type    its pointer type in nvml_abi.h
 *   since   the first NVML header that declares it ("11.1": already in the
 *           oldest header checked), from NVIDIA/go-nvml gen/nvml/nvml.h history
 *   header  R470 if the NVML 11.4 header (driver R470) declares it, else
 *           POST_R470 (libnvidia-ml-sim-legacy.so does not export those)
 *   use     how migd binds it: REQUIRED (Load fails without it or a fallback),
 *           OPTIONAL, FALLBACK (an older variant of `head`, tried in list
 *           order after it), SIM_ONLY (exported by the simulator for other
 *           clients and tests; migd never binds it)
 *   head    the preferred symbol of the logical function (itself unless
 *           FALLBACK)
 *   effect  MUTATES if it changes the MIG configuration or mode, else READS
 */
#ifndef MIGD_DRIVER_NVML_NVML_FUNCTIONS_H_
#define MIGD_DRIVER_NVML_NVML_FUNCTIONS_H_

/* clang-format off */
#define MIGD_NVML_FUNCTIONS(X)                                                                      \
  /* Library lifecycle and system. */                                                               \
  X(kInitV2, nvmlInit_v2, nvmlInit_fn, "11.1", R470, REQUIRED, kInitV2, READS)                      \
  X(kInit, nvmlInit, nvmlInit_fn, "11.1", R470, FALLBACK, kInitV2, READS)                           \
  X(kInitWithFlags, nvmlInitWithFlags, nvmlInitWithFlags_fn, "11.1", R470, SIM_ONLY,                \
    kInitWithFlags, READS)                                                                          \
  X(kShutdown, nvmlShutdown, nvmlShutdown_fn, "11.1", R470, REQUIRED, kShutdown, READS)             \
  X(kErrorString, nvmlErrorString, nvmlErrorString_fn, "11.1", R470, OPTIONAL, kErrorString, READS) \
  X(kSystemGetDriverVersion, nvmlSystemGetDriverVersion, nvmlSystemGetDriverVersion_fn, "11.1",     \
    R470, OPTIONAL, kSystemGetDriverVersion, READS)                                                 \
  X(kSystemGetNvmlVersion, nvmlSystemGetNVMLVersion, nvmlSystemGetNVMLVersion_fn, "11.1", R470,     \
    OPTIONAL, kSystemGetNvmlVersion, READS)                                                         \
  /* Device discovery and identity. */                                                              \
  X(kDeviceGetCountV2, nvmlDeviceGetCount_v2, nvmlDeviceGetCount_fn, "11.1", R470, REQUIRED,        \
    kDeviceGetCountV2, READS)                                                                       \
  X(kDeviceGetCount, nvmlDeviceGetCount, nvmlDeviceGetCount_fn, "11.1", R470, FALLBACK,             \
    kDeviceGetCountV2, READS)                                                                       \
  X(kDeviceGetHandleByIndexV2, nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetHandleByIndex_fn,        \
    "11.1", R470, REQUIRED, kDeviceGetHandleByIndexV2, READS)                                       \
  X(kDeviceGetHandleByIndex, nvmlDeviceGetHandleByIndex, nvmlDeviceGetHandleByIndex_fn, "11.1",     \
    R470, FALLBACK, kDeviceGetHandleByIndexV2, READS)                                               \
  X(kDeviceGetHandleByUuid, nvmlDeviceGetHandleByUUID, nvmlDeviceGetHandleByUUID_fn, "11.1", R470,  \
    OPTIONAL, kDeviceGetHandleByUuid, READS)                                                        \
  X(kDeviceGetHandleByPciBusIdV2, nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetHandleByUUID_fn,   \
    "11.1", R470, SIM_ONLY, kDeviceGetHandleByPciBusIdV2, READS)                                    \
  X(kDeviceGetUuid, nvmlDeviceGetUUID, nvmlDeviceGetString_fn, "11.1", R470, REQUIRED,              \
    kDeviceGetUuid, READS)                                                                          \
  X(kDeviceGetName, nvmlDeviceGetName, nvmlDeviceGetString_fn, "11.1", R470, OPTIONAL,              \
    kDeviceGetName, READS)                                                                          \
  X(kDeviceGetIndex, nvmlDeviceGetIndex, nvmlDeviceGetUint_fn, "11.1", R470, OPTIONAL,              \
    kDeviceGetIndex, READS)                                                                         \
  X(kDeviceGetMinorNumber, nvmlDeviceGetMinorNumber, nvmlDeviceGetUint_fn, "11.1", R470, OPTIONAL,  \
    kDeviceGetMinorNumber, READS)                                                                   \
  X(kDeviceGetPciInfoV3, nvmlDeviceGetPciInfo_v3, nvmlDeviceGetPciInfo_fn, "11.1", R470, OPTIONAL,  \
    kDeviceGetPciInfoV3, READS)                                                                     \
  X(kDeviceGetPciInfoV2, nvmlDeviceGetPciInfo_v2, nvmlDeviceGetPciInfo_fn, "11.1", R470, FALLBACK,  \
    kDeviceGetPciInfoV3, READS)                                                                     \
  X(kDeviceGetPciInfo, nvmlDeviceGetPciInfo, nvmlDeviceGetPciInfo_fn, "11.1", R470, FALLBACK,       \
    kDeviceGetPciInfoV3, READS)                                                                     \
  X(kDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo_fn, "11.1", R470,        \
    OPTIONAL, kDeviceGetMemoryInfo, READS)                                                          \
  X(kDeviceGetMemoryInfoV2, nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetMemoryInfoV2_fn, "11.6",       \
    POST_R470, SIM_ONLY, kDeviceGetMemoryInfoV2, READS)                                             \
  /* MIG mode and MIG device handles. */                                                            \
  X(kDeviceGetMigMode, nvmlDeviceGetMigMode, nvmlDeviceGetMigMode_fn, "11.1", R470, REQUIRED,       \
    kDeviceGetMigMode, READS)                                                                       \
  X(kDeviceSetMigMode, nvmlDeviceSetMigMode, nvmlDeviceSetMigMode_fn, "11.1", R470, SIM_ONLY,       \
    kDeviceSetMigMode, MUTATES)                                                                     \
  X(kDeviceGetMaxMigDeviceCount, nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetUint_fn, "11.1",      \
    R470, REQUIRED, kDeviceGetMaxMigDeviceCount, READS)                                             \
  X(kDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetMigDeviceHandleByIndex,                          \
    nvmlDeviceGetMigDeviceHandleByIndex_fn, "11.1", R470, REQUIRED,                                 \
    kDeviceGetMigDeviceHandleByIndex, READS)                                                        \
  X(kDeviceIsMigDeviceHandle, nvmlDeviceIsMigDeviceHandle, nvmlDeviceGetUint_fn, "11.1", R470,      \
    SIM_ONLY, kDeviceIsMigDeviceHandle, READS)                                                      \
  X(kDeviceGetDeviceHandleFromMigDeviceHandle, nvmlDeviceGetDeviceHandleFromMigDeviceHandle,        \
    nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn, "11.1", R470, SIM_ONLY,                        \
    kDeviceGetDeviceHandleFromMigDeviceHandle, READS)                                               \
  X(kDeviceGetGpuInstanceId, nvmlDeviceGetGpuInstanceId, nvmlDeviceGetUint_fn, "11.1", R470,        \
    REQUIRED, kDeviceGetGpuInstanceId, READS)                                                       \
  X(kDeviceGetComputeInstanceId, nvmlDeviceGetComputeInstanceId, nvmlDeviceGetUint_fn, "11.1",      \
    R470, REQUIRED, kDeviceGetComputeInstanceId, READS)                                             \
  /* GPU instances. */                                                                              \
  X(kDeviceGetGpuInstanceProfileInfoV, nvmlDeviceGetGpuInstanceProfileInfoV,                        \
    nvmlDeviceGetGpuInstanceProfileInfoV_fn, "11.6", POST_R470, REQUIRED,                           \
    kDeviceGetGpuInstanceProfileInfoV, READS)                                                       \
  X(kDeviceGetGpuInstanceProfileInfo, nvmlDeviceGetGpuInstanceProfileInfo,                          \
    nvmlDeviceGetGpuInstanceProfileInfo_fn, "11.1", R470, FALLBACK,                                 \
    kDeviceGetGpuInstanceProfileInfoV, READS)                                                       \
  X(kDeviceGetGpuInstanceProfileInfoByIdV, nvmlDeviceGetGpuInstanceProfileInfoByIdV,                \
    nvmlDeviceGetGpuInstanceProfileInfoV_fn, "13.0", POST_R470, OPTIONAL,                           \
    kDeviceGetGpuInstanceProfileInfoByIdV, READS)                                                   \
  X(kDeviceGetGpuInstancePossiblePlacementsV2, nvmlDeviceGetGpuInstancePossiblePlacements_v2,       \
    nvmlDeviceGetGpuInstancePossiblePlacements_fn, "11.4", R470, REQUIRED,                          \
    kDeviceGetGpuInstancePossiblePlacementsV2, READS)                                               \
  X(kDeviceGetGpuInstancePossiblePlacements, nvmlDeviceGetGpuInstancePossiblePlacements,            \
    nvmlDeviceGetGpuInstancePossiblePlacements_fn, "11.2", R470, FALLBACK,                          \
    kDeviceGetGpuInstancePossiblePlacementsV2, READS)                                               \
  X(kDeviceGetGpuInstanceRemainingCapacity, nvmlDeviceGetGpuInstanceRemainingCapacity,              \
    nvmlDeviceGetGpuInstanceRemainingCapacity_fn, "11.1", R470, OPTIONAL,                           \
    kDeviceGetGpuInstanceRemainingCapacity, READS)                                                  \
  X(kDeviceCreateGpuInstance, nvmlDeviceCreateGpuInstance, nvmlDeviceCreateGpuInstance_fn, "11.1",  \
    R470, SIM_ONLY, kDeviceCreateGpuInstance, MUTATES)                                              \
  X(kDeviceCreateGpuInstanceWithPlacement, nvmlDeviceCreateGpuInstanceWithPlacement,                \
    nvmlDeviceCreateGpuInstanceWithPlacement_fn, "11.2", R470, REQUIRED,                            \
    kDeviceCreateGpuInstanceWithPlacement, MUTATES)                                                 \
  X(kGpuInstanceDestroy, nvmlGpuInstanceDestroy, nvmlGpuInstanceDestroy_fn, "11.1", R470, REQUIRED, \
    kGpuInstanceDestroy, MUTATES)                                                                   \
  X(kDeviceGetGpuInstances, nvmlDeviceGetGpuInstances, nvmlDeviceGetGpuInstances_fn, "11.1", R470,  \
    REQUIRED, kDeviceGetGpuInstances, READS)                                                        \
  X(kDeviceGetGpuInstanceById, nvmlDeviceGetGpuInstanceById, nvmlDeviceGetGpuInstanceById_fn,       \
    "11.1", R470, REQUIRED, kDeviceGetGpuInstanceById, READS)                                       \
  X(kGpuInstanceGetInfo, nvmlGpuInstanceGetInfo, nvmlGpuInstanceGetInfo_fn, "11.1", R470, REQUIRED, \
    kGpuInstanceGetInfo, READS)                                                                     \
  /* Compute instances. */                                                                          \
  X(kGpuInstanceGetComputeInstanceProfileInfoV, nvmlGpuInstanceGetComputeInstanceProfileInfoV,      \
    nvmlGpuInstanceGetComputeInstanceProfileInfoV_fn, "11.6", POST_R470, REQUIRED,                  \
    kGpuInstanceGetComputeInstanceProfileInfoV, READS)                                              \
  X(kGpuInstanceGetComputeInstanceProfileInfo, nvmlGpuInstanceGetComputeInstanceProfileInfo,        \
    nvmlGpuInstanceGetComputeInstanceProfileInfo_fn, "11.1", R470, FALLBACK,                        \
    kGpuInstanceGetComputeInstanceProfileInfoV, READS)                                              \
  X(kGpuInstanceGetComputeInstanceRemainingCapacity,                                                \
    nvmlGpuInstanceGetComputeInstanceRemainingCapacity,                                             \
    nvmlGpuInstanceGetComputeInstanceRemainingCapacity_fn, "11.1", R470, SIM_ONLY,                  \
    kGpuInstanceGetComputeInstanceRemainingCapacity, READS)                                         \
  X(kGpuInstanceGetComputeInstancePossiblePlacements,                                               \
    nvmlGpuInstanceGetComputeInstancePossiblePlacements,                                            \
    nvmlGpuInstanceGetComputeInstancePossiblePlacements_fn, "12.0", POST_R470, OPTIONAL,            \
    kGpuInstanceGetComputeInstancePossiblePlacements, READS)                                        \
  X(kGpuInstanceCreateComputeInstance, nvmlGpuInstanceCreateComputeInstance,                        \
    nvmlGpuInstanceCreateComputeInstance_fn, "11.1", R470, REQUIRED,                                \
    kGpuInstanceCreateComputeInstance, MUTATES)                                                     \
  X(kGpuInstanceCreateComputeInstanceWithPlacement,                                                 \
    nvmlGpuInstanceCreateComputeInstanceWithPlacement,                                              \
    nvmlGpuInstanceCreateComputeInstanceWithPlacement_fn, "12.0", POST_R470, OPTIONAL,              \
    kGpuInstanceCreateComputeInstanceWithPlacement, MUTATES)                                        \
  X(kComputeInstanceDestroy, nvmlComputeInstanceDestroy, nvmlComputeInstanceDestroy_fn, "11.1",     \
    R470, REQUIRED, kComputeInstanceDestroy, MUTATES)                                               \
  X(kGpuInstanceGetComputeInstances, nvmlGpuInstanceGetComputeInstances,                            \
    nvmlGpuInstanceGetComputeInstances_fn, "11.1", R470, REQUIRED, kGpuInstanceGetComputeInstances, \
    READS)                                                                                          \
  X(kGpuInstanceGetComputeInstanceById, nvmlGpuInstanceGetComputeInstanceById,                      \
    nvmlGpuInstanceGetComputeInstanceById_fn, "11.1", R470, REQUIRED,                               \
    kGpuInstanceGetComputeInstanceById, READS)                                                      \
  X(kComputeInstanceGetInfoV2, nvmlComputeInstanceGetInfo_v2, nvmlComputeInstanceGetInfo_fn,        \
    "11.2", R470, REQUIRED, kComputeInstanceGetInfoV2, READS)                                       \
  X(kComputeInstanceGetInfo, nvmlComputeInstanceGetInfo, nvmlComputeInstanceGetInfo_fn, "11.1",     \
    R470, FALLBACK, kComputeInstanceGetInfoV2, READS)                                               \
  /* Processes (in-use detection). */                                                               \
  X(kDeviceGetComputeRunningProcessesV3, nvmlDeviceGetComputeRunningProcesses_v3,                   \
    nvmlDeviceGetComputeRunningProcesses_fn, "11.6", POST_R470, OPTIONAL,                           \
    kDeviceGetComputeRunningProcessesV3, READS)                                                     \
  X(kDeviceGetComputeRunningProcessesV2, nvmlDeviceGetComputeRunningProcesses_v2,                   \
    nvmlDeviceGetComputeRunningProcesses_fn, "11.1", R470, FALLBACK,                                \
    kDeviceGetComputeRunningProcessesV3, READS)                                                     \
  X(kDeviceGetComputeRunningProcesses, nvmlDeviceGetComputeRunningProcesses,                        \
    nvmlDeviceGetComputeRunningProcessesV1_fn, "11.1", R470, FALLBACK,                              \
    kDeviceGetComputeRunningProcessesV3, READS)                                                     \
  X(kDeviceGetGraphicsRunningProcessesV3, nvmlDeviceGetGraphicsRunningProcesses_v3,                 \
    nvmlDeviceGetComputeRunningProcesses_fn, "11.6", POST_R470, SIM_ONLY,                           \
    kDeviceGetGraphicsRunningProcessesV3, READS)                                                    \
  /* Events (GpuEventWatch, driver/gpu_events.h). */                                                \
  X(kEventSetCreate, nvmlEventSetCreate, nvmlEventSetCreate_fn, "11.1", R470, OPTIONAL,             \
    kEventSetCreate, READS)                                                                         \
  X(kDeviceGetSupportedEventTypes, nvmlDeviceGetSupportedEventTypes,                                \
    nvmlDeviceGetSupportedEventTypes_fn, "11.1", R470, OPTIONAL, kDeviceGetSupportedEventTypes,     \
    READS)                                                                                          \
  X(kDeviceRegisterEvents, nvmlDeviceRegisterEvents, nvmlDeviceRegisterEvents_fn, "11.1", R470,     \
    OPTIONAL, kDeviceRegisterEvents, READS)                                                         \
  X(kEventSetWaitV2, nvmlEventSetWait_v2, nvmlEventSetWait_fn, "11.1", R470, OPTIONAL,              \
    kEventSetWaitV2, READS)                                                                         \
  X(kEventSetFree, nvmlEventSetFree, nvmlEventSetFree_fn, "11.1", R470, OPTIONAL, kEventSetFree,    \
    READS)
/* clang-format on */

/* The simulator's own controls, exported by libnvidia-ml-sim.so beside the
   NVML functions (docs/simulator.md §9): X(name, type). The types are in
   sim/nvml_sim_session.h. */
#define MIGD_SIM_CONTROLS(X)                      \
  X(migdSimAttachProcess, migdSimAttachProcess_fn) \
  X(migdSimDetachProcess, migdSimDetachProcess_fn) \
  X(migdSimReboot, migdSimReboot_fn)               \
  X(migdSimInjectEvents, migdSimInjectEvents_fn)

/* Helpers for consumers (token-pasted with a field):
   MIGD_NVML_IF_BOUND_##use(...) keeps its arguments for the functions
   NvmlLibrary binds; MIGD_NVML_IF_R470_##header(...) for those in the 11.4
   header and MIGD_NVML_IF_NEWER_##header(...) for the others;
   MIGD_NVML_IF_MUTATES_##effect(...) for the mutating ones. */
#define MIGD_NVML_IF_BOUND_REQUIRED(...) __VA_ARGS__
#define MIGD_NVML_IF_BOUND_OPTIONAL(...) __VA_ARGS__
#define MIGD_NVML_IF_BOUND_FALLBACK(...) __VA_ARGS__
#define MIGD_NVML_IF_BOUND_SIM_ONLY(...)
#define MIGD_NVML_IF_R470_R470(...) __VA_ARGS__
#define MIGD_NVML_IF_R470_POST_R470(...)
#define MIGD_NVML_IF_NEWER_R470(...)
#define MIGD_NVML_IF_NEWER_POST_R470(...) __VA_ARGS__
#define MIGD_NVML_IF_MUTATES_MUTATES(...) __VA_ARGS__
#define MIGD_NVML_IF_MUTATES_READS(...)

#endif /* MIGD_DRIVER_NVML_NVML_FUNCTIONS_H_ */
