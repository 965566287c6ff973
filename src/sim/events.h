// File: sim/events.h
//
// The simulated machine's events (nvml.h "Event Handling Methods"): the
// specs of injected events (MIGD_SIM_EVENTS, migdSimInjectEvents,
// FakeGpuDriver::InjectEvents) and the event types each GPU supports. The
// event log itself is SimState::events (sim/state.h), appended to by
// Machine (sim/machine.h): every GI/CI create and destroy records an
// nvmlEventMigConfigChange, InjectEvent records the rest. Readers (an
// nvmlEventSet_t of libnvidia-ml-sim.so, a FakeGpuDriver event watch)
// remember the last sequence number they saw.
//
// Spec syntax, a comma-separated list of
//   xid=<N>@<gpu>[/<gi>[/<ci>]][+<ms>]   an Xid (nvmlEventTypeXidCriticalError),
//                                       attributed to GI <gi> (and CI <ci>)
//   mig-config@<gpu>[+<ms>]             an nvmlEventMigConfigChange, as
//                                       another NVML client's change makes
//   gpu-lost@<gpu>[+<ms>]               the GPU falls off the bus: its
//                                       calls answer GPU_IS_LOST
//   gpu-back@<gpu>[+<ms>]               a lost GPU answers again, its GIs
//                                       and CIs as they were
//   gpu-reset@<gpu>[+<ms>]              a lost GPU answers again after a
//                                       reset: no GIs or CIs left
// where +<ms> delays the event by that many milliseconds (after the first
// nvmlInit of the process for MIGD_SIM_EVENTS; not allowed elsewhere).
// Example: "xid=79@0+500,xid=31@1/2/0,gpu-lost@1+2000".
//
// Thread-safety: value types and pure functions.
#ifndef MIGD_SIM_EVENTS_H_
#define MIGD_SIM_EVENTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace migd::sim {

enum class EventSpecKind { kXid, kMigConfigChange, kGpuLost, kGpuBack, kGpuReset };

struct EventSpec {
  EventSpecKind kind = EventSpecKind::kXid;
  uint32_t gpu = 0;
  uint64_t xid = 0;  // kXid only
  std::optional<uint32_t> gi;  // kXid only
  std::optional<uint32_t> ci;  // kXid only; requires gi
  uint32_t delay_ms = 0;
  friend bool operator==(const EventSpec&, const EventSpec&) = default;
};

// Parses a spec list (syntax above). kInvalidArgument naming the bad entry.
// `allow_delay` false rejects "+<ms>".
StatusOr<std::vector<EventSpec>> ParseEventSpecs(std::string_view text, bool allow_delay);

// The event types a GPU supports by default (nvmlDeviceGetSupportedEventTypes):
// single- and double-bit ECC, PState, Xid and clock events, plus
// nvmlEventMigConfigChange on a MIG-capable GPU and, unless `legacy` (the
// R470 library, NVML 11.4), nvmlEventTypeGpuUnavailableError.
uint64_t DefaultSupportedEventTypes(bool mig_capable, bool legacy);

// Every type bit the library knows (nvmlEventTypeAll of its header).
uint64_t KnownEventTypes(bool legacy);

}  // namespace migd::sim

#endif  // MIGD_SIM_EVENTS_H_
