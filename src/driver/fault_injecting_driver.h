// File: driver/fault_injecting_driver.h
//
// FaultInjectingDriver: a GpuDriverWrapper that makes chosen calls fail, to
// test rollback and recovery (style.md §2.4; leveldb's fault_injection_test).
// It counts every call per method, failed or not.
//
// Rules:
//   FailNthCall(m, n, s)  the n-th call of m from now on (n = 1: the next one)
//                         returns `s`; one-shot.
//   FailAlways(m, s)      every call of m returns `s` until Clear(m).
// By default a failing call is not forwarded (the hardware is untouched).
// With Timing::kAfterCall it is forwarded first and its result discarded: the
// change happened but the caller sees an error, as after a lost reply.
//
// Example:
//   FaultInjectingDriver faults(&sim_driver);
//   faults.FailNthCall(Method::kCreateCi, 1, InternalError("injected"));
//   EXPECT_FALSE(engine.Allocate(...).ok());   // GI created, CI failed
//   EXPECT_EQ(faults.CallCount(Method::kDestroyGi), 1);   // rolled back
//
// Thread-safety: all methods are thread-safe. Rules are evaluated atomically
// with the call counting; the forwarded call runs without the lock.
#ifndef MIGD_DRIVER_FAULT_INJECTING_DRIVER_H_
#define MIGD_DRIVER_FAULT_INJECTING_DRIVER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "driver/gpu_driver_wrapper.h"

namespace migd::driver {

class FaultInjectingDriver : public GpuDriverWrapper {
 public:
  enum class Method {
    kGetVersions,
    kListGpus,
    kGetMigMode,
    kGetGiProfiles,
    kGetGiPossiblePlacements,
    kCreateGi,
    kCreateCi,
    kDestroyCi,
    kDestroyGi,
    kListGpuInstances,
    kListProcesses,
    kOpenEventWatch,
    kCount,  // not a method
  };
  enum class Timing {
    kInsteadOfCall,  // return the error; do not forward
    kAfterCall,  // forward, discard the result, return the error
  };
  static constexpr int kMethodCount = static_cast<int>(Method::kCount);

  // "CreateGi", ...
  static std::string_view MethodName(Method m);

  // REQUIRES: `target` outlives this driver. Not owned.
  explicit FaultInjectingDriver(GpuDriver* target) : GpuDriverWrapper(target) {}

  // The n-th call of `m` after this one returns `status`. REQUIRES: n >= 1
  // and !status.ok(). Several rules may be pending for one method.
  void FailNthCall(Method m, int n, Status status, Timing timing = Timing::kInsteadOfCall);
  // Every call of `m` returns `status` until Clear(m). REQUIRES: !status.ok().
  void FailAlways(Method m, Status status, Timing timing = Timing::kInsteadOfCall);
  // Drops the rules of `m` (ClearAll: of every method). Counts are kept.
  void Clear(Method m);
  void ClearAll();

  // Calls of `m` so far (forwarded or failed).
  int CallCount(Method m) const;
  // Calls of `m` that returned an injected error.
  int InjectedCount(Method m) const;

  StatusOr<DriverVersions> GetVersions() override;
  StatusOr<std::vector<GpuInfo>> ListGpus() override;
  StatusOr<MigModeInfo> GetMigMode(GpuIndex gpu) override;
  StatusOr<std::vector<GiProfileInfo>> GetGiProfiles(GpuIndex gpu) override;
  StatusOr<std::vector<mig::Placement>> GetGiPossiblePlacements(GpuIndex gpu,
                                                                GiProfileId profile) override;
  StatusOr<GpuInstanceInfo> CreateGi(GpuIndex gpu, GiProfileId profile,
                                     const mig::Placement& placement) override;
  StatusOr<ComputeInstanceInfo> CreateCi(GpuIndex gpu, NvmlGiId gi) override;
  Status DestroyCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci) override;
  Status DestroyGi(GpuIndex gpu, NvmlGiId gi) override;
  StatusOr<std::vector<GpuInstanceInfo>> ListGpuInstances(GpuIndex gpu) override;
  StatusOr<std::vector<ProcessInfo>> ListProcesses(GpuIndex gpu, NvmlGiId gi,
                                                   NvmlCiId ci) override;
  // The watch itself is the target's, unwrapped: faults of its Register and
  // Wait come from the target (e.g. MIGD_SIM_FAULTS in the simulator).
  StatusOr<std::unique_ptr<GpuEventWatch>> OpenEventWatch() override;

 private:
  struct Fault {
    Status status;
    Timing timing = Timing::kInsteadOfCall;
  };
  struct Rule {
    int64_t at_call = 0;  // the absolute call number that fails; 0 = always
    Fault fault;
  };
  struct PerMethod {
    int64_t calls = 0;
    int64_t injected = 0;
    std::vector<Rule> rules;
  };

  // Counts one call of `m` and returns the fault to inject, if any.
  std::optional<Fault> OnCall(Method m);

  // Runs `forward` unless a fault replaces it.
  template <typename R, typename F>
  R Intercept(Method m, F&& forward) {
    std::optional<Fault> fault = OnCall(m);
    if (!fault) return forward();
    if (fault->timing == Timing::kAfterCall) {
      R ignored = forward();
      (void)ignored;
    }
    return R(fault->status);
  }

  mutable Mutex mu_;
  std::array<PerMethod, kMethodCount> methods_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::driver

#endif  // MIGD_DRIVER_FAULT_INJECTING_DRIVER_H_
