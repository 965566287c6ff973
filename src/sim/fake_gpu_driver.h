// File: sim/fake_gpu_driver.h
//
// FakeGpuDriver: driver::GpuDriver over the simulator's hardware model
// (sim/machine.h), in memory: no state file, no NVML, no /proc tree. For fast
// engine and planner tests that need realistic MIG behaviour (placements,
// overlap, caps, GI/CI ids, IN_USE, MIG UUIDs) without the dlopen path; the
// file-backed libnvidia-ml-sim.so covers NvmlDriver itself.
//
// Errors follow GpuDriver's contract: the NVML code the hardware would give,
// mapped by NvmlResultToCode (sim/sim_status.h), with the NVML error name in
// the message, e.g. "creating GI profile 9 at 4:4 on GPU 0:
// NVML_ERROR_INSUFFICIENT_RESOURCES (Insufficient Resources): …".
//
// Every GpuDriver call is counted in the state's counters under its method
// name ("CreateGi" → "SUCCESS" / "ERROR_IN_USE" …).
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(auto driver, FakeGpuDriver::Create("h100-80gb:1"));
//   MIGD_ASSIGN_OR_RETURN(auto gi, driver->CreateGi(GpuIndex(0), GiProfileId(9), {4, 4}));
//   MIGD_ASSIGN_OR_RETURN(auto ci, driver->CreateCi(GpuIndex(0), gi.id));
//   MIGD_RETURN_IF_ERROR(driver->AttachProcess(ci.mig_uuid, 4242, 1 << 30));
//   driver->DestroyCi(GpuIndex(0), gi.id, ci.id);  // kFailedPrecondition (IN_USE)
//
// Thread-safety: all methods are thread-safe (one mutex around the model).
#ifndef MIGD_SIM_FAKE_GPU_DRIVER_H_
#define MIGD_SIM_FAKE_GPU_DRIVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/mutex.h"
#include "base/status.h"
#include "driver/gpu_driver.h"
#include "mig/catalog.h"
#include "mig/placement.h"
#include "sim/machine.h"
#include "sim/state.h"

namespace migd::sim {

class FakeGpuDriver final : public driver::GpuDriver {
 public:
  // A fresh machine from a MIGD_SIM_GPUS-style list, e.g.
  // "a100-40gb:2,h100-80gb:1,a30-24gb:1:mig-off". kInvalidArgument for a bad
  // list or an unknown model. `nonce` fixes the GPU UUIDs.
  static StatusOr<std::unique_ptr<FakeGpuDriver>> Create(
      std::string_view gpus, GiIdPolicy gi_id_policy = {}, uint64_t nonce = 0,
      const mig::Catalog& catalog = mig::Catalog::Default());

  // A machine in a given state (for example a state file's content).
  // kDataLoss if the state does not validate against `catalog`.
  static StatusOr<std::unique_ptr<FakeGpuDriver>> FromState(
      SimState state, const mig::Catalog& catalog = mig::Catalog::Default());

  // driver::GpuDriver.
  StatusOr<driver::DriverVersions> GetVersions() override;
  StatusOr<std::vector<driver::GpuInfo>> ListGpus() override;
  StatusOr<driver::MigModeInfo> GetMigMode(GpuIndex gpu) override;
  StatusOr<std::vector<driver::GiProfileInfo>> GetGiProfiles(GpuIndex gpu) override;
  StatusOr<std::vector<mig::Placement>> GetGiPossiblePlacements(GpuIndex gpu,
                                                                GiProfileId profile) override;
  StatusOr<driver::GpuInstanceInfo> CreateGi(GpuIndex gpu, GiProfileId profile,
                                             const mig::Placement& placement) override;
  StatusOr<driver::ComputeInstanceInfo> CreateCi(GpuIndex gpu, NvmlGiId gi) override;
  Status DestroyCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci) override;
  Status DestroyGi(GpuIndex gpu, NvmlGiId gi) override;
  StatusOr<std::vector<driver::GpuInstanceInfo>> ListGpuInstances(GpuIndex gpu) override;
  StatusOr<std::vector<driver::ProcessInfo>> ListProcesses(GpuIndex gpu, NvmlGiId gi,
                                                           NvmlCiId ci) override;
  // A FakeEventWatch (sim/fake_event_watch.h) of this driver's event log.
  // REQUIRES: the driver outlives the watch.
  StatusOr<std::unique_ptr<driver::GpuEventWatch>> OpenEventWatch() override;

  // Test hooks.

  // Records the events of `specs` (sim/events.h syntax, no delays) now, as
  // migdSimInjectEvents does. kInvalidArgument for a bad spec or an unknown
  // GPU; kFailedPrecondition (NVML_ERROR_GPU_IS_LOST) for an event on a
  // lost GPU.
  Status InjectEvents(std::string_view specs);
  // The kinds Register accepts (default: all three).
  void SetSupportedEventKinds(driver::GpuEventKinds kinds);

  // Marks / unmarks a process on a MIG device. kNotFound if no CI has that
  // UUID (or, for detach, the pid is not marked on it).
  Status AttachProcess(const MigUuid& mig_uuid, uint32_t pid, uint64_t used_gpu_memory_bytes);
  Status DetachProcess(const MigUuid& mig_uuid, uint32_t pid);

  // Simulated reboot / driver reload / GPU reset: every GI and CI is gone,
  // pending MIG modes apply.
  void Reboot();

  // Sets the pending MIG mode; it takes effect at Reboot(). Returns the
  // activation status as NVML would (OK if already current; kFailedPrecondition
  // with NVML_ERROR_IN_USE while GIs exist, with NVML_ERROR_RESET_REQUIRED
  // otherwise). kInvalidArgument for an unknown GPU.
  Status SetMigMode(GpuIndex gpu, driver::MigMode mode);

  // Runs `fn` with exclusive access to the model, e.g. to change the layout
  // behind the driver's back as another NVML client would.
  void WithMachine(const std::function<void(Machine&)>& fn);

  // A copy of the whole state (GIs, CIs, processes, counters).
  SimState Snapshot() const;

 private:
  FakeGpuDriver(SimState state, const mig::Catalog& catalog);

  // Counts `method` with `result` and converts it.
  Status Finish(std::string_view method, const SimStatus& result, std::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // kInvalidArgument for an unknown GPU, kPermissionDenied for a GPU marked
  // no-permission.
  StatusOr<const SimGpu*> AccessibleGpu(Machine& m, GpuIndex gpu, std::string_view method)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  friend class FakeEventWatch;

  const mig::Catalog* catalog_;
  mutable Mutex mu_;
  // Signalled by every change of the model (FakeEventWatch::Wait).
  CondVar events_cv_;
  SimState state_ ABSL_GUARDED_BY(mu_);
  driver::GpuEventKinds supported_events_ ABSL_GUARDED_BY(mu_) = driver::GpuEventKinds::All();
};

}  // namespace migd::sim

#endif  // MIGD_SIM_FAKE_GPU_DRIVER_H_
