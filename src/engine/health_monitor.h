// File: engine/health_monitor.h
//
// HealthMonitor: the one owner of the GPU event watch (driver/gpu_events.h)
// of a process. Its thread waits for events (bounded waits, never 0 ms),
// classifies each with ClassifyGpuEvent and tells a HealthSink:
//
//   event                                   action
//   Xid in HealthOptions::ignored_xids      none (counted, logged)
//   Xid attributed to a GI (and CI)         the instance is Unhealthy
//   Xid not attributed (0xFFFFFFFF ids)     the GPU is Unhealthy
//   GPU lost (event or GPU_IS_LOST)         the GPU is Unhealthy (cause: lost)
//   MIG configuration change                an immediate drift check of the GPU
//
// With HealthOptions::clear_recovered_gpus, every recovery_probe the thread
// also asks the sink for the GPUs whose only mark is a loss and lists the
// GPUs (GpuDriver::ListGpus, which reads each GPU's UUID and MIG mode): one
// listed again under its UUID is cleared by policy (HealthSink::ClearRecoveredGpu) and
// registered for events again.
//
// One log line per event: GPU, GI, CI, Xid and the action taken.
// Lifecycle: Start opens the watch and registers each GPU for every kind it
// supports (a GPU with none, or one that cannot be registered, is logged and
// left out; a lost one is marked Unhealthy); Stop (or the destructor) stops
// the thread and closes the watch. The owner must Stop it before the NVML
// session closes. The sink is called on the monitor's thread, one call at a
// time, and must not call back into the monitor.
//
// Thread-safety: Stop, counters and WaitForEvents are thread-safe.
#ifndef MIGD_ENGINE_HEALTH_MONITOR_H_
#define MIGD_ENGINE_HEALTH_MONITOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/ids.h"
#include "base/mutex.h"
#include "base/status.h"
#include "driver/gpu_driver.h"
#include "driver/gpu_events.h"

namespace migd::engine {

enum class HealthAction { kIgnore, kInstanceUnhealthy, kGpuUnhealthy, kDriftCheck };

// A GPU whose only health mark is a loss (HealthSink::LostGpus).
struct LostGpu {
  GpuIndex gpu;
  GpuUuid uuid;  // the UUID it had; empty if it was never listed
};

// Where the monitor's decisions go (the Manager's health state).
class HealthSink {
 public:
  virtual ~HealthSink() = default;
  // An Xid attributed to GI `gi` (and CI `ci` when known) of `gpu`.
  virtual void MarkInstanceUnhealthy(GpuIndex gpu, NvmlGiId gi, std::optional<NvmlCiId> ci,
                                     uint64_t xid) = 0;
  // An unattributed critical Xid or a lost GPU; `reason` is for operators.
  virtual void MarkGpuUnhealthy(GpuIndex gpu, const std::string& reason) = 0;
  // A lost GPU (the event, or GPU_IS_LOST at registration): as
  // MarkGpuUnhealthy, with the loss as the mark's cause, which a policy may
  // clear once the GPU answers again.
  virtual void MarkGpuLost(GpuIndex gpu, const std::string& reason) {
    MarkGpuUnhealthy(gpu, reason);
  }
  // The GPUs whose only mark is a loss.
  virtual std::vector<LostGpu> LostGpus() { return {}; }
  // `gpu` answers again under its UUID: clears its loss mark (policy).
  virtual void ClearRecoveredGpu(GpuIndex gpu) { (void)gpu; }
  // Another NVML client (or migd) changed the GPU's MIG layout.
  virtual void OnMigConfigChange(GpuIndex gpu) = 0;
  // Every event handled (ignored ones included), after its action's call.
  virtual void OnEvent(const driver::GpuEvent& event, HealthAction action) {
    (void)event;
    (void)action;
  }
};

struct HealthOptions {
  bool enabled = true;
  // The application-error Xids NVIDIA's device plugin ignores
  // (NVIDIA/k8s-device-plugin internal/rm/health.go, ignoredXids: 13
  // graphics engine exception, 31 GPU memory page fault, 43 GPU stopped
  // processing, 45 preemptive cleanup, 68 video processor exception, 109
  // context switch timeout).
  std::set<uint64_t> ignored_xids = {13, 31, 43, 45, 68, 109};
  // One Wait of the watch; clamped to 1 ms .. GpuEventWatch::kMaxWait.
  std::chrono::milliseconds wait{500};
  // After a Wait error, before the next Wait.
  std::chrono::milliseconds error_backoff{1000};
  // health.clearRecoveredGpus: clear the mark of a lost GPU that answers
  // again; probed every `recovery_probe` (health.recoveryProbeSeconds) while
  // a GPU's only mark is a loss.
  bool clear_recovered_gpus = false;
  std::chrono::milliseconds recovery_probe{10000};
};

// "ignored", "instance-unhealthy", "gpu-unhealthy", "drift-check".
std::string_view HealthActionName(HealthAction action);

// The table in the file comment.
HealthAction ClassifyGpuEvent(const driver::GpuEvent& event, const HealthOptions& options);

class HealthMonitor {
 public:
  struct Counters {
    uint64_t events = 0;  // handled, every kind and action
    uint64_t ignored = 0;
    uint64_t wait_errors = 0;
    uint64_t recovery_probes = 0;  // ticks of the recovery probe
    uint64_t recovered = 0;        // lost GPUs cleared by policy
  };

  // Opens the watch, registers `gpus` and starts the thread. Errors of
  // OpenEventWatch (kUnimplemented: the driver has no event API). With
  // options.enabled false: no watch, no thread (OK).
  // REQUIRES: driver and sink outlive the monitor.
  static StatusOr<std::unique_ptr<HealthMonitor>> Start(driver::GpuDriver& driver,
                                                        const std::vector<GpuIndex>& gpus,
                                                        HealthOptions options, HealthSink& sink);
  ~HealthMonitor();  // Stop()
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // Stops the thread (within one wait), closes the watch and destroys it
  // (it may keep the NVML session open until then). Idempotent.
  void Stop();

  Counters counters() const;
  // Blocks until at least `n` events were handled (tests: explicit sync).
  void WaitForEvents(uint64_t n) const;
  // Blocks until at least `n` recovery probes ran (tests: explicit sync).
  void WaitForRecoveryProbes(uint64_t n) const;

 private:
  HealthMonitor(HealthOptions options, driver::GpuDriver& driver, HealthSink& sink,
                std::unique_ptr<driver::GpuEventWatch> watch);
  void Run();
  void Handle(const driver::GpuEvent& event);
  // The recovery probe (file comment); on the monitor's thread.
  void ProbeLostGpus();
  // Whether `lost` answers again: listed in `listed` under its UUID.
  static bool Answers(const LostGpu& lost, const std::vector<driver::GpuInfo>& listed);

  const HealthOptions options_;
  driver::GpuDriver& driver_;
  HealthSink& sink_;
  // Null when disabled and after Stop. Used by the thread while it runs;
  // reset by Stop after the join.
  std::unique_ptr<driver::GpuEventWatch> watch_;
  mutable Mutex mu_;
  mutable CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Counters counters_ ABSL_GUARDED_BY(mu_);
  Mutex stop_mu_;  // serialises Stop; taken before mu_
  bool closed_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_HEALTH_MONITOR_H_
