// File: driver/gpu_events.h
//
// GPU health events as GpuDriver delivers them (GpuDriver::OpenEventWatch):
// Xid errors, MIG configuration changes and lost GPUs, over NVML's event
// sets (nvml.h "Event Handling Methods": nvmlEventSetCreate,
// nvmlDeviceGetSupportedEventTypes, nvmlDeviceRegisterEvents,
// nvmlEventSetWait_v2, nvmlEventSetFree; all in the oldest header checked,
// NVML 11.1).
//
// One owner per driver: the health monitor opens one GpuEventWatch for the
// life of the NVML session, registers every parent GPU, and calls Wait in a
// loop on its own thread. The watch never touches the allocation path: it
// takes no lock any GpuDriver method takes, and its Wait holds no driver
// resource but an NVML session token for at most one bounded timeout.
//
// Example (the monitor's loop; policy left out):
//   MIGD_ASSIGN_OR_RETURN(std::unique_ptr<GpuEventWatch> watch, driver->OpenEventWatch());
//   for (const GpuInfo& gpu : gpus) {
//     StatusOr<GpuEventKinds> got = watch->Register(gpu.index, GpuEventKinds::All());
//     if (!got.ok()) ... the GPU gets no events (log it; a lost GPU: mark it)
//   }
//   while (!stopping) {
//     StatusOr<std::optional<GpuEvent>> e = watch->Wait(std::chrono::milliseconds(500));
//     if (!e.ok()) { back off; continue; }   // the watch stays usable
//     if (*e) Handle(**e);                     // nullopt: timeout
//   }
//   watch->Close();   // or destroy it; before the session closes (see below)
//
// Thread-safety: a GpuEventWatch is safe for concurrent use, but it is meant
// for one thread: concurrent Wait calls each get a different event or a
// timeout, never the same event twice. Close() may be called from another
// thread while Wait runs: the Wait returns within its timeout.
#ifndef MIGD_DRIVER_GPU_EVENTS_H_
#define MIGD_DRIVER_GPU_EVENTS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/ids.h"
#include "base/status.h"

namespace migd::driver {

enum class GpuEventKind {
  // nvmlEventTypeXidCriticalError (0x8, "XID critical error event").
  kXid,
  // nvmlEventMigConfigChange (0x100, "MIG configuration change event"): a GI
  // or CI was created or destroyed on the GPU, by this process or another.
  kMigConfigChange,
  // The GPU "has fallen off the bus or is otherwise inaccessible": an
  // nvmlEventTypeGpuUnavailableError event (0x4000, "GPU unavailable error
  // event", NVML 12.8+ headers), or NVML_ERROR_GPU_IS_LOST from the wait or
  // from the GPU itself (older drivers have no event type for it).
  kGpuLost,
};

// "xid", "mig-config-change", "gpu-lost".
std::string_view GpuEventKindName(GpuEventKind kind);

// A set of event kinds.
struct GpuEventKinds {
  bool xid = false;
  bool mig_config_change = false;
  bool gpu_lost = false;

  static GpuEventKinds All() { return {true, true, true}; }
  bool empty() const { return !xid && !mig_config_change && !gpu_lost; }
  bool Has(GpuEventKind kind) const;
  // "xid,mig-config-change"; "none" when empty.
  std::string ToString() const;
  friend bool operator==(const GpuEventKinds&, const GpuEventKinds&) = default;
};

// One event, as nvmlEventData_t reports it.
struct GpuEvent {
  GpuIndex gpu;  // the registered GPU it occurred on ("Specific device where the event occurred")
  GpuEventKind kind = GpuEventKind::kXid;
  // kXid: the Xid ("Stores Xid error for the device in the event of
  // nvmlEventTypeXidCriticalError"); kUnknownXid when NVML does not know it
  // ("eventData is set as 999 for unknown Xid error"). 0 for other kinds.
  uint64_t xid = 0;
  // kXid only, when MIG is enabled and the Xid "is attributable to a GPU
  // instance" / "to a compute instance"; nullopt where nvml.h's
  // gpuInstanceId / computeInstanceId "is set to 0xFFFFFFFF".
  std::optional<NvmlGiId> gi;
  std::optional<NvmlCiId> ci;
  friend bool operator==(const GpuEvent&, const GpuEvent&) = default;
};

inline constexpr uint64_t kUnknownXid = 999;

// "GPU 0: xid 79 (GI 3, CI 0)", "GPU 1: gpu-lost".
std::string DescribeGpuEvent(const GpuEvent& event);

// The event set of one NVML session.
//
// Contract:
//   * Open (GpuDriver::OpenEventWatch) creates the set; Close() or the
//     destructor frees it. The owner must free it before the session closes
//     (before destroying the driver or closing its NvmlSession). NvmlDriver
//     also frees a watch that is still open when its session closes, just
//     before nvmlShutdown, and every later call of that watch returns
//     kFailedPrecondition: the set died with the session.
//   * Events that occurred before a GPU was registered are not delivered
//     ("All events that occurred before this call are not recorded").
//   * Wait never blocks longer than min(timeout, kMaxWait) plus the time of
//     one NVML call; NVML may return earlier ("e.g. when interrupt arrives"),
//     which Wait reports as a timeout (nullopt).
//   * A lost GPU is reported once, as a kGpuLost event, and then left out of
//     the set: NVML cannot unregister a device, so the watch makes a new set
//     and registers the other GPUs again. Events of those GPUs that arrive
//     while it does so may be missed: after a kGpuLost event the owner
//     should re-check the GPUs it cares about (e.g. a drift check).
class GpuEventWatch {
 public:
  // The longest wait one Wait call makes.
  static constexpr std::chrono::milliseconds kMaxWait{5000};

  // Frees the event set if it is still open (as Close()).
  virtual ~GpuEventWatch() = default;

  // Registers `gpu` for the kinds of `wanted` it supports and returns those
  // (nvmlDeviceGetSupportedEventTypes first: NVML registers none of the
  // requested types when one is unsupported). An empty set when the GPU
  // supports none of them (no error: the owner decides whether to poll).
  // Registering a GPU again adds kinds. kNotFound for an unknown GPU index;
  // kFailedPrecondition naming NVML_ERROR_GPU_IS_LOST (FromNvml's mapping)
  // for a lost GPU; kFailedPrecondition after Close() or after its session
  // closed; kUnavailable while the session is closed or closing.
  virtual StatusOr<GpuEventKinds> Register(GpuIndex gpu, GpuEventKinds wanted) = 0;

  // The next event of a registered GPU, waiting at most
  // min(timeout, kMaxWait); nullopt if none arrived. Events of kinds that
  // were not asked for are skipped. On NVML_ERROR_GPU_IS_LOST the watch finds
  // which registered GPU answers GPU_IS_LOST and returns kGpuLost events for
  // them, one per call. Errors: kFailedPrecondition after Close() or after
  // the session closed; kUnavailable while the session is closed; the
  // FromNvml status of another NVML failure (the set stays usable, or was
  // re-made, with every GPU registered again).
  virtual StatusOr<std::optional<GpuEvent>> Wait(std::chrono::milliseconds timeout) = 0;

  // Frees the set (nvmlEventSetFree). Idempotent; OK if the session already
  // freed it. After Close(), Register and Wait return kFailedPrecondition.
  virtual Status Close() = 0;
};

}  // namespace migd::driver

#endif  // MIGD_DRIVER_GPU_EVENTS_H_
