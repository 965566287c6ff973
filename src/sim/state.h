// File: sim/state.h
//
// The durable state of a simulated machine: its GPUs, their MIG mode, GPU
// instances (GIs), compute instances (CIs), the processes marked on MIG
// devices, and per-function NVML call counters. One SimState is what the
// state file ($MIGD_SIM_STATE) holds; its JSON form is documented field by
// field in docs/simulator.md ("State file").
//
// The structs are plain data. The rules that change them live in
// sim/machine.h; the file protocol (lock, cache, atomic write) in
// sim/state_store.h.
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(SimState s, ParseState(text, mig::Catalog::Default()));
//   s.boot_count++;
//   std::string out = SerializeState(s);
//
// Thread-safety: value types.
#ifndef MIGD_SIM_STATE_H_
#define MIGD_SIM_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "mig/catalog.h"
#include "mig/placement.h"

namespace migd::sim {

inline constexpr int kStateSchemaVersion = 1;
inline constexpr std::string_view kDefaultDriverVersion = "580.95.05";
inline constexpr std::string_view kDefaultNvmlVersion = "13.580.95.05";
// What libnvidia-ml-sim-legacy.so writes into a state it creates (an R470
// driver, NVML 11.4).
inline constexpr std::string_view kLegacyDriverVersion = "470.256.02";
inline constexpr std::string_view kLegacyNvmlVersion = "11.470.256.02";

// Largest GI id + 1 and CI id + 1 (the kernel capability table: gi0..gi14,
// ci0..ci7; nvml.md §7.8).
inline constexpr uint32_t kMaxGiIds = 15;
inline constexpr uint32_t kMaxCiIds = 8;

// How GI ids are chosen inside the id range of the placement size
// (mig-hardware.md §5.8).
enum class GiIdMode {
  kDeterministic,  // first id of the range + start/size if free, else lowest free
  kShuffle,        // a seeded pseudo-random free id of the range
};

struct GiIdPolicy {
  GiIdMode mode = GiIdMode::kDeterministic;
  uint64_t seed = 0;  // kShuffle only
  friend bool operator==(const GiIdPolicy&, const GiIdPolicy&) = default;
};

struct SimProcess {
  uint32_t pid = 0;
  uint64_t used_gpu_memory = 0;  // bytes
  friend bool operator==(const SimProcess&, const SimProcess&) = default;
};

struct SimCi {
  NvmlCiId id;
  CiProfileId profile_id;
  mig::Placement placement;  // compute slices relative to the GI
  uint64_t serial = 0;       // creation serial (unique per state file)
  MigUuid uuid;
  std::vector<SimProcess> processes;
  friend bool operator==(const SimCi&, const SimCi&) = default;
};

struct SimGi {
  NvmlGiId id;
  GiProfileId profile_id;
  mig::Placement placement;  // memory slices
  uint64_t serial = 0;
  std::vector<SimCi> compute_instances;  // sorted by id
  friend bool operator==(const SimGi&, const SimGi&) = default;
};

struct SimGpu {
  GpuIndex index;
  std::string model_key;  // mig::GpuModel::key, e.g. "h100-80gb"
  GpuUuid uuid;
  uint32_t minor = 0;      // /dev/nvidia<minor>, gpu<minor> in the capability paths
  std::string pci_bus_id;  // "00000000:17:00.0"
  bool mig_current = true;
  bool mig_pending = true;
  // False: nvmlDeviceGetHandleByIndex_v2 answers NO_PERMISSION (nvml.md §7.16).
  bool permission = true;
  // Fallen off the bus (an injected gpu-lost, until gpu-back, gpu-reset or a
  // reboot): every call on it answers NVML_ERROR_GPU_IS_LOST
  // (MIGD_SIM_LOST_CALLS).
  bool lost = false;
  std::vector<SimGi> gpu_instances;  // sorted by id
  friend bool operator==(const SimGpu&, const SimGpu&) = default;
};

// One entry of the event log (nvml.h nvmlEventData_t, by GPU index).
struct SimEvent {
  uint64_t seq = 0;   // 1, 2, ... (SimState::event_seq when recorded)
  uint32_t gpu = 0;
  uint64_t type = 0;  // one nvmlEventType* bit
  uint64_t data = 0;  // the Xid for nvmlEventTypeXidCriticalError, else 0
  uint32_t gi = 0xFFFFFFFF;  // 0xFFFFFFFF: not attributed
  uint32_t ci = 0xFFFFFFFF;
  friend bool operator==(const SimEvent&, const SimEvent&) = default;
};

// The event log keeps the newest kMaxEvents entries.
inline constexpr size_t kMaxEvents = 256;

// Function name → result name ("SUCCESS", "ERROR_IN_USE", "CRASH") → count.
using CallCounters = std::map<std::string, std::map<std::string, uint64_t>>;

struct SimState {
  int schema_version = kStateSchemaVersion;
  std::string driver_version{kDefaultDriverVersion};
  std::string nvml_version{kDefaultNvmlVersion};
  GiIdPolicy gi_id_policy;
  uint64_t nonce = 0;  // creation nonce, part of every GPU UUID
  // Monotonic; advanced by every creation, destruction and reboot. Feeds
  // instance serials, MIG UUIDs, the shuffle policy and MIG device order.
  uint64_t serial = 0;
  uint64_t boot_count = 0;
  std::string proc_root;     // "" = no fake /proc tree
  std::vector<SimGpu> gpus;  // gpus[i].index == i
  uint64_t event_seq = 0;          // the seq of the newest event ever recorded
  std::vector<SimEvent> events;    // oldest first, seq increasing
  CallCounters counters;
  friend bool operator==(const SimState&, const SimState&) = default;
};

// The state as a JSON document (2-space indent, trailing newline).
std::string SerializeState(const SimState& state);

// Parses and validates a state document against `catalog`. kDataLoss in
// JsonReader's style ("<source>: <JSON pointer>: expected ..., got ...") for
// invalid JSON, a wrong schema version, a missing or mistyped field, an
// unknown field, and ("<source>: <JSON pointer>: <rule>") for an unknown
// model or profile, an illegal layout (checked with mig::Layout), duplicate
// or out-of-range ids, or a serial smaller than an instance's serial.
StatusOr<SimState> ParseState(std::string_view json, const mig::Catalog& catalog,
                              std::string_view source = "the simulator state");

// The validation ParseState applies, for states built in memory; errors
// name the JSON pointer of the offending field ("/gpus/0/minor: duplicate").
Status ValidateState(const SimState& state, const mig::Catalog& catalog);

}  // namespace migd::sim

#endif  // MIGD_SIM_STATE_H_
