// File: sim/config.h
//
// The simulator's knobs: the MIGD_SIM_* environment variables, parsed and
// validated in one place so that a bad value is reported once, naming the
// variable (nvmlInit_v2 prints it and fails). Syntax, defaults and examples
// of every knob are in docs/simulator.md ("Knobs").
//
//   MIGD_SIM_STATE                       path of the state file (required)
//   MIGD_SIM_GPUS                        machine to create when the file is absent
//   MIGD_SIM_GI_IDS                      GI id policy of a new machine
//   MIGD_SIM_NONCE                       creation nonce of a new machine
//   MIGD_SIM_PROC_ROOT                   fake /proc tree of a new machine
//   MIGD_SIM_FAULTS                      fault injection (per process)
//   MIGD_SIM_LATENCY_MS                  per-call latency (per process)
//   MIGD_SIM_PROFILE_INFO_MAX_VERSION    2 emulates a pre-R545 driver
//   MIGD_SIM_FSYNC                       0 turns fsync off
//   MIGD_SIM_MIG_INDEX                   MIG device numbering (header-open)
//   MIGD_SIM_LEGACY_MIG_UUID             GetHandleByUUID of "MIG-GPU-…/gi/ci"
//   MIGD_SIM_PARENT_INSTANCE_ID          Get{Gpu,Compute}InstanceId on a GPU
//   MIGD_SIM_NEW_CI_VISIBILITY           when a new CI joins the MIG walk
//   MIGD_SIM_EVENTS                      events injected after the first nvmlInit
// The four before MIGD_SIM_EVENTS choose among behaviours nvml.h leaves open (docs/simulator.md
// §1.4); kHeaderOpenKnobs lists them.
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(SimConfig cfg, SimConfigFromEnv(mig::Catalog::Default()));
//   if (auto rule = cfg.faults.Match("nvmlGpuInstanceDestroy", 1)) { ... }
//
// Thread-safety: value types and pure functions.
#ifndef MIGD_SIM_CONFIG_H_
#define MIGD_SIM_CONFIG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "driver/nvml/nvml_abi.h"
#include "mig/catalog.h"
#include "sim/machine.h"
#include "sim/state.h"

namespace migd::sim {

inline constexpr char kEnvState[] = "MIGD_SIM_STATE";
inline constexpr char kEnvGpus[] = "MIGD_SIM_GPUS";
inline constexpr char kEnvGiIds[] = "MIGD_SIM_GI_IDS";
inline constexpr char kEnvNonce[] = "MIGD_SIM_NONCE";
inline constexpr char kEnvProcRoot[] = "MIGD_SIM_PROC_ROOT";
inline constexpr char kEnvFaults[] = "MIGD_SIM_FAULTS";
inline constexpr char kEnvLatency[] = "MIGD_SIM_LATENCY_MS";
inline constexpr char kEnvProfileInfoMaxVersion[] = "MIGD_SIM_PROFILE_INFO_MAX_VERSION";
inline constexpr char kEnvFsync[] = "MIGD_SIM_FSYNC";
inline constexpr char kEnvMigIndex[] = "MIGD_SIM_MIG_INDEX";
inline constexpr char kEnvLegacyMigUuid[] = "MIGD_SIM_LEGACY_MIG_UUID";
inline constexpr char kEnvParentInstanceId[] = "MIGD_SIM_PARENT_INSTANCE_ID";
inline constexpr char kEnvNewCiVisibility[] = "MIGD_SIM_NEW_CI_VISIBILITY";
inline constexpr char kEnvEventWaitZero[] = "MIGD_SIM_EVENT_WAIT_ZERO";
inline constexpr char kEnvEventCoalesce[] = "MIGD_SIM_EVENT_COALESCE";
inline constexpr char kEnvGpuLost[] = "MIGD_SIM_GPU_LOST";
inline constexpr char kEnvLostCalls[] = "MIGD_SIM_LOST_CALLS";
inline constexpr char kEnvUnsupportedEvents[] = "MIGD_SIM_UNSUPPORTED_EVENTS";
// Events injected after the process's first nvmlInit (sim/events.h syntax,
// delays allowed); read by the library, not by SimConfigFromEnv: a bad list
// is reported and injects nothing, the init does not fail.
inline constexpr char kEnvEvents[] = "MIGD_SIM_EVENTS";
// The knobs that pick a behaviour the header leaves open. Test fixtures that
// reset the MIGD_SIM_* environment keep these, so that a whole suite can run
// under one variant (tests/sim_variants).
inline constexpr const char* kHeaderOpenKnobs[] = {
    kEnvMigIndex,      kEnvLegacyMigUuid, kEnvParentInstanceId, kEnvNewCiVisibility,
    kEnvEventWaitZero, kEnvEventCoalesce, kEnvGpuLost,          kEnvLostCalls};

// Largest N of MIGD_SIM_NEW_CI_VISIBILITY=after-walks:N.
inline constexpr uint32_t kMaxHiddenWalks = 8;

// Largest accepted latency, in milliseconds (10 minutes).
inline constexpr uint32_t kMaxLatencyMs = 600000;

// "a100-40gb:2,h100-80gb:1,a30-24gb:1:mig-off:no-permission". Each entry is
// <model>[:<count>[:<option>]...] with count 1..32 (default 1) and options
// "mig-off" and "no-permission". Syntax only: model keys are not checked.
// kInvalidArgument says which entry is wrong.
StatusOr<std::vector<GpuSpec>> ParseGpuSpecs(std::string_view text);

// "deterministic" or "shuffle:<seed>" (seed: unsigned decimal or 0x hex).
StatusOr<GiIdPolicy> ParseGiIdPolicy(std::string_view text);

enum class FaultAction {
  kReturn,      // return `code` without any effect on the state
  kCrash,       // SIGKILL before the call has any effect
  kCrashAfter,  // SIGKILL right after the call's effect is durable
};

struct FaultRule {
  std::string function;  // exported NVML name, e.g. "nvmlGpuInstanceDestroy"
  FaultAction action = FaultAction::kReturn;
  nvmlReturn_t code = NVML_ERROR_UNKNOWN;  // kReturn only
  uint64_t nth = 0;                        // 0: every call; else the nth call (1-based)
  bool and_later = false;                  // "@N+": the nth and every later call
  friend bool operator==(const FaultRule&, const FaultRule&) = default;
};

// MIGD_SIM_FAULTS: "<fn>=<ERROR>[@N|@N+]" entries separated by commas.
class FaultPlan {
 public:
  // kInvalidArgument for an unknown function name, an unknown error name, a
  // SUCCESS/0 "error", or a malformed @N.
  static StatusOr<FaultPlan> Parse(std::string_view text);

  // The first rule of `function` that fires on its `call_number`-th call
  // (1-based, counted by the caller per process); nullopt if none.
  std::optional<FaultRule> Match(std::string_view function, uint64_t call_number) const;

  const std::vector<FaultRule>& rules() const { return rules_; }
  bool empty() const { return rules_.empty(); }

 private:
  std::vector<FaultRule> rules_;
};

// MIGD_SIM_LATENCY_MS: "<fn>=<ms>" entries separated by commas; "*" matches
// every function without an entry of its own. kInvalidArgument for an
// unknown function or a value outside 0..kMaxLatencyMs.
StatusOr<std::map<std::string, uint32_t, std::less<>>> ParseLatencies(std::string_view text);

// nvmlDeviceGetHandleByUUID given a pre-R470 "MIG-GPU-<uuid>/<gi>/<ci>".
enum class LegacyMigUuidLookup { kAccepted, kNotFound, kInvalidArgument };
// nvmlEventSetWait_v2 with timeout 0 ("Maximum amount of wait time in
// milliseconds for registered event"; nvml.h does not say what 0 means).
enum class EventWaitZero { kImmediate, kForever };
// Several events of one type and GPU that arrived before one wait: each is
// delivered, or only the last (nvml.h does not say).
enum class EventCoalesce { kEach, kLast };
// How a lost GPU shows in an event set: an nvmlEventTypeGpuUnavailableError
// event when registered (else as kWaitError), or NVML_ERROR_GPU_IS_LOST from
// nvmlEventSetWait_v2 ("if a GPU has fallen off the bus").
enum class GpuLostReport { kEvent, kWaitError };
// What a call on a lost GPU answers: GPU_IS_LOST from every call, or only
// from the calls whose nvml.h entry lists it (the others, silent there,
// answer NVML_ERROR_UNKNOWN).
enum class LostCalls { kGpuIsLost, kDocumented };
// nvmlDeviceGetGpuInstanceId / GetComputeInstanceId given a GPU handle.
enum class ParentInstanceIdAnswer { kNotSupported, kInvalidArgument };

struct SimConfig {
  std::string state_path;  // "" if MIGD_SIM_STATE is unset or empty
  // Applied only when the state file is created, then recorded in it.
  std::optional<std::vector<GpuSpec>> gpus;
  GiIdPolicy gi_id_policy;
  std::optional<uint64_t> nonce;  // random if unset
  std::string proc_root;          // absolute, or "" for none
  // Not knobs: what a new machine reports (the legacy library sets R470's).
  std::string driver_version{kDefaultDriverVersion};
  std::string nvml_version{kDefaultNvmlVersion};
  // Per process.
  FaultPlan faults;
  std::map<std::string, uint32_t, std::less<>> latency_ms;
  int profile_info_max_version = 3;  // 2 or 3
  bool fsync = true;
  // Behaviours nvml.h leaves open (per process).
  MigIndexMode mig_index = MigIndexMode::kShuffled;
  LegacyMigUuidLookup legacy_mig_uuid = LegacyMigUuidLookup::kAccepted;
  ParentInstanceIdAnswer parent_instance_id = ParentInstanceIdAnswer::kNotSupported;
  // A CI created by this process is left out of the first N walks of its
  // GPU's MIG devices (a walk starts at index 0); 0 = visible at once.
  uint32_t new_ci_hidden_walks = 0;
  EventWaitZero event_wait_zero = EventWaitZero::kImmediate;
  EventCoalesce event_coalesce = EventCoalesce::kEach;
  GpuLostReport gpu_lost = GpuLostReport::kEvent;
  LostCalls lost_calls = LostCalls::kGpuIsLost;
  // Event type bits nvmlDeviceGetSupportedEventTypes leaves out (per process;
  // MIGD_SIM_UNSUPPORTED_EVENTS=xid,mig-config,gpu-unavailable).
  uint64_t unsupported_event_types = 0;

  // The latency of `function` in ms (its own entry, else "*", else 0).
  uint32_t LatencyFor(std::string_view function) const;
};

// Looks up one environment variable; nullptr if unset.
using EnvLookup = std::function<const char*(const char*)>;

// Reads and validates every MIGD_SIM_* variable (model keys of MIGD_SIM_GPUS
// against `catalog`). kInvalidArgument whose message starts with the
// variable's name, e.g. "MIGD_SIM_FAULTS: unknown function 'nvmlFoo'".
StatusOr<SimConfig> SimConfigFromEnv(const mig::Catalog& catalog,
                                     const EnvLookup& getenv = nullptr);

// The options of a machine created from `config`. kFailedPrecondition if
// MIGD_SIM_GPUS was not given. A missing nonce is drawn from
// std::random_device.
StatusOr<MachineOptions> MachineOptionsFromConfig(const SimConfig& config);

}  // namespace migd::sim

#endif  // MIGD_SIM_CONFIG_H_
