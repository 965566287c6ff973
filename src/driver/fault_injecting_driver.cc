#include "driver/fault_injecting_driver.h"

#include <utility>

namespace migd::driver {

using M = FaultInjectingDriver::Method;

std::string_view FaultInjectingDriver::MethodName(Method m) {
  switch (m) {
    case M::kGetVersions: return "GetVersions";
    case M::kListGpus: return "ListGpus";
    case M::kGetMigMode: return "GetMigMode";
    case M::kGetGiProfiles: return "GetGiProfiles";
    case M::kGetGiPossiblePlacements: return "GetGiPossiblePlacements";
    case M::kCreateGi: return "CreateGi";
    case M::kCreateCi: return "CreateCi";
    case M::kDestroyCi: return "DestroyCi";
    case M::kDestroyGi: return "DestroyGi";
    case M::kListGpuInstances: return "ListGpuInstances";
    case M::kListProcesses: return "ListProcesses";
    case M::kOpenEventWatch: return "OpenEventWatch";
    case M::kCount: break;
  }
  return "?";
}

void FaultInjectingDriver::FailNthCall(Method m, int n, Status status, Timing timing) {
  MutexLock lock(&mu_);
  PerMethod& pm = methods_[static_cast<int>(m)];
  pm.rules.push_back(Rule{pm.calls + (n < 1 ? 1 : n), Fault{std::move(status), timing}});
}

void FaultInjectingDriver::FailAlways(Method m, Status status, Timing timing) {
  MutexLock lock(&mu_);
  methods_[static_cast<int>(m)].rules.push_back(Rule{0, Fault{std::move(status), timing}});
}

void FaultInjectingDriver::Clear(Method m) {
  MutexLock lock(&mu_);
  methods_[static_cast<int>(m)].rules.clear();
}

void FaultInjectingDriver::ClearAll() {
  MutexLock lock(&mu_);
  for (PerMethod& pm : methods_) pm.rules.clear();
}

int FaultInjectingDriver::CallCount(Method m) const {
  MutexLock lock(&mu_);
  return static_cast<int>(methods_[static_cast<int>(m)].calls);
}

int FaultInjectingDriver::InjectedCount(Method m) const {
  MutexLock lock(&mu_);
  return static_cast<int>(methods_[static_cast<int>(m)].injected);
}

std::optional<FaultInjectingDriver::Fault> FaultInjectingDriver::OnCall(Method m) {
  MutexLock lock(&mu_);
  PerMethod& pm = methods_[static_cast<int>(m)];
  const int64_t call = ++pm.calls;
  // One-shot rules first (they are the more specific), then "always".
  for (auto it = pm.rules.begin(); it != pm.rules.end(); ++it) {
    if (it->at_call == call) {
      Fault f = std::move(it->fault);
      pm.rules.erase(it);
      ++pm.injected;
      return f;
    }
  }
  for (const Rule& r : pm.rules) {
    if (r.at_call == 0) {
      ++pm.injected;
      return r.fault;
    }
  }
  return std::nullopt;
}

StatusOr<DriverVersions> FaultInjectingDriver::GetVersions() {
  return Intercept<StatusOr<DriverVersions>>(M::kGetVersions,
                                             [&] { return GpuDriverWrapper::GetVersions(); });
}

StatusOr<std::vector<GpuInfo>> FaultInjectingDriver::ListGpus() {
  return Intercept<StatusOr<std::vector<GpuInfo>>>(M::kListGpus,
                                                   [&] { return GpuDriverWrapper::ListGpus(); });
}

StatusOr<MigModeInfo> FaultInjectingDriver::GetMigMode(GpuIndex gpu) {
  return Intercept<StatusOr<MigModeInfo>>(M::kGetMigMode,
                                          [&] { return GpuDriverWrapper::GetMigMode(gpu); });
}

StatusOr<std::vector<GiProfileInfo>> FaultInjectingDriver::GetGiProfiles(GpuIndex gpu) {
  return Intercept<StatusOr<std::vector<GiProfileInfo>>>(
      M::kGetGiProfiles, [&] { return GpuDriverWrapper::GetGiProfiles(gpu); });
}

StatusOr<std::vector<mig::Placement>> FaultInjectingDriver::GetGiPossiblePlacements(
    GpuIndex gpu, GiProfileId profile) {
  return Intercept<StatusOr<std::vector<mig::Placement>>>(
      M::kGetGiPossiblePlacements,
      [&] { return GpuDriverWrapper::GetGiPossiblePlacements(gpu, profile); });
}

StatusOr<GpuInstanceInfo> FaultInjectingDriver::CreateGi(GpuIndex gpu, GiProfileId profile,
                                                         const mig::Placement& placement) {
  return Intercept<StatusOr<GpuInstanceInfo>>(
      M::kCreateGi, [&] { return GpuDriverWrapper::CreateGi(gpu, profile, placement); });
}

StatusOr<ComputeInstanceInfo> FaultInjectingDriver::CreateCi(GpuIndex gpu, NvmlGiId gi) {
  return Intercept<StatusOr<ComputeInstanceInfo>>(
      M::kCreateCi, [&] { return GpuDriverWrapper::CreateCi(gpu, gi); });
}

Status FaultInjectingDriver::DestroyCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci) {
  return Intercept<Status>(M::kDestroyCi,
                           [&] { return GpuDriverWrapper::DestroyCi(gpu, gi, ci); });
}

Status FaultInjectingDriver::DestroyGi(GpuIndex gpu, NvmlGiId gi) {
  return Intercept<Status>(M::kDestroyGi, [&] { return GpuDriverWrapper::DestroyGi(gpu, gi); });
}

StatusOr<std::vector<GpuInstanceInfo>> FaultInjectingDriver::ListGpuInstances(GpuIndex gpu) {
  return Intercept<StatusOr<std::vector<GpuInstanceInfo>>>(
      M::kListGpuInstances, [&] { return GpuDriverWrapper::ListGpuInstances(gpu); });
}

StatusOr<std::vector<ProcessInfo>> FaultInjectingDriver::ListProcesses(GpuIndex gpu, NvmlGiId gi,
                                                                       NvmlCiId ci) {
  return Intercept<StatusOr<std::vector<ProcessInfo>>>(
      M::kListProcesses, [&] { return GpuDriverWrapper::ListProcesses(gpu, gi, ci); });
}

StatusOr<std::unique_ptr<GpuEventWatch>> FaultInjectingDriver::OpenEventWatch() {
  return Intercept<StatusOr<std::unique_ptr<GpuEventWatch>>>(
      M::kOpenEventWatch, [&] { return GpuDriverWrapper::OpenEventWatch(); });
}

}  // namespace migd::driver
