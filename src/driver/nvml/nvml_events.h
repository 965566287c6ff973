// File: driver/nvml/nvml_events.h
//
// NvmlEventWatch: GpuEventWatch (driver/gpu_events.h) over one NVML event
// set. NvmlDriver::OpenEventWatch makes it. The calls, as nvml.h documents
// them:
//   Open        nvmlEventSetCreate ("Create an empty set of events")
//   Register    nvmlDeviceGetHandleByIndex_v2 (once per GPU), then
//               nvmlDeviceGetSupportedEventTypes and nvmlDeviceRegisterEvents
//               with the supported subset of nvmlEventTypeXidCriticalError,
//               nvmlEventMigConfigChange and nvmlEventTypeGpuUnavailableError:
//               "If function reports NVML_ERROR_NOT_SUPPORTED ... None of the
//               requested eventTypes are registered", so an unexpected
//               NOT_SUPPORTED is retried type by type; "If function reports
//               NVML_ERROR_UNKNOWN, event set is in undefined state and should
//               be freed": the set is re-made with the other GPUs;
//   Wait        nvmlEventSetWait_v2 with min(timeout, kMaxWait) ms;
//               NVML_ERROR_TIMEOUT ("if no event arrived in specified timeout
//               or interrupt arrived") is no event; NVML_ERROR_GPU_IS_LOST
//               ("if a GPU has fallen off the bus") is traced to the GPUs
//               whose nvmlDeviceGetSupportedEventTypes answers GPU_IS_LOST,
//               each reported once as kGpuLost, and the set is re-made
//               without them;
//   Close       nvmlEventSetFree ("Releases events in the set").
// The set is also freed by the session's close hook (NvmlSession::
// AddCloseHook) if the owner has not freed it when the session closes.
//
// Thread-safety: all methods are thread-safe; one mutex serialises them, and
// Wait holds it (and one session token) during nvmlEventSetWait_v2, so a
// concurrent Register or Close waits for that Wait to return.
#ifndef MIGD_DRIVER_NVML_NVML_EVENTS_H_
#define MIGD_DRIVER_NVML_NVML_EVENTS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "base/status.h"
#include "driver/gpu_events.h"
#include "driver/nvml/nvml_session.h"

namespace migd::driver {

class NvmlEventWatch final : public GpuEventWatch {
 public:
  // Creates the event set in the current session. kUnimplemented when the
  // library lacks one of the five event functions; kUnavailable when the
  // session is not open; the FromNvml status of nvmlEventSetCreate.
  static StatusOr<std::unique_ptr<NvmlEventWatch>> Open(std::shared_ptr<NvmlSession> session);

  ~NvmlEventWatch() override;
  NvmlEventWatch(const NvmlEventWatch&) = delete;
  NvmlEventWatch& operator=(const NvmlEventWatch&) = delete;

  StatusOr<GpuEventKinds> Register(GpuIndex gpu, GpuEventKinds wanted) override;
  StatusOr<std::optional<GpuEvent>> Wait(std::chrono::milliseconds timeout) override;
  Status Close() override;

 private:
  class State;  // shared with the session's close hook
  explicit NvmlEventWatch(std::shared_ptr<State> state);

  const std::shared_ptr<State> state_;
  uint64_t hook_id_ = 0;
};

}  // namespace migd::driver

#endif  // MIGD_DRIVER_NVML_NVML_EVENTS_H_
