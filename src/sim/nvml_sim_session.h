// File: sim/nvml_sim_session.h
//
// The per-process side of libnvidia-ml-sim.so (internal to the library):
// the reference-counted NVML session, the handle objects, and the one
// transaction every entry point runs in. The library's three parts:
//   nvml_sim_session.*  session, handles, the call wrapper (this file)
//   nvml_sim_calls.h    call bodies: resolving arguments, filling structs
//                       (nvml_sim_device_calls.cc, nvml_sim_instance_calls.cc)
//   nvml_sim_exports.cc the extern "C" entry points (nvml_functions.h)
//
// Handles are pointers to per-process Handle objects interned by (kind, GPU
// index, GI id, CI id, creation serial). A GI/CI/MIG handle whose instance
// was destroyed (or re-created: new serial) is stale -> INVALID_ARGUMENT; all
// handles die with the final nvmlShutdown (generation). Handle objects are
// never freed, so a stale pointer is always safe to inspect.
//
// Thread-safety: every call of one process is serialised by Session::mu (NVML
// is thread-safe; the simulator need not be concurrent inside a process);
// the state file's own lock serialises processes (sim/state_store.h).
#ifndef MIGD_SIM_NVML_SIM_SESSION_H_
#define MIGD_SIM_NVML_SIM_SESSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_set>

#include "base/mutex.h"
#include "driver/nvml/nvml_abi.h"
#include "sim/config.h"
#include "sim/machine.h"
#include "sim/sim_host.h"
#include "sim/sim_status.h"

#define MIGD_SIM_EXPORT extern "C" __attribute__((visibility("default")))

// The signatures of the simulator's controls (MIGD_SIM_CONTROLS in
// driver/nvml/nvml_functions.h).
extern "C" {
typedef nvmlReturn_t (*migdSimAttachProcess_fn)(const char* mig_uuid, unsigned int pid,
                                                unsigned long long used_bytes);
typedef nvmlReturn_t (*migdSimDetachProcess_fn)(const char* mig_uuid, unsigned int pid);
typedef nvmlReturn_t (*migdSimReboot_fn)(void);
// Records the events of `specs` (sim/events.h syntax, without delays) now.
typedef nvmlReturn_t (*migdSimInjectEvents_fn)(const char* specs);
}

namespace migd::sim::lib {

#ifdef MIGD_SIM_LEGACY_R470
inline constexpr bool kLegacy = true;
#else
inline constexpr bool kLegacy = false;
#endif

// The last GI profile index the library knows: 0x11 (NVML 13.3), or 0x7 for
// the R470 library (the 11.4 header's NVML_GPU_INSTANCE_PROFILE_COUNT is 0x8).
inline constexpr unsigned int kMaxGiProfileIndex =
    kLegacy ? nvml_abi::kGiProfile1SliceRev1 : nvml_abi::kGiProfileCount - 1;

enum class HandleKind : uint32_t { kGpu, kMig, kGi, kCi };

struct Handle {
  static constexpr uint64_t kMagic = 0x316d697364676d69ull;
  uint64_t magic = kMagic;
  HandleKind kind = HandleKind::kGpu;
  uint32_t gpu = 0;
  uint32_t gi = 0;
  uint32_t ci = 0;
  uint64_t serial = 0;  // GI serial (kGi), CI serial (kMig, kCi), 0 (kGpu)
  uint64_t generation = 0;
};

// An nvmlEventSet_t: the GPUs and event types registered on it, by the
// event_seq at registration ("events that occurred before this call are not
// recorded"), and the events it delivered. Never deleted (a freed or stale
// pointer stays safe to inspect).
struct EventSetObj {
  static constexpr uint64_t kMagic = 0x7465737476656d69ull;
  uint64_t magic = kMagic;
  uint64_t generation = 0;
  bool freed = false;
  std::map<uint32_t, std::map<uint64_t, uint64_t>> registered;  // gpu -> type bit -> seq
  std::set<uint64_t> delivered;  // seqs delivered (or coalesced away)
};

// Per-process state of the library. Leaked on purpose: it must outlive any
// static destructor that might still call NVML at exit.
class Session {
 public:
  static Session& Get();

  // A CI this process created that the walk does not show yet
  // (MIGD_SIM_NEW_CI_VISIBILITY).
  struct HiddenCi {
    uint32_t gpu = 0;
    uint32_t walks_started = 0;  // index-0 calls on its GPU since its creation
  };

  Handle* Intern(HandleKind kind, uint32_t gpu, uint32_t gi, uint32_t ci, uint64_t serial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // nullptr if `p` is not a live handle of this session.
  const Handle* Lookup(const void* p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  Mutex mu;
  int refcount ABSL_GUARDED_BY(mu) = 0;
  uint64_t generation ABSL_GUARDED_BY(mu) = 1;
  SimConfig config ABSL_GUARDED_BY(mu);
  // The machine of the current (or last) init; kept after the final shutdown
  // so that calls made then are still counted.
  std::unique_ptr<SimHost> host ABSL_GUARDED_BY(mu);
  std::map<std::string, uint64_t, std::less<>> call_numbers ABSL_GUARDED_BY(mu);
  std::map<std::tuple<HandleKind, uint32_t, uint32_t, uint32_t, uint64_t>, Handle*> interned
      ABSL_GUARDED_BY(mu);
  std::unordered_set<const Handle*> all_handles ABSL_GUARDED_BY(mu);
  std::map<uint64_t, HiddenCi> hidden_cis ABSL_GUARDED_BY(mu);  // by CI serial
  std::unordered_set<const EventSetObj*> event_sets ABSL_GUARDED_BY(mu);

 private:
  Session() = default;
};

// The result of a call body: its return code and whether it changed the
// machine (which makes the write durable and syncs the /proc tree).
struct Outcome {
  // NOLINTNEXTLINE(google-explicit-constructor)
  Outcome(nvmlReturn_t c) : code(c) {}
  Outcome(nvmlReturn_t c, bool m) : code(c), mutated(m) {}
  nvmlReturn_t code;
  bool mutated = false;
};

inline Outcome Mutation(const SimStatus& s) { return Outcome(s.code(), s.ok()); }

struct Resolved {
  const Handle* handle = nullptr;
  const SimGpu* gpu = nullptr;
  const SimGi* gi = nullptr;
  const SimCi* ci = nullptr;
  bool is_mig() const { return handle->kind == HandleKind::kMig; }
};

// What a call body sees: the machine, and handle resolution against it. Only
// constructed by RunCall/RunControl, with the session's lock held for its
// whole life.
class Ctx {
 public:
  Ctx(Session& session, Machine& machine) : m(machine), session_(session) {}

  Machine& m;
  const SimConfig& config() const;

  // A GPU or MIG device handle; nullopt if not a live one.
  std::optional<Resolved> Device(nvmlDevice_t d) const;
  // A GPU handle only.
  std::optional<Resolved> Gpu(nvmlDevice_t d) const;
  std::optional<Resolved> Gi(nvmlGpuInstance_t g) const;
  std::optional<Resolved> Ci(nvmlComputeInstance_t c) const;

  // Whether `gpu` is lost (an injected gpu-lost); notes that this call met
  // it, so that the call answers as a lost GPU's (LostAnswer). Resolving a
  // handle of a lost GPU (Device, Gpu, Gi, Ci) fails the same way.
  bool Lost(const SimGpu& gpu) const;
  // Whether this call met a lost GPU.
  bool met_lost_gpu() const { return met_lost_gpu_; }

  // A CI just created: hidden from the next walks if the knob says so.
  void NoteNewCi(const SimGpu& gpu, const SimCi& ci);
  // The serials of `gpu`'s CIs the walk does not show yet. `walk_start`: the
  // caller asks for index 0, which starts a walk.
  std::set<uint64_t> HiddenCis(const SimGpu& gpu, bool walk_start);

  // A new event set of this session.
  EventSetObj* NewEventSet();
  // nullptr if `set` is not a live, unfreed set of this session.
  EventSetObj* EventSet(nvmlEventSet_t set) const;

  nvmlDevice_t GpuHandle(const SimGpu& gpu);
  nvmlDevice_t MigHandle(const SimGpu& gpu, const SimGi& gi, const SimCi& ci);
  nvmlGpuInstance_t GiHandle(const SimGpu& gpu, const SimGi& gi);
  nvmlComputeInstance_t CiHandle(const SimGpu& gpu, const SimGi& gi, const SimCi& ci);

 private:
  std::optional<Resolved> Resolve(const Handle* h) const;

  Session& session_;
  mutable bool met_lost_gpu_ = false;
};

// What a call that met a lost GPU answers (MIGD_SIM_LOST_CALLS): GPU_IS_LOST,
// or under LostCalls::kDocumented NVML_ERROR_UNKNOWN for the calls whose
// nvml.h entry does not list GPU_IS_LOST.
nvmlReturn_t LostAnswer(LostCalls lost_calls, std::string_view fn);

// Writes "libnvidia-ml-sim: <message>" to stderr.
void Report(const std::string& message);

// The wrapper of every entry point except init and shutdown, in this order:
// init check -> latency (MIGD_SIM_LATENCY_MS, slept outside the locks) ->
// fault (MIGD_SIM_FAULTS) -> one state transaction (lock, load, `body`,
// count `fn` with its result, write) -> CRASH_AFTER. Catches every exception
// (NVML_ERROR_UNKNOWN).
nvmlReturn_t RunCall(const char* fn, const std::function<Outcome(Ctx&)>& body) noexcept;

// nvmlInit_v2 / nvmlInit / nvmlInitWithFlags (reference-counted).
nvmlReturn_t InitImpl(const char* fn) noexcept;
// nvmlShutdown: the final one ends the handle generation.
nvmlReturn_t ShutdownImpl(const char* fn) noexcept;

// Blocks, without holding the state lock, until `set` has something for
// nvmlEventSetWait_v2 to report (an event, a lost GPU) or `timeout_ms` has
// passed (0: MIGD_SIM_EVENT_WAIT_ZERO), polling the state every 2 ms. Counts
// nothing; returns at once for an invalid set or an uninitialised library.
void AwaitEvent(nvmlEventSet_t set, unsigned int timeout_ms) noexcept;

// The migdSim* controls: they work whether or not NVML is initialised in
// this process (then they open the machine of MIGD_SIM_STATE themselves).
nvmlReturn_t RunControl(const char* fn, const std::function<SimStatus(Machine&)>& body) noexcept;

}  // namespace migd::sim::lib

#endif  // MIGD_SIM_NVML_SIM_SESSION_H_
