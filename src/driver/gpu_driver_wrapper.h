// File: driver/gpu_driver_wrapper.h
//
// GpuDriverWrapper forwards every GpuDriver call to another GpuDriver, in the
// manner of leveldb's EnvWrapper: a decorator overrides only the methods it
// cares about (FaultInjectingDriver, later metrics or tracing decorators).
//
// Example:
//   class LoggingDriver : public GpuDriverWrapper {
//    public:
//     using GpuDriverWrapper::GpuDriverWrapper;
//     Status DestroyGi(GpuIndex gpu, NvmlGiId gi) override {
//       spdlog::info("destroying GI {}", gi.value());
//       return GpuDriverWrapper::DestroyGi(gpu, gi);
//     }
//   };
//
// Thread-safety: as thread-safe as the wrapped driver (every GpuDriver is).
#ifndef MIGD_DRIVER_GPU_DRIVER_WRAPPER_H_
#define MIGD_DRIVER_GPU_DRIVER_WRAPPER_H_

#include <vector>

#include "driver/gpu_driver.h"

namespace migd::driver {

class GpuDriverWrapper : public GpuDriver {
 public:
  // REQUIRES: `target` is not null and outlives this wrapper. Not owned.
  explicit GpuDriverWrapper(GpuDriver* target) : target_(target) {}

  GpuDriver* target() const { return target_; }

  StatusOr<DriverVersions> GetVersions() override { return target_->GetVersions(); }
  StatusOr<std::vector<GpuInfo>> ListGpus() override { return target_->ListGpus(); }
  std::vector<GpuIndex> SkippedGpus() override { return target_->SkippedGpus(); }
  StatusOr<MigModeInfo> GetMigMode(GpuIndex gpu) override { return target_->GetMigMode(gpu); }
  StatusOr<std::vector<GiProfileInfo>> GetGiProfiles(GpuIndex gpu) override {
    return target_->GetGiProfiles(gpu);
  }
  StatusOr<std::vector<mig::Placement>> GetGiPossiblePlacements(GpuIndex gpu,
                                                                GiProfileId profile) override {
    return target_->GetGiPossiblePlacements(gpu, profile);
  }
  StatusOr<GpuInstanceInfo> CreateGi(GpuIndex gpu, GiProfileId profile,
                                     const mig::Placement& placement) override {
    return target_->CreateGi(gpu, profile, placement);
  }
  StatusOr<ComputeInstanceInfo> CreateCi(GpuIndex gpu, NvmlGiId gi) override {
    return target_->CreateCi(gpu, gi);
  }
  Status DestroyCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci) override {
    return target_->DestroyCi(gpu, gi, ci);
  }
  Status DestroyGi(GpuIndex gpu, NvmlGiId gi) override { return target_->DestroyGi(gpu, gi); }
  StatusOr<std::vector<GpuInstanceInfo>> ListGpuInstances(GpuIndex gpu) override {
    return target_->ListGpuInstances(gpu);
  }
  StatusOr<std::vector<ProcessInfo>> ListProcesses(GpuIndex gpu, NvmlGiId gi,
                                                   NvmlCiId ci) override {
    return target_->ListProcesses(gpu, gi, ci);
  }
  StatusOr<std::unique_ptr<GpuEventWatch>> OpenEventWatch() override {
    return target_->OpenEventWatch();
  }

 private:
  GpuDriver* const target_;
};

}  // namespace migd::driver

#endif  // MIGD_DRIVER_GPU_DRIVER_WRAPPER_H_
