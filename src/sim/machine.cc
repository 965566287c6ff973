#include "sim/machine.h"

#include <algorithm>
#include <cstdio>

#include <absl/strings/match.h>

#include "sim/uuid.h"

namespace migd::sim {
namespace {

std::string GpuName(GpuIndex gpu) { return "GPU " + std::to_string(gpu.value()); }

SimStatus NoGpu(GpuIndex gpu) {
  return SimStatus(NVML_ERROR_INVALID_ARGUMENT, "no " + GpuName(gpu));
}

SimStatus MigOff(GpuIndex gpu) {
  return SimStatus(NVML_ERROR_NOT_SUPPORTED, "MIG mode is disabled on " + GpuName(gpu));
}

std::string GiName(GpuIndex gpu, NvmlGiId gi) {
  return "GI " + std::to_string(gi.value()) + " on " + GpuName(gpu);
}

const mig::CiProfile* FindCiProfileById(const mig::GiProfile& gi_profile, CiProfileId id) {
  for (const mig::CiProfile& cp : gi_profile.ci_profiles) {
    if (cp.id == id) return &cp;
  }
  return nullptr;
}

uint32_t CiMask(const SimGi& gi) {
  uint32_t mask = 0;
  for (const SimCi& ci : gi.compute_instances) mask |= ci.placement.Mask();
  return mask;
}

}  // namespace

std::string SimPciBusId(uint32_t index) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%08X:%02X:00.0", index / 8, 0x17 + 0x20 * (index % 8));
  return buf;
}

StatusOr<SimState> NewMachineState(const MachineOptions& options, const mig::Catalog& catalog) {
  SimState s;
  s.driver_version = options.driver_version;
  s.nvml_version = options.nvml_version;
  s.gi_id_policy = options.gi_id_policy;
  s.nonce = options.nonce;
  s.proc_root = options.proc_root;
  for (const GpuSpec& spec : options.gpus) {
    if (catalog.FindModel(spec.model_key) == nullptr) {
      std::string known;
      for (const mig::GpuModel& m : catalog.models()) known += (known.empty() ? "" : ", ") + m.key;
      return InvalidArgumentError("unknown GPU model '" + spec.model_key + "' (known: " + known +
                                  ")");
    }
    if (spec.count == 0) return InvalidArgumentError("GPU count of " + spec.model_key + " is 0");
    for (uint32_t i = 0; i < spec.count; ++i) {
      if (s.gpus.size() >= kMaxGpus) {
        return InvalidArgumentError("more than " + std::to_string(kMaxGpus) + " GPUs");
      }
      SimGpu gpu;
      const auto index = static_cast<uint32_t>(s.gpus.size());
      gpu.index = GpuIndex(index);
      gpu.model_key = spec.model_key;
      gpu.uuid = GpuUuid(MakeGpuUuid(spec.model_key, index, s.nonce));
      gpu.minor = index;
      gpu.pci_bus_id = SimPciBusId(index);
      gpu.mig_current = spec.mig_enabled;
      gpu.mig_pending = spec.mig_enabled;
      gpu.permission = spec.permission;
      s.gpus.push_back(std::move(gpu));
    }
  }
  if (s.gpus.empty()) return InvalidArgumentError("a machine needs at least one GPU");
  return s;
}

Machine::Machine(SimState& state, const mig::Catalog& catalog)
    : state_(&state), catalog_(&catalog) {}

const SimGpu* Machine::FindGpu(GpuIndex gpu) const {
  if (gpu.value() >= state_->gpus.size()) return nullptr;
  return &state_->gpus[gpu.value()];
}

SimGpu* Machine::MutableGpu(GpuIndex gpu) {
  if (gpu.value() >= state_->gpus.size()) return nullptr;
  return &state_->gpus[gpu.value()];
}

SimGi* Machine::MutableGi(SimGpu& gpu, NvmlGiId gi) {
  for (SimGi& g : gpu.gpu_instances) {
    if (g.id == gi) return &g;
  }
  return nullptr;
}

SimCi* Machine::MutableCi(const CiLocation& loc) {
  SimGi* gi = MutableGi(*MutableGpu(loc.gpu), loc.gi);
  for (SimCi& c : gi->compute_instances) {
    if (c.id == loc.ci) return &c;
  }
  return nullptr;
}

const SimGi* Machine::FindGi(GpuIndex gpu, NvmlGiId gi) const {
  const SimGpu* g = FindGpu(gpu);
  if (g == nullptr) return nullptr;
  for (const SimGi& i : g->gpu_instances) {
    if (i.id == gi) return &i;
  }
  return nullptr;
}

const SimCi* Machine::FindCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci) const {
  const SimGi* g = FindGi(gpu, gi);
  if (g == nullptr) return nullptr;
  for (const SimCi& c : g->compute_instances) {
    if (c.id == ci) return &c;
  }
  return nullptr;
}

std::optional<CiLocation> Machine::FindCiByUuid(std::string_view mig_uuid) const {
  const absl::string_view want(mig_uuid.data(), mig_uuid.size());
  for (const SimGpu& gpu : state_->gpus) {
    for (const SimGi& gi : gpu.gpu_instances) {
      for (const SimCi& ci : gi.compute_instances) {
        if (absl::EqualsIgnoreCase(ci.uuid.value(), want)) {
          return CiLocation{gpu.index, gi.id, ci.id};
        }
      }
    }
  }
  return std::nullopt;
}

const mig::GpuModel& Machine::ModelOf(const SimGpu& gpu) const {
  return *catalog_->FindModel(gpu.model_key);
}

const mig::GiProfile& Machine::GiProfileOf(const SimGpu& gpu, const SimGi& gi) const {
  return *ModelOf(gpu).FindProfileById(gi.profile_id);
}

const mig::CiProfile& Machine::CiProfileOf(const SimGpu& gpu, const SimGi& gi,
                                           const SimCi& ci) const {
  return *FindCiProfileById(GiProfileOf(gpu, gi), ci.profile_id);
}

mig::Layout Machine::LayoutOf(const SimGpu& gpu) const {
  const mig::GpuModel& model = ModelOf(gpu);
  mig::Layout layout(model);
  for (const SimGi& gi : gpu.gpu_instances) {
    // The state was validated, so Add cannot fail.
    layout.Add(*model.FindProfileById(gi.profile_id), gi.placement).IgnoreError();
  }
  return layout;
}

std::vector<std::optional<MigDeviceRef>> Machine::MigDeviceSlots(
    GpuIndex gpu, MigIndexMode mode, const std::set<uint64_t>& hidden) const {
  const SimGpu* g = FindGpu(gpu);
  if (g == nullptr || !g->mig_current) return {};
  struct Keyed {
    uint64_t key;
    MigDeviceRef ref;
  };
  // The order changes whenever the GPU's set of CIs does (and only then: GI
  // changes and other GPUs leave it alone).
  uint64_t epoch = 0;
  std::vector<Keyed> all;
  for (const SimGi& gi : g->gpu_instances) {
    for (const SimCi& ci : gi.compute_instances) {
      epoch = Mix64(epoch ^ ci.serial);
      if (hidden.contains(ci.serial)) continue;
      all.push_back({ci.serial, {gi.id, ci.id}});  // (GI id, CI id) order
    }
  }
  for (Keyed& k : all) k.key = Mix64(k.key ^ epoch);
  const uint32_t max = MaxMigDeviceCount(gpu);
  std::vector<std::optional<MigDeviceRef>> slots;
  if (mode == MigIndexMode::kSparse) {
    // Every CI takes at least one compute slice, so all fit below the maximum.
    slots.resize(max);
    for (const Keyed& k : all) {
      uint32_t i = static_cast<uint32_t>(k.key % max);
      while (slots[i]) i = (i + 1) % max;
      slots[i] = k.ref;
    }
    return slots;
  }
  if (mode == MigIndexMode::kShuffled) {
    std::sort(all.begin(), all.end(), [](const Keyed& a, const Keyed& b) { return a.key < b.key; });
  }
  for (const Keyed& k : all) slots.push_back(k.ref);
  return slots;
}

std::vector<MigDeviceRef> Machine::MigDevices(GpuIndex gpu, MigIndexMode mode) const {
  std::vector<MigDeviceRef> out;
  for (const std::optional<MigDeviceRef>& s : MigDeviceSlots(gpu, mode)) {
    if (s) out.push_back(*s);
  }
  return out;
}

uint32_t Machine::MaxMigDeviceCount(GpuIndex gpu) const {
  const SimGpu* g = FindGpu(gpu);
  if (g == nullptr || !g->mig_current) return 0;
  return ModelOf(*g).compute_slices;
}

std::optional<mig::Placement> Machine::AutoPlace(const mig::GpuModel& model,
                                                 const mig::Layout& layout,
                                                 const mig::GiProfile& profile) const {
  // mig-hardware.md §5.10: count the (profile, placement) pairs of base and
  // double-memory profiles that are creatable now and would stop being so.
  const std::vector<const mig::GiProfile*> counted =
      mig::ProfilesOfVariants(model, {mig::Variant::kBase, mig::Variant::kDoubleMemory});
  struct Pair {
    const mig::GiProfile* profile;
    mig::Placement placement;
  };
  std::vector<Pair> creatable;
  for (const mig::GiProfile* p : counted) {
    for (const mig::Placement& pl : p->placements) {
      if (layout.CanAdd(*p, pl).ok()) creatable.push_back({p, pl});
    }
  }
  std::optional<mig::Placement> best;
  size_t best_lost = 0;
  for (const mig::Placement& candidate : profile.placements) {  // sorted by start
    if (!layout.CanAdd(profile, candidate).ok()) continue;
    mig::Layout after = layout;
    after.Add(profile, candidate).IgnoreError();
    size_t lost = 0;
    for (const Pair& pair : creatable) {
      if (!after.CanAdd(*pair.profile, pair.placement).ok()) ++lost;
    }
    if (!best || lost < best_lost) {
      best = candidate;
      best_lost = lost;
    }
  }
  return best;
}

std::optional<NvmlGiId> Machine::ChooseGiId(const SimGpu& gpu, const mig::GpuModel& model,
                                            const mig::Placement& placement) const {
  auto range_it = model.gi_id_ranges.find(placement.size);
  if (range_it == model.gi_id_ranges.end()) return std::nullopt;
  const auto [first, last] = range_it->second;
  auto is_free = [&](uint32_t id) {
    for (const SimGi& gi : gpu.gpu_instances) {
      if (gi.id.value() == id) return false;
    }
    return true;
  };
  std::vector<uint32_t> free_ids;
  for (uint32_t id = first; id <= last && id < kMaxGiIds; ++id) {
    if (is_free(id)) free_ids.push_back(id);
  }
  if (free_ids.empty()) return std::nullopt;
  if (state_->gi_id_policy.mode == GiIdMode::kShuffle) {
    // The serial about to be assigned makes each creation draw afresh.
    const uint64_t r = Mix64(state_->gi_id_policy.seed ^ Mix64(state_->serial + 1));
    return NvmlGiId(free_ids[r % free_ids.size()]);
  }
  const uint32_t preferred = first + placement.start / placement.size;
  if (preferred <= last && is_free(preferred)) return NvmlGiId(preferred);
  return NvmlGiId(free_ids.front());
}

SimOr<SimGi> Machine::CreateGi(GpuIndex gpu_index, GiProfileId profile_id,
                               std::optional<mig::Placement> placement) {
  SimGpu* gpu = MutableGpu(gpu_index);
  if (gpu == nullptr) return NoGpu(gpu_index);
  if (!gpu->mig_current) return MigOff(gpu_index);
  const mig::GpuModel& model = ModelOf(*gpu);
  const mig::GiProfile* profile = model.FindProfileById(profile_id);
  if (profile == nullptr) {
    return SimStatus(NVML_ERROR_INVALID_ARGUMENT,
                     "no GI profile id " + std::to_string(profile_id.value()) + " on " + model.key);
  }
  const mig::Layout layout = LayoutOf(*gpu);
  mig::Placement where;
  if (placement) {
    Status st = layout.CanAdd(*profile, *placement);
    if (!st.ok()) {
      const nvmlReturn_t code = IsInvalidArgument(st)     ? NVML_ERROR_INVALID_ARGUMENT
                                : IsResourceExhausted(st) ? NVML_ERROR_INSUFFICIENT_RESOURCES
                                                          : NVML_ERROR_UNKNOWN;
      return SimStatus(code, profile->name + " at " + placement->ToString() + " on " +
                                 GpuName(gpu_index) + ": " + std::string(st.message()));
    }
    where = *placement;
  } else {
    std::optional<mig::Placement> chosen = AutoPlace(model, layout, *profile);
    if (!chosen) {
      return SimStatus(NVML_ERROR_INSUFFICIENT_RESOURCES,
                       "no free placement for " + profile->name + " on " + GpuName(gpu_index) +
                           " (layout: " + layout.ToString() + ")");
    }
    where = *chosen;
  }
  std::optional<NvmlGiId> id = ChooseGiId(*gpu, model, where);
  if (!id) {
    return SimStatus(NVML_ERROR_INSUFFICIENT_RESOURCES,
                     "no free GI id for placement size " + std::to_string(where.size));
  }
  SimGi gi;
  gi.id = *id;
  gi.profile_id = profile_id;
  gi.placement = where;
  gi.serial = ++state_->serial;
  auto pos = std::find_if(gpu->gpu_instances.begin(), gpu->gpu_instances.end(),
                          [&](const SimGi& g) { return g.id > gi.id; });
  gpu->gpu_instances.insert(pos, gi);
  RecordMigConfigChange(gpu_index);
  return gi;
}

SimStatus Machine::DestroyGi(GpuIndex gpu_index, NvmlGiId gi_id) {
  SimGpu* gpu = MutableGpu(gpu_index);
  if (gpu == nullptr) return NoGpu(gpu_index);
  if (!gpu->mig_current) return MigOff(gpu_index);
  SimGi* gi = MutableGi(*gpu, gi_id);
  if (gi == nullptr) return SimStatus(NVML_ERROR_NOT_FOUND, "no " + GiName(gpu_index, gi_id));
  if (!gi->compute_instances.empty()) {
    size_t procs = 0;
    for (const SimCi& ci : gi->compute_instances) procs += ci.processes.size();
    return SimStatus(NVML_ERROR_IN_USE, GiName(gpu_index, gi_id) + " still has " +
                                            std::to_string(gi->compute_instances.size()) +
                                            " compute instance(s) and " + std::to_string(procs) +
                                            " process(es)");
  }
  std::erase_if(gpu->gpu_instances, [&](const SimGi& g) { return g.id == gi_id; });
  ++state_->serial;
  RecordMigConfigChange(gpu_index);
  return SimStatus();
}

SimOr<SimCi> Machine::CreateCi(GpuIndex gpu_index, NvmlGiId gi_id, CiProfileId profile_id,
                               std::optional<mig::Placement> placement) {
  SimGpu* gpu = MutableGpu(gpu_index);
  if (gpu == nullptr) return NoGpu(gpu_index);
  if (!gpu->mig_current) return MigOff(gpu_index);
  SimGi* gi = MutableGi(*gpu, gi_id);
  if (gi == nullptr) return SimStatus(NVML_ERROR_NOT_FOUND, "no " + GiName(gpu_index, gi_id));
  const mig::GiProfile& gi_profile = GiProfileOf(*gpu, *gi);
  const mig::CiProfile* cp = FindCiProfileById(gi_profile, profile_id);
  if (cp == nullptr) {
    const nvmlReturn_t code = profile_id.value() >= nvml_abi::kCiProfileCount
                                  ? NVML_ERROR_INVALID_ARGUMENT
                                  : NVML_ERROR_NOT_SUPPORTED;
    return SimStatus(code, "CI profile id " + std::to_string(profile_id.value()) +
                               " is not offered by " + gi_profile.name + " " +
                               GiName(gpu_index, gi_id));
  }
  uint32_t existing = 0;
  for (const SimCi& ci : gi->compute_instances) existing += ci.profile_id == profile_id ? 1 : 0;
  if (existing >= cp->instance_count) {
    return SimStatus(NVML_ERROR_INSUFFICIENT_RESOURCES,
                     "CI profile " + std::to_string(profile_id.value()) + " already has " +
                         std::to_string(existing) + " of " + std::to_string(cp->instance_count) +
                         " instances in " + GiName(gpu_index, gi_id));
  }
  const uint32_t used = CiMask(*gi);
  mig::Placement where;
  if (placement) {
    if (std::find(cp->placements.begin(), cp->placements.end(), *placement) ==
        cp->placements.end()) {
      return SimStatus(NVML_ERROR_INVALID_ARGUMENT, "CI placement " + placement->ToString() +
                                                        " is not listed for CI profile " +
                                                        std::to_string(profile_id.value()));
    }
    if ((used & placement->Mask()) != 0) {
      return SimStatus(NVML_ERROR_INSUFFICIENT_RESOURCES,
                       "CI placement " + placement->ToString() +
                           " overlaps another compute instance in " + GiName(gpu_index, gi_id));
    }
    where = *placement;
  } else {
    std::optional<mig::Placement> chosen;
    for (const mig::Placement& p : cp->placements) {
      if ((used & p.Mask()) == 0 && (!chosen || p.start < chosen->start)) chosen = p;
    }
    if (!chosen) {
      return SimStatus(NVML_ERROR_INSUFFICIENT_RESOURCES, "no free compute slices for CI profile " +
                                                              std::to_string(profile_id.value()) +
                                                              " in " + GiName(gpu_index, gi_id));
    }
    where = *chosen;
  }
  std::optional<uint32_t> id;
  for (uint32_t c = 0; c < kMaxCiIds && !id; ++c) {
    bool taken = false;
    for (const SimCi& ci : gi->compute_instances) taken = taken || ci.id.value() == c;
    if (!taken) id = c;
  }
  if (!id) return SimStatus(NVML_ERROR_INSUFFICIENT_RESOURCES, "no free CI id");
  SimCi ci;
  ci.id = NvmlCiId(*id);
  ci.profile_id = profile_id;
  ci.placement = where;
  ci.serial = ++state_->serial;
  ci.uuid = MigUuid(MakeMigUuid(gpu->uuid.value(), gi_id.value(), *id, ci.serial));
  auto pos = std::find_if(gi->compute_instances.begin(), gi->compute_instances.end(),
                          [&](const SimCi& c) { return c.id > ci.id; });
  gi->compute_instances.insert(pos, ci);
  RecordMigConfigChange(gpu_index);
  return ci;
}

SimStatus Machine::DestroyCi(GpuIndex gpu_index, NvmlGiId gi_id, NvmlCiId ci_id) {
  SimGpu* gpu = MutableGpu(gpu_index);
  if (gpu == nullptr) return NoGpu(gpu_index);
  if (!gpu->mig_current) return MigOff(gpu_index);
  SimGi* gi = MutableGi(*gpu, gi_id);
  if (gi == nullptr) return SimStatus(NVML_ERROR_NOT_FOUND, "no " + GiName(gpu_index, gi_id));
  auto it = std::find_if(gi->compute_instances.begin(), gi->compute_instances.end(),
                         [&](const SimCi& c) { return c.id == ci_id; });
  if (it == gi->compute_instances.end()) {
    return SimStatus(NVML_ERROR_NOT_FOUND,
                     "no CI " + std::to_string(ci_id.value()) + " in " + GiName(gpu_index, gi_id));
  }
  if (!it->processes.empty()) {
    return SimStatus(NVML_ERROR_IN_USE,
                     std::to_string(it->processes.size()) + " process(es) run on CI " +
                         std::to_string(ci_id.value()) + " of " + GiName(gpu_index, gi_id) + " (" +
                         it->uuid.value() + ")");
  }
  gi->compute_instances.erase(it);
  ++state_->serial;
  RecordMigConfigChange(gpu_index);
  return SimStatus();
}

SimOr<uint32_t> Machine::GiRemainingCapacity(GpuIndex gpu_index, GiProfileId profile_id) const {
  const SimGpu* gpu = FindGpu(gpu_index);
  if (gpu == nullptr) return NoGpu(gpu_index);
  if (!gpu->mig_current) return MigOff(gpu_index);
  const mig::GiProfile* profile = ModelOf(*gpu).FindProfileById(profile_id);
  if (profile == nullptr) {
    return SimStatus(NVML_ERROR_INVALID_ARGUMENT,
                     "no GI profile id " + std::to_string(profile_id.value()));
  }
  return LayoutOf(*gpu).RemainingCapacity(*profile);
}

SimOr<uint32_t> Machine::CiRemainingCapacity(GpuIndex gpu_index, NvmlGiId gi_id,
                                             CiProfileId profile_id) const {
  const SimGpu* gpu = FindGpu(gpu_index);
  if (gpu == nullptr) return NoGpu(gpu_index);
  if (!gpu->mig_current) return MigOff(gpu_index);
  const SimGi* gi = FindGi(gpu_index, gi_id);
  if (gi == nullptr) return SimStatus(NVML_ERROR_NOT_FOUND, "no " + GiName(gpu_index, gi_id));
  const mig::CiProfile* cp = FindCiProfileById(GiProfileOf(*gpu, *gi), profile_id);
  if (cp == nullptr) {
    return SimStatus(NVML_ERROR_INVALID_ARGUMENT,
                     "CI profile id " + std::to_string(profile_id.value()) + " not offered");
  }
  uint32_t existing = 0;
  for (const SimCi& ci : gi->compute_instances) existing += ci.profile_id == profile_id ? 1 : 0;
  const uint32_t cap = cp->instance_count > existing ? cp->instance_count - existing : 0;
  // All placements of one CI profile share a size, so greedy by start gives
  // the largest set of pairwise-disjoint free placements.
  uint32_t used = CiMask(*gi);
  uint32_t fit = 0;
  for (const mig::Placement& p : cp->placements) {
    if ((used & p.Mask()) == 0) {
      used |= p.Mask();
      ++fit;
    }
  }
  return std::min(cap, fit);
}

SimOr<nvmlReturn_t> Machine::SetMigMode(GpuIndex gpu_index, bool enable) {
  SimGpu* gpu = MutableGpu(gpu_index);
  if (gpu == nullptr) return NoGpu(gpu_index);
  gpu->mig_pending = enable;
  if (gpu->mig_current == enable) return NVML_SUCCESS;
  if (!gpu->gpu_instances.empty()) return NVML_ERROR_IN_USE;
  return NVML_ERROR_RESET_REQUIRED;
}

SimStatus Machine::AttachProcess(std::string_view mig_uuid, uint32_t pid, uint64_t used_bytes) {
  std::optional<CiLocation> loc = FindCiByUuid(mig_uuid);
  if (!loc) return SimStatus(NVML_ERROR_NOT_FOUND, "no MIG device " + std::string(mig_uuid));
  SimCi* ci = MutableCi(*loc);
  for (SimProcess& p : ci->processes) {
    if (p.pid == pid) {
      p.used_gpu_memory = used_bytes;
      return SimStatus();
    }
  }
  ci->processes.push_back({pid, used_bytes});
  std::sort(ci->processes.begin(), ci->processes.end(),
            [](const SimProcess& a, const SimProcess& b) { return a.pid < b.pid; });
  return SimStatus();
}

SimStatus Machine::DetachProcess(std::string_view mig_uuid, uint32_t pid) {
  std::optional<CiLocation> loc = FindCiByUuid(mig_uuid);
  if (!loc) return SimStatus(NVML_ERROR_NOT_FOUND, "no MIG device " + std::string(mig_uuid));
  SimCi* ci = MutableCi(*loc);
  const size_t removed =
      std::erase_if(ci->processes, [&](const SimProcess& p) { return p.pid == pid; });
  if (removed == 0) {
    return SimStatus(NVML_ERROR_NOT_FOUND, "process " + std::to_string(pid) + " is not marked on " +
                                               std::string(mig_uuid));
  }
  return SimStatus();
}

void Machine::Reboot() {
  for (SimGpu& gpu : state_->gpus) {
    gpu.gpu_instances.clear();
    gpu.mig_current = gpu.mig_pending;
    gpu.lost = false;  // a reset brings a lost GPU back
  }
  ++state_->boot_count;
  ++state_->serial;
}

void Machine::CountCall(std::string_view function, std::string_view result) {
  ++state_->counters[std::string(function)][std::string(result)];
}

}  // namespace migd::sim
