// File: driver/nvml/nvml_abi.h
//
// migd's own declarations of the subset of the NVML C ABI it uses, written
// from NVIDIA's nvml.h (NVML 13.3, as vendored unmodified in NVIDIA/go-nvml
// gen/nvml/nvml.h; its git history back to 11.1 for the older variants).
// This is not a copy of nvml.h: no NVML header is installable on our build
// machines, and migd never links -lnvidia-ml. Every function is resolved at
// run time with dlsym() by its exported (suffixed) name.
//
// Each struct field whose meaning migd's code depends on carries the
// header's own words in quotes ("..."); fields without a quote are only
// carried for the layout. Only driver/nvml/ and sim/ include this file. Every
// struct size and field offset is checked with static_assert below (LP64).
#ifndef MIGD_DRIVER_NVML_NVML_ABI_H_
#define MIGD_DRIVER_NVML_NVML_ABI_H_

#include <cstddef>
#include <cstdint>

extern "C" {

// §2 Handles: opaque pointers. A GPU and a MIG device share nvmlDevice_t.
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st* nvmlComputeInstance_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;  // "Handle to an event set"

// §5.1 Return codes.
typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

// §4.1 Placements, instance info, process info, PCI, memory.
typedef struct nvmlGpuInstancePlacement_st {
  unsigned int start;  // "Index of first occupied memory slice"
  unsigned int size;   // "Number of memory slices occupied"
} nvmlGpuInstancePlacement_t;

typedef struct nvmlComputeInstancePlacement_st {
  unsigned int start;  // "Index of first occupied compute slice" (within the GI)
  unsigned int size;   // "Number of compute slices occupied"
} nvmlComputeInstancePlacement_t;

typedef struct nvmlGpuInstanceInfo_st {
  // "Parent device": the GPU. Never an identity of the instance.
  nvmlDevice_t device;
  unsigned int id;         // "Unique instance ID within the device"
  unsigned int profileId;  // "Unique profile ID within the device"
  nvmlGpuInstancePlacement_t placement;  // "Placement for this instance"
} nvmlGpuInstanceInfo_t;

// For nvmlComputeInstanceGetInfo_v2 (the unsuffixed 11.1 call writes the
// first 24 bytes only: no placement).
typedef struct nvmlComputeInstanceInfo_st {
  // "Parent device": the GPU, NOT the MIG device; its UUID is the GPU's. The
  // MIG device comes from nvmlDeviceGetMigDeviceHandleByIndex (nvml_driver.h).
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;  // "Parent GPU instance"
  unsigned int id;                // "Unique instance ID within the GPU instance"
  unsigned int profileId;         // "Unique profile ID within the GPU instance"
  // "Placement for this instance within the GPU instance's compute slice
  // range {0, sliceCount}"
  nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid;                   // "Process ID"
  unsigned long long usedGpuMemory;  // "Amount of used GPU memory in bytes."
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_v2_st {
  unsigned int pid;                   // "Process ID"
  unsigned long long usedGpuMemory;  // "Amount of used GPU memory in bytes."
  // "If MIG is enabled, stores a valid GPU instance ID. gpuInstanceId is set
  // to 0xFFFFFFFF otherwise."
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;  // likewise for the compute instance
} nvmlProcessInfo_v2_t;
typedef nvmlProcessInfo_v2_t nvmlProcessInfo_t;

// "Information about occurred event" (nvmlEventSetWait_v2). The same fields
// and layout in every header from 11.1 to 13.3.
typedef struct nvmlEventData_st {
  nvmlDevice_t device;  // "Specific device where the event occurred"
  unsigned long long eventType;  // "Information about what specific event occurred"
  // "Stores Xid error for the device in the event of
  // nvmlEventTypeXidCriticalError, eventData is 0 for any other event.
  // eventData is set as 999 for unknown Xid error."
  unsigned long long eventData;
  // "If MIG is enabled and nvmlEventTypeXidCriticalError event is
  // attributable to a GPU instance, stores a valid GPU instance ID.
  // gpuInstanceId is set to 0xFFFFFFFF otherwise."
  unsigned int gpuInstanceId;
  // "If MIG is enabled and nvmlEventTypeXidCriticalError event is
  // attributable to a compute instance, stores a valid compute instance ID.
  // computeInstanceId is set to 0xFFFFFFFF otherwise."
  unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct nvmlPciInfo_st {
  // "The legacy tuple domain:bus:device.function PCI identifier"
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;  // "The combined 16-bit device id and 16-bit vendor id"
  unsigned int pciSubSystemId;
  // "The tuple domain:bus:device.function PCI identifier" (_v3: 8-digit domain)
  char busId[32];
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
  unsigned long long total;  // "Total physical device memory (in bytes)"
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
  unsigned int version;  // "Structure format version (must be 2)"
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;

// §4.2 Profile info structs.
// The GI profile structs (v1, v2, v3) share these fields; the header's words:
// id "Unique profile ID within the device" (what create, placements and
// GetGpuInstances take; not the index the query took), isP2pSupported
// "Peer-to-Peer support" (v1/v2), sliceCount "GPU Slice count", instanceCount
// "GPU instance count", multiprocessorCount "Streaming Multiprocessor count",
// copyEngineCount/decoderCount/encoderCount/jpegCount/ofaCount "Copy Engine
// count" ... "OFA Engine count", memorySizeMB "Memory size in MBytes" (MiB),
// name "Profile name" (v2/v3, "MIG 1g.10gb"), capabilities "Additional
// capabilities" (v3: NVML_GPU_INSTANCE_PROFILE_CAPS_P2P 0x1, _CAPS_GFX 0x2).
typedef struct nvmlGpuInstanceProfileInfo_st {
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
  unsigned int version;
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[96];
} nvmlGpuInstanceProfileInfo_v2_t;

typedef struct nvmlGpuInstanceProfileInfo_v3_st {
  unsigned int version;
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[96];
  unsigned int capabilities;
} nvmlGpuInstanceProfileInfo_v3_t;

// The CI profile structs: id "Unique profile ID within the GPU instance" (what
// CreateComputeInstance takes), sliceCount "GPU Slice count", instanceCount
// "Compute instance count", multiprocessorCount "Streaming Multiprocessor
// count", name "Profile name" (v2/v3), capabilities "Additional capabilities"
// (v3: NVML_COMPUTE_INSTANCE_PROFILE_CAPS_GFX 0x1).
typedef struct nvmlComputeInstanceProfileInfo_st {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_v2_st {
  unsigned int version;
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  char name[96];
} nvmlComputeInstanceProfileInfo_v2_t;

typedef struct nvmlComputeInstanceProfileInfo_v3_st {
  unsigned int version;
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  char name[96];
  unsigned int capabilities;
} nvmlComputeInstanceProfileInfo_v3_t;

// Function pointer types of the exported symbols; which symbol has which type
// is listed once, in driver/nvml/nvml_functions.h.
typedef nvmlReturn_t (*nvmlInit_fn)(void);                          // nvmlInit_v2, nvmlInit
typedef nvmlReturn_t (*nvmlInitWithFlags_fn)(unsigned int);         // nvmlInitWithFlags
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);                      // nvmlShutdown
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t);            // nvmlErrorString
typedef nvmlReturn_t (*nvmlSystemGetDriverVersion_fn)(char*, unsigned int);
typedef nvmlReturn_t (*nvmlSystemGetNVMLVersion_fn)(char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetCount_fn)(unsigned int*);       // _v2
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_fn)(unsigned int, nvmlDevice_t*);  // _v2
typedef nvmlReturn_t (*nvmlDeviceGetHandleByUUID_fn)(const char*, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetString_fn)(nvmlDevice_t, char*, unsigned int);  // UUID, Name
typedef nvmlReturn_t (*nvmlDeviceGetUint_fn)(nvmlDevice_t, unsigned int*);  // Index, Minor, ...
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_fn)(nvmlDevice_t, nvmlPciInfo_t*);  // _v3
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t, nvmlMemory_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfoV2_fn)(nvmlDevice_t, nvmlMemory_v2_t*);  // _v2
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t, unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceSetMigMode_fn)(nvmlDevice_t, unsigned int, nvmlReturn_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t, unsigned int,
                                                              nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn)(nvmlDevice_t,
                                                                       nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceProfileInfo_fn)(nvmlDevice_t, unsigned int,
                                                              nvmlGpuInstanceProfileInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceProfileInfoV_fn)(
    nvmlDevice_t, unsigned int, nvmlGpuInstanceProfileInfo_v2_t*);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstancePossiblePlacements_fn)(
    nvmlDevice_t, unsigned int, nvmlGpuInstancePlacement_t*, unsigned int*);  // _v2
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceRemainingCapacity_fn)(nvmlDevice_t, unsigned int,
                                                                    unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceCreateGpuInstance_fn)(nvmlDevice_t, unsigned int,
                                                      nvmlGpuInstance_t*);
typedef nvmlReturn_t (*nvmlDeviceCreateGpuInstanceWithPlacement_fn)(
    nvmlDevice_t, unsigned int, const nvmlGpuInstancePlacement_t*, nvmlGpuInstance_t*);
typedef nvmlReturn_t (*nvmlGpuInstanceDestroy_fn)(nvmlGpuInstance_t);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstances_fn)(nvmlDevice_t, unsigned int,
                                                    nvmlGpuInstance_t*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceById_fn)(nvmlDevice_t, unsigned int,
                                                       nvmlGpuInstance_t*);
typedef nvmlReturn_t (*nvmlGpuInstanceGetInfo_fn)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
typedef nvmlReturn_t (*nvmlGpuInstanceGetComputeInstanceProfileInfo_fn)(
    nvmlGpuInstance_t, unsigned int, unsigned int, nvmlComputeInstanceProfileInfo_t*);
typedef nvmlReturn_t (*nvmlGpuInstanceGetComputeInstanceProfileInfoV_fn)(
    nvmlGpuInstance_t, unsigned int, unsigned int, nvmlComputeInstanceProfileInfo_v2_t*);
typedef nvmlReturn_t (*nvmlGpuInstanceGetComputeInstanceRemainingCapacity_fn)(
    nvmlGpuInstance_t, unsigned int, unsigned int*);
typedef nvmlReturn_t (*nvmlGpuInstanceGetComputeInstancePossiblePlacements_fn)(
    nvmlGpuInstance_t, unsigned int, nvmlComputeInstancePlacement_t*, unsigned int*);
typedef nvmlReturn_t (*nvmlGpuInstanceCreateComputeInstance_fn)(nvmlGpuInstance_t, unsigned int,
                                                               nvmlComputeInstance_t*);
typedef nvmlReturn_t (*nvmlGpuInstanceCreateComputeInstanceWithPlacement_fn)(
    nvmlGpuInstance_t, unsigned int, const nvmlComputeInstancePlacement_t*,
    nvmlComputeInstance_t*);
typedef nvmlReturn_t (*nvmlComputeInstanceDestroy_fn)(nvmlComputeInstance_t);
typedef nvmlReturn_t (*nvmlGpuInstanceGetComputeInstances_fn)(nvmlGpuInstance_t, unsigned int,
                                                             nvmlComputeInstance_t*,
                                                             unsigned int*);
typedef nvmlReturn_t (*nvmlGpuInstanceGetComputeInstanceById_fn)(nvmlGpuInstance_t, unsigned int,
                                                                nvmlComputeInstance_t*);
typedef nvmlReturn_t (*nvmlComputeInstanceGetInfo_fn)(nvmlComputeInstance_t,
                                                     nvmlComputeInstanceInfo_t*);  // _v2
typedef nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses_fn)(nvmlDevice_t, unsigned int*,
                                                               nvmlProcessInfo_t*);  // _v3, _v2
typedef nvmlReturn_t (*nvmlDeviceGetComputeRunningProcessesV1_fn)(nvmlDevice_t, unsigned int*,
                                                                 nvmlProcessInfo_v1_t*);
typedef nvmlReturn_t (*nvmlEventSetCreate_fn)(nvmlEventSet_t*);
typedef nvmlReturn_t (*nvmlEventSetFree_fn)(nvmlEventSet_t);
typedef nvmlReturn_t (*nvmlDeviceGetSupportedEventTypes_fn)(nvmlDevice_t, unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceRegisterEvents_fn)(nvmlDevice_t, unsigned long long,
                                                   nvmlEventSet_t);
typedef nvmlReturn_t (*nvmlEventSetWait_fn)(nvmlEventSet_t, nvmlEventData_t*,
                                           unsigned int);  // _v2

}  // extern "C"

namespace migd::nvml_abi {

// §4.3 Version words: sizeof(struct) | (N << 24).
constexpr unsigned int kGpuInstanceProfileInfoV2 = 0x02000098;
constexpr unsigned int kGpuInstanceProfileInfoV3 = 0x03000098;
constexpr unsigned int kComputeInstanceProfileInfoV2 = 0x02000088;
constexpr unsigned int kComputeInstanceProfileInfoV3 = 0x0300008C;
constexpr unsigned int kMemoryV2 = 0x02000028;

constexpr unsigned int MakeVersion(size_t size, unsigned int n) {
  return static_cast<unsigned int>(size) | (n << 24);
}

// §5.2 GPU instance profile indices.
constexpr unsigned int kGiProfile1Slice = 0x00;
constexpr unsigned int kGiProfile2Slice = 0x01;
constexpr unsigned int kGiProfile3Slice = 0x02;
constexpr unsigned int kGiProfile4Slice = 0x03;
constexpr unsigned int kGiProfile7Slice = 0x04;
constexpr unsigned int kGiProfile8Slice = 0x05;
constexpr unsigned int kGiProfile6Slice = 0x06;
constexpr unsigned int kGiProfile1SliceRev1 = 0x07;  // +me
constexpr unsigned int kGiProfile2SliceRev1 = 0x08;  // 2g +me
constexpr unsigned int kGiProfile1SliceRev2 = 0x09;  // double-memory 1g
constexpr unsigned int kGiProfile1SliceGfx = 0x0A;
constexpr unsigned int kGiProfile2SliceGfx = 0x0B;
constexpr unsigned int kGiProfile4SliceGfx = 0x0C;
constexpr unsigned int kGiProfile1SliceNoMe = 0x0D;
constexpr unsigned int kGiProfile2SliceNoMe = 0x0E;
constexpr unsigned int kGiProfile1SliceAllMe = 0x0F;
constexpr unsigned int kGiProfile2SliceAllMe = 0x10;
constexpr unsigned int kGiProfile3SliceGfx = 0x11;
// NVML_GPU_INSTANCE_PROFILE_COUNT in the 13.3 header. Enumeration probes past
// it until INVALID_ARGUMENT (nvml.md §7.13).
constexpr unsigned int kGiProfileCount = 0x12;

// §5.3 Compute instance profile indices.
constexpr unsigned int kCiProfile1Slice = 0x0;
constexpr unsigned int kCiProfile2Slice = 0x1;
constexpr unsigned int kCiProfile3Slice = 0x2;
constexpr unsigned int kCiProfile4Slice = 0x3;
constexpr unsigned int kCiProfile7Slice = 0x4;
constexpr unsigned int kCiProfile8Slice = 0x5;
constexpr unsigned int kCiProfile6Slice = 0x6;
constexpr unsigned int kCiProfile1SliceRev1 = 0x7;
constexpr unsigned int kCiProfile7SliceNvl = 0x8;
constexpr unsigned int kCiProfileCount = 0x9;
constexpr unsigned int kCiEngineProfileShared = 0x0;

// §4.2 capability bits (v3 structs only).
constexpr unsigned int kGiCapsP2p = 0x1;
constexpr unsigned int kGiCapsGfx = 0x2;
constexpr unsigned int kCiCapsGfx = 0x1;

// §5.4 MIG mode.
constexpr unsigned int kMigDisable = 0x0;
constexpr unsigned int kMigEnable = 0x1;

// §5.6 Buffer sizes, including the NUL.
constexpr unsigned int kDeviceUuidBufferSize = 80;
constexpr unsigned int kDeviceUuidV2BufferSize = 96;
constexpr unsigned int kDeviceNameBufferSize = 64;
constexpr unsigned int kDeviceNameV2BufferSize = 96;
constexpr unsigned int kSystemDriverVersionBufferSize = 80;
constexpr unsigned int kSystemNvmlVersionBufferSize = 80;
constexpr unsigned int kDevicePciBusIdBufferSize = 32;
constexpr unsigned int kDevicePciBusIdBufferV2Size = 16;

// Event types ("Event Types which user can be notified about"; "Types can
// be combined with bitwise or operator '|' when passed to
// nvmlDeviceRegisterEvents").
constexpr unsigned long long kEventTypeSingleBitEccError = 0x1;
constexpr unsigned long long kEventTypeDoubleBitEccError = 0x2;
constexpr unsigned long long kEventTypePState = 0x4;
constexpr unsigned long long kEventTypeXidCriticalError = 0x8;  // "XID critical error event."
constexpr unsigned long long kEventTypeClock = 0x10;
constexpr unsigned long long kEventTypePowerSourceChange = 0x80;
constexpr unsigned long long kEventMigConfigChange = 0x100;  // "MIG configuration change event."
constexpr unsigned long long kEventTypeSingleBitEccErrorStorm = 0x200;
constexpr unsigned long long kEventTypeDramRetirementEvent = 0x400;
constexpr unsigned long long kEventTypeDramRetirementFailure = 0x800;
constexpr unsigned long long kEventTypeNonFatalPoisonError = 0x1000;
constexpr unsigned long long kEventTypeFatalPoisonError = 0x2000;
// "GPU unavailable error event." (first in the 12.8 header)
constexpr unsigned long long kEventTypeGpuUnavailableError = 0x4000;
constexpr unsigned long long kEventTypeGpuRecoveryAction = 0x8000;
// nvmlEventTypeAll, "Mask of all event types.": of the 13.3 header, and of
// the 11.4 header (driver R470), which stops at nvmlEventMigConfigChange.
constexpr unsigned long long kEventTypeAll = 0xFF9F;
constexpr unsigned long long kEventTypeAllR470 = 0x19F;
// eventData "is set as 999 for unknown Xid error."
constexpr unsigned long long kUnknownXid = 999;

// gpuInstanceId / computeInstanceId "set to 0xFFFFFFFF otherwise" (process
// info when MIG is off; event data not attributable to an instance).
constexpr unsigned int kInvalidInstanceId = 0xFFFFFFFFu;

// Layout checks: every size and offset, as gcc lays out nvml.h on x86-64.
static_assert(sizeof(nvmlReturn_t) == 4);
static_assert(sizeof(nvmlEventSet_t) == 8);
static_assert(sizeof(nvmlEventData_t) == 32);
static_assert(offsetof(nvmlEventData_t, device) == 0);
static_assert(offsetof(nvmlEventData_t, eventType) == 8);
static_assert(offsetof(nvmlEventData_t, eventData) == 16);
static_assert(offsetof(nvmlEventData_t, gpuInstanceId) == 24);
static_assert(offsetof(nvmlEventData_t, computeInstanceId) == 28);
static_assert(sizeof(nvmlDevice_t) == 8);
static_assert(sizeof(nvmlGpuInstance_t) == 8);
static_assert(sizeof(nvmlComputeInstance_t) == 8);

static_assert(sizeof(nvmlGpuInstancePlacement_t) == 8);
static_assert(offsetof(nvmlGpuInstancePlacement_t, start) == 0);
static_assert(offsetof(nvmlGpuInstancePlacement_t, size) == 4);
static_assert(sizeof(nvmlComputeInstancePlacement_t) == 8);
static_assert(offsetof(nvmlComputeInstancePlacement_t, size) == 4);

static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24);
static_assert(offsetof(nvmlGpuInstanceInfo_t, device) == 0);
static_assert(offsetof(nvmlGpuInstanceInfo_t, id) == 8);
static_assert(offsetof(nvmlGpuInstanceInfo_t, profileId) == 12);
static_assert(offsetof(nvmlGpuInstanceInfo_t, placement) == 16);

static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32);
static_assert(offsetof(nvmlComputeInstanceInfo_t, device) == 0);
static_assert(offsetof(nvmlComputeInstanceInfo_t, gpuInstance) == 8);
static_assert(offsetof(nvmlComputeInstanceInfo_t, id) == 16);
static_assert(offsetof(nvmlComputeInstanceInfo_t, profileId) == 20);
static_assert(offsetof(nvmlComputeInstanceInfo_t, placement) == 24);

static_assert(sizeof(nvmlProcessInfo_t) == 24);
static_assert(offsetof(nvmlProcessInfo_t, pid) == 0);
static_assert(offsetof(nvmlProcessInfo_t, usedGpuMemory) == 8);
static_assert(offsetof(nvmlProcessInfo_t, gpuInstanceId) == 16);
static_assert(offsetof(nvmlProcessInfo_t, computeInstanceId) == 20);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16);
static_assert(offsetof(nvmlProcessInfo_v1_t, usedGpuMemory) == 8);

static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(offsetof(nvmlPciInfo_t, busIdLegacy) == 0);
static_assert(offsetof(nvmlPciInfo_t, domain) == 16);
static_assert(offsetof(nvmlPciInfo_t, bus) == 20);
static_assert(offsetof(nvmlPciInfo_t, device) == 24);
static_assert(offsetof(nvmlPciInfo_t, pciDeviceId) == 28);
static_assert(offsetof(nvmlPciInfo_t, pciSubSystemId) == 32);
static_assert(offsetof(nvmlPciInfo_t, busId) == 36);

static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(offsetof(nvmlMemory_t, free) == 8);
static_assert(offsetof(nvmlMemory_t, used) == 16);
static_assert(sizeof(nvmlMemory_v2_t) == 40);
static_assert(offsetof(nvmlMemory_v2_t, total) == 8);
static_assert(offsetof(nvmlMemory_v2_t, reserved) == 16);
static_assert(offsetof(nvmlMemory_v2_t, free) == 24);
static_assert(offsetof(nvmlMemory_v2_t, used) == 32);
static_assert(MakeVersion(sizeof(nvmlMemory_v2_t), 2) == kMemoryV2);

static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, id) == 0);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, isP2pSupported) == 4);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, sliceCount) == 8);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, instanceCount) == 12);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, multiprocessorCount) == 16);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, copyEngineCount) == 20);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, decoderCount) == 24);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, encoderCount) == 28);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, jpegCount) == 32);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, ofaCount) == 36);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, memorySizeMB) == 40);

static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, version) == 0);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, id) == 4);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, isP2pSupported) == 8);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, sliceCount) == 12);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, instanceCount) == 16);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, multiprocessorCount) == 20);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, copyEngineCount) == 24);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, decoderCount) == 28);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, encoderCount) == 32);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, jpegCount) == 36);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, ofaCount) == 40);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB) == 48);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, name) == 56);
static_assert(MakeVersion(sizeof(nvmlGpuInstanceProfileInfo_v2_t), 2) ==
              kGpuInstanceProfileInfoV2);

static_assert(sizeof(nvmlGpuInstanceProfileInfo_v3_t) == 152);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, version) == 0);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, id) == 4);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, sliceCount) == 8);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, instanceCount) == 12);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, multiprocessorCount) == 16);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, copyEngineCount) == 20);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, decoderCount) == 24);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, encoderCount) == 28);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, jpegCount) == 32);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, ofaCount) == 36);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, memorySizeMB) == 40);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, name) == 48);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, capabilities) == 144);
static_assert(MakeVersion(sizeof(nvmlGpuInstanceProfileInfo_v3_t), 3) ==
              kGpuInstanceProfileInfoV3);

static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36);
static_assert(offsetof(nvmlComputeInstanceProfileInfo_t, sliceCount) == 4);
static_assert(offsetof(nvmlComputeInstanceProfileInfo_t, sharedOfaCount) == 32);
static_assert(sizeof(nvmlComputeInstanceProfileInfo_v2_t) == 136);
static_assert(offsetof(nvmlComputeInstanceProfileInfo_v2_t, id) == 4);
static_assert(offsetof(nvmlComputeInstanceProfileInfo_v2_t, sharedOfaCount) == 36);
static_assert(offsetof(nvmlComputeInstanceProfileInfo_v2_t, name) == 40);
static_assert(MakeVersion(sizeof(nvmlComputeInstanceProfileInfo_v2_t), 2) ==
              kComputeInstanceProfileInfoV2);
static_assert(sizeof(nvmlComputeInstanceProfileInfo_v3_t) == 140);
static_assert(offsetof(nvmlComputeInstanceProfileInfo_v3_t, name) == 40);
static_assert(offsetof(nvmlComputeInstanceProfileInfo_v3_t, capabilities) == 136);
static_assert(MakeVersion(sizeof(nvmlComputeInstanceProfileInfo_v3_t), 3) ==
              kComputeInstanceProfileInfoV3);

}  // namespace migd::nvml_abi

#endif  // MIGD_DRIVER_NVML_NVML_ABI_H_
