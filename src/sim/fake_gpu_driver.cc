#include "sim/fake_gpu_driver.h"

#include <algorithm>

#include "base/status_macros.h"
#include "sim/config.h"
#include "sim/events.h"
#include "sim/fake_event_watch.h"
#include "sim/nvml_names.h"

namespace migd::sim {
namespace {

driver::ComputeInstanceInfo ToCiInfo(const SimCi& ci) {
  driver::ComputeInstanceInfo out;
  out.id = ci.id;
  out.profile_id = ci.profile_id;
  out.placement = ci.placement;
  out.mig_uuid = ci.uuid;
  return out;
}

driver::GpuInstanceInfo ToGiInfo(const SimGi& gi) {
  driver::GpuInstanceInfo out;
  out.id = gi.id;
  out.profile_id = gi.profile_id;
  out.placement = gi.placement;
  for (const SimCi& ci : gi.compute_instances) out.compute_instances.push_back(ToCiInfo(ci));
  return out;
}

std::string OnGpu(GpuIndex gpu) { return " on GPU " + std::to_string(gpu.value()); }

}  // namespace

FakeGpuDriver::FakeGpuDriver(SimState state, const mig::Catalog& catalog)
    : catalog_(&catalog), state_(std::move(state)) {}

StatusOr<std::unique_ptr<FakeGpuDriver>> FakeGpuDriver::Create(std::string_view gpus,
                                                               GiIdPolicy gi_id_policy,
                                                               uint64_t nonce,
                                                               const mig::Catalog& catalog) {
  MIGD_ASSIGN_OR_RETURN(std::vector<GpuSpec> specs, ParseGpuSpecs(gpus));
  MachineOptions options;
  options.gpus = std::move(specs);
  options.gi_id_policy = gi_id_policy;
  options.nonce = nonce;
  MIGD_ASSIGN_OR_RETURN(SimState state, NewMachineState(options, catalog));
  return std::unique_ptr<FakeGpuDriver>(new FakeGpuDriver(std::move(state), catalog));
}

StatusOr<std::unique_ptr<FakeGpuDriver>> FakeGpuDriver::FromState(SimState state,
                                                                  const mig::Catalog& catalog) {
  MIGD_RETURN_IF_ERROR(ValidateState(state, catalog));
  return std::unique_ptr<FakeGpuDriver>(new FakeGpuDriver(std::move(state), catalog));
}

Status FakeGpuDriver::Finish(std::string_view method, const SimStatus& result,
                             std::string_view what) {
  ++state_.counters[std::string(method)][NvmlResultName(result.code())];
  if (result.ok()) return OkStatus();
  return Status(NvmlResultToCode(result.code()), std::string(what) + ": " + result.ToString());
}

StatusOr<const SimGpu*> FakeGpuDriver::AccessibleGpu(Machine& m, GpuIndex gpu,
                                                     std::string_view method) {
  const SimGpu* g = m.FindGpu(gpu);
  if (g == nullptr) {
    return Finish(method, SimStatus(NVML_ERROR_INVALID_ARGUMENT, "no such GPU"),
                  std::string(method) + OnGpu(gpu));
  }
  if (!g->permission) {
    return Finish(method, SimStatus(NVML_ERROR_NO_PERMISSION, "GPU marked no-permission"),
                  std::string(method) + OnGpu(gpu));
  }
  if (g->lost) {
    return Finish(method, SimStatus(NVML_ERROR_GPU_IS_LOST, "the GPU has fallen off the bus"),
                  std::string(method) + OnGpu(gpu));
  }
  return g;
}

StatusOr<driver::DriverVersions> FakeGpuDriver::GetVersions() {
  MutexLock lock(&mu_);
  Finish("GetVersions", SimStatus(), "").IgnoreError();
  return driver::DriverVersions{state_.driver_version, state_.nvml_version};
}

StatusOr<std::vector<driver::GpuInfo>> FakeGpuDriver::ListGpus() {
  MutexLock lock(&mu_);
  Machine m(state_, *catalog_);
  std::vector<driver::GpuInfo> out;
  for (const SimGpu& gpu : state_.gpus) {
    // Skipped, as NvmlDriver skips NO_PERMISSION and GPU_IS_LOST GPUs.
    if (!gpu.permission || gpu.lost) continue;
    const mig::GpuModel& model = m.ModelOf(gpu);
    driver::GpuInfo info;
    info.index = gpu.index;
    info.uuid = gpu.uuid;
    info.name = model.names.empty() ? model.key : model.names[0];
    info.minor = gpu.minor;
    info.pci_bus_id = gpu.pci_bus_id;
    info.pci_device_id = model.pci_device_ids.empty() ? 0 : model.pci_device_ids[0];
    info.memory_total_mib = model.memory_mib;
    info.mig.supported = true;
    info.mig.current = gpu.mig_current ? driver::MigMode::kEnabled : driver::MigMode::kDisabled;
    info.mig.pending = gpu.mig_pending ? driver::MigMode::kEnabled : driver::MigMode::kDisabled;
    out.push_back(std::move(info));
  }
  Finish("ListGpus", SimStatus(), "").IgnoreError();
  return out;
}

StatusOr<driver::MigModeInfo> FakeGpuDriver::GetMigMode(GpuIndex gpu) {
  MutexLock lock(&mu_);
  Machine m(state_, *catalog_);
  MIGD_ASSIGN_OR_RETURN(const SimGpu* g, AccessibleGpu(m, gpu, "GetMigMode"));
  driver::MigModeInfo info;
  info.supported = true;
  info.current = g->mig_current ? driver::MigMode::kEnabled : driver::MigMode::kDisabled;
  info.pending = g->mig_pending ? driver::MigMode::kEnabled : driver::MigMode::kDisabled;
  Finish("GetMigMode", SimStatus(), "").IgnoreError();
  return info;
}

StatusOr<std::vector<driver::GiProfileInfo>> FakeGpuDriver::GetGiProfiles(GpuIndex gpu) {
  MutexLock lock(&mu_);
  Machine m(state_, *catalog_);
  MIGD_ASSIGN_OR_RETURN(const SimGpu* g, AccessibleGpu(m, gpu, "GetGiProfiles"));
  if (!g->mig_current) {
    return Finish("GetGiProfiles", SimStatus(NVML_ERROR_NOT_SUPPORTED, "MIG mode is disabled"),
                  "listing GI profiles" + OnGpu(gpu));
  }
  std::vector<const mig::GiProfile*> profiles;
  for (const mig::GiProfile& p : m.ModelOf(*g).gi_profiles) profiles.push_back(&p);
  std::sort(profiles.begin(), profiles.end(),
            [](const mig::GiProfile* a, const mig::GiProfile* b) { return a->index < b->index; });
  std::vector<driver::GiProfileInfo> out;
  for (const mig::GiProfile* p : profiles) {
    driver::GiProfileInfo info;
    info.index = p->index;
    info.id = p->id;
    info.name = p->name;
    info.slice_count = p->slice_count;
    info.instance_count = p->instance_count;
    info.multiprocessor_count = p->sm_count;
    info.copy_engines = p->engines.copy_engines;
    info.decoders = p->engines.decoders;
    info.encoders = p->engines.encoders;
    info.jpeg = p->engines.jpeg;
    info.ofa = p->engines.ofa;
    info.memory_mib = p->memory_mib;
    info.p2p_supported = false;
    info.gfx_capable = p->variant == mig::Variant::kGfx;
    info.info_version = 3;
    info.placements = p->placements;
    out.push_back(std::move(info));
  }
  Finish("GetGiProfiles", SimStatus(), "").IgnoreError();
  return out;
}

StatusOr<std::vector<mig::Placement>> FakeGpuDriver::GetGiPossiblePlacements(GpuIndex gpu,
                                                                             GiProfileId profile) {
  MutexLock lock(&mu_);
  Machine m(state_, *catalog_);
  MIGD_ASSIGN_OR_RETURN(const SimGpu* g, AccessibleGpu(m, gpu, "GetGiPossiblePlacements"));
  const mig::GiProfile* p = m.ModelOf(*g).FindProfileById(profile);
  if (p == nullptr) {
    return Finish(
        "GetGiPossiblePlacements",
        SimStatus(NVML_ERROR_NOT_SUPPORTED, "no such profile on " + g->model_key),
        "listing placements of GI profile " + std::to_string(profile.value()) + OnGpu(gpu));
  }
  Finish("GetGiPossiblePlacements", SimStatus(), "").IgnoreError();
  return p->placements;
}

StatusOr<driver::GpuInstanceInfo> FakeGpuDriver::CreateGi(GpuIndex gpu, GiProfileId profile,
                                                          const mig::Placement& placement) {
  MutexLock lock(&mu_);
  events_cv_.SignalAll();  // waiters re-check once the lock is free
  Machine m(state_, *catalog_);
  MIGD_ASSIGN_OR_RETURN(const SimGpu* g, AccessibleGpu(m, gpu, "CreateGi"));
  (void)g;
  SimOr<SimGi> gi = m.CreateGi(gpu, profile, placement);
  const std::string what = "creating GI profile " + std::to_string(profile.value()) + " at " +
                           placement.ToString() + OnGpu(gpu);
  MIGD_RETURN_IF_ERROR(Finish("CreateGi", gi.status(), what));
  return ToGiInfo(*gi);
}

StatusOr<driver::ComputeInstanceInfo> FakeGpuDriver::CreateCi(GpuIndex gpu, NvmlGiId gi) {
  MutexLock lock(&mu_);
  events_cv_.SignalAll();  // waiters re-check once the lock is free
  Machine m(state_, *catalog_);
  MIGD_ASSIGN_OR_RETURN(const SimGpu* g, AccessibleGpu(m, gpu, "CreateCi"));
  const std::string what =
      "creating the default CI in GI " + std::to_string(gi.value()) + OnGpu(gpu);
  const SimGi* sim_gi = m.FindGi(gpu, gi);
  if (sim_gi == nullptr) {
    return Finish("CreateCi", SimStatus(NVML_ERROR_NOT_FOUND, "no such GI"), what);
  }
  const mig::CiProfile* def = m.GiProfileOf(*g, *sim_gi).DefaultCi();
  if (def == nullptr) {
    return Finish("CreateCi",
                  SimStatus(NVML_ERROR_NOT_SUPPORTED, "the catalogue lists no default CI"), what);
  }
  SimOr<SimCi> ci = m.CreateCi(gpu, gi, def->id, std::nullopt);
  MIGD_RETURN_IF_ERROR(Finish("CreateCi", ci.status(), what));
  return ToCiInfo(*ci);
}

Status FakeGpuDriver::DestroyCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci) {
  MutexLock lock(&mu_);
  events_cv_.SignalAll();  // waiters re-check once the lock is free
  Machine m(state_, *catalog_);
  MIGD_ASSIGN_OR_RETURN(const SimGpu* g, AccessibleGpu(m, gpu, "DestroyCi"));
  (void)g;
  return Finish("DestroyCi", m.DestroyCi(gpu, gi, ci),
                "destroying CI " + std::to_string(ci.value()) + " of GI " +
                    std::to_string(gi.value()) + OnGpu(gpu));
}

Status FakeGpuDriver::DestroyGi(GpuIndex gpu, NvmlGiId gi) {
  MutexLock lock(&mu_);
  events_cv_.SignalAll();  // waiters re-check once the lock is free
  Machine m(state_, *catalog_);
  MIGD_ASSIGN_OR_RETURN(const SimGpu* g, AccessibleGpu(m, gpu, "DestroyGi"));
  (void)g;
  return Finish("DestroyGi", m.DestroyGi(gpu, gi),
                "destroying GI " + std::to_string(gi.value()) + OnGpu(gpu));
}

StatusOr<std::vector<driver::GpuInstanceInfo>> FakeGpuDriver::ListGpuInstances(GpuIndex gpu) {
  MutexLock lock(&mu_);
  Machine m(state_, *catalog_);
  MIGD_ASSIGN_OR_RETURN(const SimGpu* g, AccessibleGpu(m, gpu, "ListGpuInstances"));
  if (!g->mig_current) {
    return Finish("ListGpuInstances", SimStatus(NVML_ERROR_NOT_SUPPORTED, "MIG mode is disabled"),
                  "listing GPU instances" + OnGpu(gpu));
  }
  std::vector<driver::GpuInstanceInfo> out;
  for (const SimGi& gi : g->gpu_instances) out.push_back(ToGiInfo(gi));
  Finish("ListGpuInstances", SimStatus(), "").IgnoreError();
  return out;
}

StatusOr<std::vector<driver::ProcessInfo>> FakeGpuDriver::ListProcesses(GpuIndex gpu, NvmlGiId gi,
                                                                        NvmlCiId ci) {
  MutexLock lock(&mu_);
  Machine m(state_, *catalog_);
  MIGD_ASSIGN_OR_RETURN(const SimGpu* g, AccessibleGpu(m, gpu, "ListProcesses"));
  (void)g;
  const SimCi* c = m.FindCi(gpu, gi, ci);
  if (c == nullptr) {
    return Finish("ListProcesses", SimStatus(NVML_ERROR_NOT_FOUND, "no such MIG device"),
                  "listing processes of GI " + std::to_string(gi.value()) + " CI " +
                      std::to_string(ci.value()) + OnGpu(gpu));
  }
  std::vector<driver::ProcessInfo> out;
  for (const SimProcess& p : c->processes) out.push_back({p.pid, p.used_gpu_memory});
  Finish("ListProcesses", SimStatus(), "").IgnoreError();
  return out;
}

Status FakeGpuDriver::AttachProcess(const MigUuid& mig_uuid, uint32_t pid,
                                    uint64_t used_gpu_memory_bytes) {
  MutexLock lock(&mu_);
  Machine m(state_, *catalog_);
  return m.AttachProcess(mig_uuid.value(), pid, used_gpu_memory_bytes).ToStatus();
}

Status FakeGpuDriver::DetachProcess(const MigUuid& mig_uuid, uint32_t pid) {
  MutexLock lock(&mu_);
  Machine m(state_, *catalog_);
  return m.DetachProcess(mig_uuid.value(), pid).ToStatus();
}

void FakeGpuDriver::Reboot() {
  MutexLock lock(&mu_);
  events_cv_.SignalAll();  // waiters re-check once the lock is free
  Machine m(state_, *catalog_);
  m.Reboot();
}

Status FakeGpuDriver::SetMigMode(GpuIndex gpu, driver::MigMode mode) {
  MutexLock lock(&mu_);
  Machine m(state_, *catalog_);
  SimOr<nvmlReturn_t> activation = m.SetMigMode(gpu, mode == driver::MigMode::kEnabled);
  if (!activation.ok()) return activation.status().ToStatus();
  if (*activation == NVML_SUCCESS) return OkStatus();
  return SimStatus(*activation, "activation of the pending MIG mode" + OnGpu(gpu)).ToStatus();
}

void FakeGpuDriver::WithMachine(const std::function<void(Machine&)>& fn) {
  MutexLock lock(&mu_);
  events_cv_.SignalAll();  // waiters re-check once the lock is free
  Machine m(state_, *catalog_);
  fn(m);
}

SimState FakeGpuDriver::Snapshot() const {
  MutexLock lock(&mu_);
  return state_;
}

StatusOr<std::unique_ptr<driver::GpuEventWatch>> FakeGpuDriver::OpenEventWatch() {
  {
    MutexLock lock(&mu_);
    Finish("OpenEventWatch", SimStatus(), "").IgnoreError();
  }
  return std::unique_ptr<driver::GpuEventWatch>(std::make_unique<FakeEventWatch>(this));
}

Status FakeGpuDriver::InjectEvents(std::string_view specs) {
  MIGD_ASSIGN_OR_RETURN(std::vector<EventSpec> parsed,
                        ParseEventSpecs(specs, /*allow_delay=*/false));
  MutexLock lock(&mu_);
  events_cv_.SignalAll();
  Machine m(state_, *catalog_);
  for (const EventSpec& spec : parsed) {
    MIGD_RETURN_IF_ERROR(m.InjectEvent(spec).ToStatus());
  }
  return OkStatus();
}

void FakeGpuDriver::SetSupportedEventKinds(driver::GpuEventKinds kinds) {
  MutexLock lock(&mu_);
  supported_events_ = kinds;
}

}  // namespace migd::sim
