// File: sim/machine.h
//
// Machine: the MIG hardware model. It applies the MIG rules (NVIDIA's MIG
// User Guide, the nvml.h contracts; docs/simulator.md) to a SimState,
// answering with the NVML
// return code a real driver would give (sim/sim_status.h). GI legality
// (listed placement, overlap, instance cap, engine budget) and
// RemainingCapacity are mig::Layout's; this class adds GI/CI id assignment,
// auto-placement, compute slices inside a GI, destroy ordering (IN_USE), MIG
// UUIDs, MIG device numbering, MIG mode and simulated reboots.
//
// Machine neither reads nor writes files: the state file protocol is
// StateStore's (sim/state_store.h) and the fake /proc tree is SyncProcFiles'
// (sim/proc_files.h). FakeGpuDriver and libnvidia-ml-sim.so both drive it.
//
// Example:
//   SimState state = *NewMachineState({.gpus = {{"h100-80gb", 1}}}, catalog);
//   Machine m(state, catalog);
//   SimOr<SimGi> gi = m.CreateGi(GpuIndex(0), GiProfileId(9), mig::Placement{4, 4});
//   SimOr<SimCi> ci = m.CreateCi(GpuIndex(0), gi->id, CiProfileId(2), std::nullopt);
//   // ci->uuid is "MIG-…"; the state now holds both instances.
//
// Thread-safety: not thread-safe; a Machine borrows its SimState and the
// caller serialises access to both.
#ifndef MIGD_SIM_MACHINE_H_
#define MIGD_SIM_MACHINE_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "driver/nvml/nvml_abi.h"
#include "mig/catalog.h"
#include "mig/layout.h"
#include "mig/placement.h"
#include "sim/events.h"
#include "sim/sim_status.h"
#include "sim/state.h"

namespace migd::sim {

// Largest number of GPUs one machine may have: the capability table has
// gpu0..gpu31 (mig-hardware.md §6).
inline constexpr uint32_t kMaxGpus = 32;

// One entry of MIGD_SIM_GPUS, e.g. "a100-40gb:2:mig-off".
struct GpuSpec {
  std::string model_key;
  uint32_t count = 1;
  bool mig_enabled = true;
  bool permission = true;
  friend bool operator==(const GpuSpec&, const GpuSpec&) = default;
};

struct MachineOptions {
  std::vector<GpuSpec> gpus;
  GiIdPolicy gi_id_policy;
  uint64_t nonce = 0;
  std::string driver_version{kDefaultDriverVersion};
  std::string nvml_version{kDefaultNvmlVersion};
  std::string proc_root;
};

// A fresh machine: GPUs numbered in spec order, minor = index, no instances,
// serial 0, boot count 0, no counters. kInvalidArgument for an unknown model
// key, a zero count, no GPUs, or more than kMaxGpus GPUs.
StatusOr<SimState> NewMachineState(const MachineOptions& options, const mig::Catalog& catalog);

// The PCI bus id the simulator gives GPU `index`: "DDDDDDDD:BB:00.0" with
// domain index/8 and bus 0x17 + 0x20·(index%8), upper-case hex.
std::string SimPciBusId(uint32_t index);

struct MigDeviceRef {
  NvmlGiId gi;
  NvmlCiId ci;
  friend bool operator==(const MigDeviceRef&, const MigDeviceRef&) = default;
};

// How MIG device indices are laid out over 0..MaxMigDeviceCount-1 (the
// header does not say; docs/simulator.md §1.4).
enum class MigIndexMode {
  kShuffled,  // dense from 0, order re-drawn whenever the GPU's set of CIs changes
  kDense,     // dense from 0, ordered by (GI id, CI id)
  kSparse,    // with holes: each CI at a pseudo-random index below the maximum
};

struct CiLocation {
  GpuIndex gpu;
  NvmlGiId gi;
  NvmlCiId ci;
};

class Machine {
 public:
  // REQUIRES: ValidateState(state, catalog) is OK; both outlive the Machine.
  Machine(SimState& state, const mig::Catalog& catalog);

  const SimState& state() const { return *state_; }
  const mig::Catalog& catalog() const { return *catalog_; }

  // Lookups: nullptr / nullopt when absent.
  const SimGpu* FindGpu(GpuIndex gpu) const;
  const SimGi* FindGi(GpuIndex gpu, NvmlGiId gi) const;
  const SimCi* FindCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci) const;
  // Case-insensitive match on the R470+ MIG UUID.
  std::optional<CiLocation> FindCiByUuid(std::string_view mig_uuid) const;
  // REQUIRES: `gpu` belongs to the state (its model is in the catalogue).
  const mig::GpuModel& ModelOf(const SimGpu& gpu) const;
  // The GI profile of an existing GI / the CI profile of an existing CI.
  const mig::GiProfile& GiProfileOf(const SimGpu& gpu, const SimGi& gi) const;
  const mig::CiProfile& CiProfileOf(const SimGpu& gpu, const SimGi& gi, const SimCi& ci) const;
  // The GPU's GIs as a mig::Layout.
  mig::Layout LayoutOf(const SimGpu& gpu) const;

  // The MIG device at each index 0..MaxMigDeviceCount-1 of `gpu` (nullopt: no
  // device at that index) under `mode`. CIs whose serial is in `hidden` are
  // left out (not yet visible to the walk). kShuffled redraws the order
  // whenever the GPU's set of CIs changes, so code that keeps indices breaks
  // in tests. Empty with MIG off or an unknown GPU.
  std::vector<std::optional<MigDeviceRef>> MigDeviceSlots(
      GpuIndex gpu, MigIndexMode mode, const std::set<uint64_t>& hidden = {}) const;
  // The MIG devices in index order, holes skipped (kShuffled by default).
  std::vector<MigDeviceRef> MigDevices(GpuIndex gpu,
                                       MigIndexMode mode = MigIndexMode::kShuffled) const;
  // Compute slices of the model with MIG on; 0 with MIG off.
  uint32_t MaxMigDeviceCount(GpuIndex gpu) const;

  // Creates a GI. With `placement`, exactly there; without, the §5.10
  // auto-placement (fewest currently creatable (profile, placement) pairs of
  // base and double-memory profiles made unavailable, ties to the lowest
  // start). The id follows the state's GiIdPolicy (§5.8).
  // INVALID_ARGUMENT: unknown GPU or profile id, or a placement not listed;
  // NOT_SUPPORTED: MIG disabled; INSUFFICIENT_RESOURCES: overlap, instance
  // cap, engine budget, no free placement or no free id.
  SimOr<SimGi> CreateGi(GpuIndex gpu, GiProfileId profile, std::optional<mig::Placement> placement);

  // IN_USE while the GI has CIs (or processes, which live on CIs);
  // NOT_FOUND if absent; INVALID_ARGUMENT for an unknown GPU.
  SimStatus DestroyGi(GpuIndex gpu, NvmlGiId gi);

  // Creates a CI in a GI, on the GI's compute slices. With `placement`,
  // exactly there; without, the lowest free listed start (§5.5). The id is
  // the lowest free in 0..7 (§5.9); the MIG UUID is new (sim/uuid.h).
  // NOT_FOUND: no such GI; NOT_SUPPORTED: MIG disabled, or the CI profile is
  // not offered by this GI (e.g. larger than it); INVALID_ARGUMENT: profile
  // id past the last CI index, or a placement not listed;
  // INSUFFICIENT_RESOURCES: overlap, instance cap or no free id.
  SimOr<SimCi> CreateCi(GpuIndex gpu, NvmlGiId gi, CiProfileId profile,
                        std::optional<mig::Placement> placement);

  // IN_USE while processes run on the CI; NOT_FOUND if absent.
  SimStatus DestroyCi(GpuIndex gpu, NvmlGiId gi, NvmlCiId ci);

  // mig::Layout::RemainingCapacity (§5.11). NOT_SUPPORTED with MIG off;
  // INVALID_ARGUMENT for a profile id this GPU lacks (the NVML doc's "invalid
  // profileId").
  SimOr<uint32_t> GiRemainingCapacity(GpuIndex gpu, GiProfileId profile) const;
  // min(instanceCount − existing, disjoint free listed placements) inside the
  // GI. NOT_FOUND: no such GI; INVALID_ARGUMENT: profile not offered by it.
  SimOr<uint32_t> CiRemainingCapacity(GpuIndex gpu, NvmlGiId gi, CiProfileId profile) const;

  // Sets the pending MIG mode; the current mode changes only at Reboot().
  // Returns the activation status: SUCCESS if the mode is already current,
  // IN_USE if GIs exist, otherwise RESET_REQUIRED.
  SimOr<nvmlReturn_t> SetMigMode(GpuIndex gpu, bool enable);

  // Marks process `pid` as running on the MIG device `mig_uuid` with
  // `used_bytes` of memory (replacing the figure if already marked).
  // NOT_FOUND if no CI has that UUID.
  SimStatus AttachProcess(std::string_view mig_uuid, uint32_t pid, uint64_t used_bytes);
  // NOT_FOUND if no CI has that UUID or `pid` is not marked on it.
  SimStatus DetachProcess(std::string_view mig_uuid, uint32_t pid);

  // A reboot, driver reload or GPU reset of every GPU (§5.13): drops every GI
  // and CI (and their processes), applies pending MIG modes, increments the
  // boot count.
  void Reboot();

  // Events (sim/events.h; sim/machine_events.cc). Every successful GI/CI
  // create and destroy records an nvmlEventMigConfigChange on its GPU.
  // Appends one event to the log (dropping the oldest past kMaxEvents).
  void RecordEvent(GpuIndex gpu, uint64_t type, uint64_t data, uint32_t gi = 0xFFFFFFFF,
                   uint32_t ci = 0xFFFFFFFF);
  void RecordMigConfigChange(GpuIndex gpu);
  // Records an injected event now (its delay_ms is the caller's business).
  // kXid: an nvmlEventTypeXidCriticalError with the spec's Xid and
  // attribution; kGpuLost: marks the GPU lost and records an
  // nvmlEventTypeGpuUnavailableError; kGpuBack: a lost GPU answers again
  // (no event: nvml.h defines none for it); kGpuReset: as kGpuBack after a
  // GPU reset, its GIs and CIs gone. INVALID_ARGUMENT for an unknown GPU, a
  // GI/CI attribution with MIG off, or kGpuBack/kGpuReset on a GPU that is
  // not lost; GPU_IS_LOST for any other event on a GPU already lost.
  SimStatus InjectEvent(const EventSpec& spec);

  // Adds one to counters[function][result].
  void CountCall(std::string_view function, std::string_view result);

 private:
  SimGpu* MutableGpu(GpuIndex gpu);
  SimGi* MutableGi(SimGpu& gpu, NvmlGiId gi);
  // REQUIRES: `loc` names an existing CI.
  SimCi* MutableCi(const CiLocation& loc);
  std::optional<mig::Placement> AutoPlace(const mig::GpuModel& model, const mig::Layout& layout,
                                          const mig::GiProfile& profile) const;
  std::optional<NvmlGiId> ChooseGiId(const SimGpu& gpu, const mig::GpuModel& model,
                                     const mig::Placement& placement) const;

  SimState* state_;
  const mig::Catalog* catalog_;
};

}  // namespace migd::sim

#endif  // MIGD_SIM_MACHINE_H_
