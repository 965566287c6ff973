// File: sim/fake_event_watch.h
//
// FakeEventWatch: driver::GpuEventWatch over FakeGpuDriver's event log
// (SimState::events; sim/events.h), for engine tests without NVML. It keeps
// GpuEventWatch's contract (driver/gpu_events.h) as NvmlEventWatch does over
// the simulator library: events recorded before a registration are not
// delivered, a lost GPU is reported once and then left out, a kind the fake
// does not support (FakeGpuDriver::SetSupportedEventKinds) is not
// registered. Each event is delivered once (no coalescing).
//
// Thread-safety: thread-safe; its state is guarded by the driver's mutex,
// and a Wait blocks on the driver's condition variable, which every change
// of the model signals. REQUIRES: the driver outlives the watch.
#ifndef MIGD_SIM_FAKE_EVENT_WATCH_H_
#define MIGD_SIM_FAKE_EVENT_WATCH_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "driver/gpu_events.h"
#include "sim/fake_gpu_driver.h"

namespace migd::sim {

class FakeEventWatch final : public driver::GpuEventWatch {
 public:
  explicit FakeEventWatch(FakeGpuDriver* driver) : driver_(driver) {}
  ~FakeEventWatch() override = default;

  StatusOr<driver::GpuEventKinds> Register(GpuIndex gpu, driver::GpuEventKinds wanted) override;
  StatusOr<std::optional<driver::GpuEvent>> Wait(std::chrono::milliseconds timeout) override;
  Status Close() override;

 private:
  // The next event to deliver (nullopt: none), marked delivered.
  std::optional<driver::GpuEvent> Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_->mu_);
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_->mu_);
  const SimEvent* NextEvent() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_->mu_);

  FakeGpuDriver* const driver_;
  bool closed_ ABSL_GUARDED_BY(driver_->mu_) = false;
  // GPU index -> registered kind -> event_seq at registration.
  std::map<uint32_t, std::map<driver::GpuEventKind, uint64_t>> registered_
      ABSL_GUARDED_BY(driver_->mu_);
  std::set<uint64_t> delivered_ ABSL_GUARDED_BY(driver_->mu_);
};

}  // namespace migd::sim

#endif  // MIGD_SIM_FAKE_EVENT_WATCH_H_
