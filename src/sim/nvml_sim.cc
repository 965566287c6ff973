// File: sim/nvml_sim.cc
//
// libnvidia-ml-sim.so: the NVML C ABI (shared/reference/nvml.md §3, struct
// layouts of §4 as declared in driver/nvml/nvml_abi.h) over the simulator's
// file-backed machine (sim/sim_host.h), so that NvmlDriver and any other NVML
// client run unchanged against simulated MIG GPUs. Built twice: the full
// library, and with MIGD_SIM_LEGACY_R470 the legacy one, which lacks every
// symbol newer than NVML 11.4 (sim/nvml_names.h IsPostR470Function).
//
// Every entry point is extern "C", catches every exception (→
// NVML_ERROR_UNKNOWN) and, once a state file is known, counts its result in
// the state's counters under its exported name. The per-call sequence is:
//   init check → latency (MIGD_SIM_LATENCY_MS, slept outside the state lock)
//   → fault (MIGD_SIM_FAULTS) → one state transaction (lock, load, apply,
//   count, write) → CRASH_AFTER.
//
// Handles are pointers to per-process Handle objects interned by (kind, GPU
// index, GI id, CI id, creation serial). A GI/CI/MIG handle whose instance
// was destroyed (or re-created: new serial) is stale → INVALID_ARGUMENT; all
// handles die with the final nvmlShutdown (generation). Handle objects are
// never freed, so a stale pointer is always safe to inspect.
//
// Calls of one process are serialised by one mutex (NVML is thread-safe;
// the simulator does not need to be concurrent inside a process).
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "driver/nvml/nvml_abi.h"
#include "mig/catalog.h"
#include "sim/config.h"
#include "sim/machine.h"
#include "sim/nvml_names.h"
#include "sim/proc_files.h"
#include "sim/sim_host.h"
#include "sim/state.h"

#define MIGD_SIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace migd::sim {
namespace {

#ifdef MIGD_SIM_LEGACY_R470
constexpr bool kLegacy = true;
#else
constexpr bool kLegacy = false;
#endif

constexpr uint64_t kHandleMagic = 0x316d697364676d69ull;
// The last GI profile index the library knows: 0x11 (NVML 13.3), or 0x7 for
// the R470 library (the 11.4 header's NVML_GPU_INSTANCE_PROFILE_COUNT is 0x8).
constexpr unsigned int kMaxGiProfileIndex =
    kLegacy ? nvml_abi::kGiProfile1SliceRev1 : nvml_abi::kGiProfileCount - 1;

enum class HandleKind : uint32_t { kGpu, kMig, kGi, kCi };

struct Handle {
  uint64_t magic = kHandleMagic;
  HandleKind kind = HandleKind::kGpu;
  uint32_t gpu = 0;
  uint32_t gi = 0;
  uint32_t ci = 0;
  uint64_t serial = 0;  // GI serial (kGi), CI serial (kMig, kCi), 0 (kGpu)
  uint64_t generation = 0;
};

void Report(const std::string& message) {
  std::fprintf(stderr, "libnvidia-ml-sim: %s\n", message.c_str());
  std::fflush(stderr);
}

[[noreturn]] void Die() {
  std::fflush(nullptr);
  ::kill(::getpid(), SIGKILL);
  ::_exit(137);
}

// Per-process state of the library. Leaked on purpose: it must outlive any
// static destructor that might still call NVML at exit.
struct Session {
  static Session& Get() {
    static Session* session = new Session;
    return *session;
  }

  Handle* Intern(HandleKind kind, uint32_t gpu, uint32_t gi, uint32_t ci, uint64_t serial) {
    auto key = std::make_tuple(kind, gpu, gi, ci, serial);
    auto it = interned.find(key);
    if (it != interned.end()) return it->second;
    auto* h = new Handle;
    h->kind = kind;
    h->gpu = gpu;
    h->gi = gi;
    h->ci = ci;
    h->serial = serial;
    h->generation = generation;
    interned.emplace(key, h);
    all_handles.insert(h);
    return h;
  }

  // nullptr if `p` is not a live handle of this session.
  const Handle* Lookup(const void* p) const {
    const auto* h = static_cast<const Handle*>(p);
    if (h == nullptr || !all_handles.contains(h)) return nullptr;
    if (h->magic != kHandleMagic || h->generation != generation) return nullptr;
    return h;
  }

  // A CI this process created that the walk does not show yet
  // (MIGD_SIM_NEW_CI_VISIBILITY).
  struct HiddenCi {
    uint32_t gpu = 0;
    uint32_t walks_started = 0;  // index-0 calls on its GPU since its creation
  };

  std::mutex mu;
  // Everything below is guarded by mu.
  int refcount = 0;
  uint64_t generation = 1;
  SimConfig config;
  // The machine of the current (or last) init; kept after the final shutdown
  // so that calls made then are still counted.
  std::unique_ptr<SimHost> host;
  std::map<std::string, uint64_t, std::less<>> call_numbers;
  std::map<std::tuple<HandleKind, uint32_t, uint32_t, uint32_t, uint64_t>, Handle*> interned;
  std::unordered_set<const Handle*> all_handles;
  std::map<uint64_t, HiddenCi> hidden_cis;  // by CI serial
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

Outcome Mutation(const SimStatus& s) { return Outcome(s.code(), s.ok()); }

struct Resolved {
  const Handle* handle = nullptr;
  const SimGpu* gpu = nullptr;
  const SimGi* gi = nullptr;
  const SimCi* ci = nullptr;
  bool is_mig() const { return handle->kind == HandleKind::kMig; }
};

// What a call body sees: the machine, and handle resolution against it.
class Ctx {
 public:
  Ctx(Session& session, Machine& machine) : m(machine), session_(session) {}

  Machine& m;
  const SimConfig& config() const { return session_.config; }

  // A GPU or MIG device handle.
  std::optional<Resolved> Device(nvmlDevice_t d) const {
    const Handle* h = session_.Lookup(d);
    if (h == nullptr || (h->kind != HandleKind::kGpu && h->kind != HandleKind::kMig)) {
      return std::nullopt;
    }
    return Resolve(h);
  }
  // A GPU handle only.
  std::optional<Resolved> Gpu(nvmlDevice_t d) const {
    std::optional<Resolved> r = Device(d);
    if (!r || r->is_mig()) return std::nullopt;
    return r;
  }
  std::optional<Resolved> Gi(nvmlGpuInstance_t g) const {
    const Handle* h = session_.Lookup(g);
    if (h == nullptr || h->kind != HandleKind::kGi) return std::nullopt;
    return Resolve(h);
  }
  std::optional<Resolved> Ci(nvmlComputeInstance_t c) const {
    const Handle* h = session_.Lookup(c);
    if (h == nullptr || h->kind != HandleKind::kCi) return std::nullopt;
    return Resolve(h);
  }

  // A CI just created: hidden from the next walks if the knob says so.
  void NoteNewCi(const SimGpu& gpu, const SimCi& ci) {
    if (session_.config.new_ci_hidden_walks > 0) {
      session_.hidden_cis[ci.serial] = Session::HiddenCi{gpu.index.value(), 0};
    }
  }
  // The serials of `gpu`'s CIs the walk does not show yet. `walk_start`: the
  // caller asks for index 0, which starts a walk.
  std::set<uint64_t> HiddenCis(const SimGpu& gpu, bool walk_start) {
    std::set<uint64_t> out;
    for (auto it = session_.hidden_cis.begin(); it != session_.hidden_cis.end();) {
      Session::HiddenCi& h = it->second;
      if (h.gpu == gpu.index.value() && walk_start) ++h.walks_started;
      if (h.walks_started > session_.config.new_ci_hidden_walks) {
        it = session_.hidden_cis.erase(it);
        continue;
      }
      if (h.gpu == gpu.index.value()) out.insert(it->first);
      ++it;
    }
    return out;
  }

  nvmlDevice_t GpuHandle(const SimGpu& gpu) {
    return reinterpret_cast<nvmlDevice_t>(
        session_.Intern(HandleKind::kGpu, gpu.index.value(), 0, 0, 0));
  }
  nvmlDevice_t MigHandle(const SimGpu& gpu, const SimGi& gi, const SimCi& ci) {
    return reinterpret_cast<nvmlDevice_t>(session_.Intern(HandleKind::kMig, gpu.index.value(),
                                                          gi.id.value(), ci.id.value(), ci.serial));
  }
  nvmlGpuInstance_t GiHandle(const SimGpu& gpu, const SimGi& gi) {
    return reinterpret_cast<nvmlGpuInstance_t>(
        session_.Intern(HandleKind::kGi, gpu.index.value(), gi.id.value(), 0, gi.serial));
  }
  nvmlComputeInstance_t CiHandle(const SimGpu& gpu, const SimGi& gi, const SimCi& ci) {
    return reinterpret_cast<nvmlComputeInstance_t>(session_.Intern(
        HandleKind::kCi, gpu.index.value(), gi.id.value(), ci.id.value(), ci.serial));
  }

 private:
  std::optional<Resolved> Resolve(const Handle* h) const {
    Resolved r;
    r.handle = h;
    r.gpu = m.FindGpu(GpuIndex(h->gpu));
    if (r.gpu == nullptr) return std::nullopt;
    if (h->kind == HandleKind::kGpu) return r;
    r.gi = m.FindGi(GpuIndex(h->gpu), NvmlGiId(h->gi));
    if (r.gi == nullptr) return std::nullopt;
    if (h->kind == HandleKind::kGi) {
      if (r.gi->serial != h->serial) return std::nullopt;
      return r;
    }
    r.ci = m.FindCi(GpuIndex(h->gpu), NvmlGiId(h->gi), NvmlCiId(h->ci));
    if (r.ci == nullptr || r.ci->serial != h->serial) return std::nullopt;
    return r;
  }

  Session& session_;
};

// Runs `body` on the machine in one state transaction and counts `fn` with
// its result (or with `injected` instead of running the body). Returns the
// call's result; NVML_ERROR_UNKNOWN (with a message on stderr) if the state
// file cannot be read or written.
// REQUIRES: session.mu held.
nvmlReturn_t Transact(Session& session, SimHost& host, const char* fn,
                      std::optional<nvmlReturn_t> injected,
                      const std::function<Outcome(Ctx&)>& body) {
  nvmlReturn_t result = NVML_ERROR_UNKNOWN;
  bool mutated = false;
  Status st = host.store().Update(
      [&](SimState& state) {
        Machine machine(state, host.catalog());
        if (injected) {
          result = *injected;
        } else {
          Ctx ctx(session, machine);
          Outcome o = body(ctx);
          result = o.code;
          mutated = o.mutated;
        }
        machine.CountCall(fn, NvmlResultName(result));
        return mutated ? Commit::kDurable : Commit::kCountersOnly;
      },
      [&](const SimState& state) {
        if (mutated) {
          Status p = SyncInstanceProcFiles(state);
          if (!p.ok()) Report(std::string(fn) + ": updating the fake /proc tree: " + p.ToString());
        }
        return OkStatus();
      });
  if (!st.ok()) {
    Report(std::string(fn) + ": " + st.ToString());
    return NVML_ERROR_UNKNOWN;
  }
  return result;
}

// Counts `fn` with `result` if a state file is known; best effort.
// REQUIRES: session.mu held.
void CountOnly(Session& session, const char* fn, const std::string& result) {
  if (!session.host) return;
  session.host->store()
      .Update([&](SimState& state) {
        ++state.counters[fn][result];
        return Commit::kCountersOnly;
      })
      .IgnoreError();
}

// Counts in the state file at `path` if it exists (for init calls that fail
// before a SimHost exists). Best effort; never creates the state.
void CountInFile(const SimConfig& config, const char* fn, const std::string& result) {
  if (config.state_path.empty()) return;
  StateStore store({.path = config.state_path, .fsync = config.fsync}, mig::Catalog::Default());
  store
      .Update([&](SimState& state) {
        ++state.counters[fn][result];
        return Commit::kCountersOnly;
      })
      .IgnoreError();
}

void Sleep(uint32_t ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// The common wrapper of every entry point except init/shutdown.
nvmlReturn_t RunCall(const char* fn, const std::function<Outcome(Ctx&)>& body) noexcept {
  try {
    Session& s = Session::Get();
    std::unique_lock<std::mutex> lock(s.mu);
    if (s.refcount == 0) {
      CountOnly(s, fn, NvmlResultName(NVML_ERROR_UNINITIALIZED));
      return NVML_ERROR_UNINITIALIZED;
    }
    if (const uint32_t ms = s.config.LatencyFor(fn); ms > 0) {
      lock.unlock();
      Sleep(ms);
      lock.lock();
      if (s.refcount == 0) {
        CountOnly(s, fn, NvmlResultName(NVML_ERROR_UNINITIALIZED));
        return NVML_ERROR_UNINITIALIZED;
      }
    }
    const uint64_t n = ++s.call_numbers[fn];
    const std::optional<FaultRule> fault = s.config.faults.Match(fn, n);
    if (fault && fault->action == FaultAction::kCrash) {
      CountOnly(s, fn, "CRASH");
      Die();
    }
    std::optional<nvmlReturn_t> injected;
    if (fault && fault->action == FaultAction::kReturn) injected = fault->code;
    const nvmlReturn_t result = Transact(s, *s.host, fn, injected, body);
    if (fault && fault->action == FaultAction::kCrashAfter) Die();
    return result;
  } catch (const std::exception& e) {
    Report(std::string(fn) + ": internal error: " + e.what());
    return NVML_ERROR_UNKNOWN;
  } catch (...) {
    Report(std::string(fn) + ": internal error");
    return NVML_ERROR_UNKNOWN;
  }
}

nvmlReturn_t InitImpl(const char* fn) noexcept {
  try {
    Session& s = Session::Get();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.refcount > 0) {
      // Already initialised: only the reference count changes. The latency is
      // slept holding the session mutex, so that a concurrent shutdown cannot
      // interleave.
      Sleep(s.config.LatencyFor(fn));
      const uint64_t n = ++s.call_numbers[fn];
      const std::optional<FaultRule> fault = s.config.faults.Match(fn, n);
      if (fault && fault->action == FaultAction::kCrash) {
        CountOnly(s, fn, "CRASH");
        Die();
      }
      if (fault && fault->action == FaultAction::kReturn) {
        CountOnly(s, fn, NvmlResultName(fault->code));
        return fault->code;
      }
      ++s.refcount;
      CountOnly(s, fn, NvmlResultName(NVML_SUCCESS));
      if (fault && fault->action == FaultAction::kCrashAfter) Die();
      return NVML_SUCCESS;
    }

    StatusOr<SimConfig> config = SimConfigFromEnv(mig::Catalog::Default());
    if (!config.ok()) {
      Report(std::string(config.status().message()) + " (" + fn + " fails)");
      return NVML_ERROR_UNKNOWN;
    }
    if (config->state_path.empty()) {
      Report(std::string(kEnvState) +
             " is not set, so there is no simulated driver. Set it to the state file, e.g. " +
             kEnvState + "=/tmp/migd-sim/state.json " + kEnvGpus +
             "=a100-40gb:2,h100-80gb:1 (see docs/simulator.md)");
      return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    Sleep(config->LatencyFor(fn));
    const uint64_t n = ++s.call_numbers[fn];
    const std::optional<FaultRule> fault = config->faults.Match(fn, n);
    if (fault && fault->action == FaultAction::kCrash) {
      CountInFile(*config, fn, "CRASH");
      Die();
    }
    if (fault && fault->action == FaultAction::kReturn) {
      CountInFile(*config, fn, NvmlResultName(fault->code));
      return fault->code;
    }
    SimConfig effective = *config;
    if constexpr (kLegacy) {
      // A machine created by the legacy library reports an R470 driver.
      effective.driver_version = std::string(kLegacyDriverVersion);
      effective.nvml_version = std::string(kLegacyNvmlVersion);
    }
    StatusOr<std::unique_ptr<SimHost>> host = SimHost::Open(effective);
    if (!host.ok()) {
      Report(host.status().ToString() + " (" + fn + " fails)");
      CountInFile(*config, fn,
                  NvmlResultName(IsFailedPrecondition(host.status()) ? NVML_ERROR_DRIVER_NOT_LOADED
                                                                     : NVML_ERROR_UNKNOWN));
      return IsFailedPrecondition(host.status()) ? NVML_ERROR_DRIVER_NOT_LOADED
                                                 : NVML_ERROR_UNKNOWN;
    }
    s.host = std::move(host).value();
    s.config = std::move(effective);
    s.refcount = 1;
    CountOnly(s, fn, NvmlResultName(NVML_SUCCESS));
    if (fault && fault->action == FaultAction::kCrashAfter) Die();
    return NVML_SUCCESS;
  } catch (const std::exception& e) {
    Report(std::string(fn) + ": internal error: " + e.what());
    return NVML_ERROR_UNKNOWN;
  } catch (...) {
    Report(std::string(fn) + ": internal error");
    return NVML_ERROR_UNKNOWN;
  }
}

nvmlReturn_t ShutdownImpl(const char* fn) noexcept {
  try {
    Session& s = Session::Get();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.refcount == 0) {
      // nvml.md §7.5: extra shutdowns report no error.
      CountOnly(s, fn, NvmlResultName(NVML_SUCCESS));
      return NVML_SUCCESS;
    }
    Sleep(s.config.LatencyFor(fn));
    const uint64_t n = ++s.call_numbers[fn];
    const std::optional<FaultRule> fault = s.config.faults.Match(fn, n);
    if (fault && fault->action == FaultAction::kCrash) {
      CountOnly(s, fn, "CRASH");
      Die();
    }
    if (fault && fault->action == FaultAction::kReturn) {
      CountOnly(s, fn, NvmlResultName(fault->code));
      return fault->code;
    }
    if (--s.refcount == 0) {
      ++s.generation;  // every handle of this session is now invalid
      s.interned.clear();
      s.hidden_cis.clear();
    }
    CountOnly(s, fn, NvmlResultName(NVML_SUCCESS));
    if (fault && fault->action == FaultAction::kCrashAfter) Die();
    return NVML_SUCCESS;
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

// The migdSim* controls: they work whether or not NVML is initialised in
// this process (then they open the machine of MIGD_SIM_STATE themselves).
nvmlReturn_t RunControl(const char* fn, const std::function<SimStatus(Machine&)>& body) noexcept {
  try {
    Session& s = Session::Get();
    std::lock_guard<std::mutex> lock(s.mu);
    SimHost* host = s.refcount > 0 ? s.host.get() : nullptr;
    std::unique_ptr<SimHost> own;
    if (host == nullptr) {
      StatusOr<SimConfig> config = SimConfigFromEnv(mig::Catalog::Default());
      if (!config.ok()) {
        Report(std::string(fn) + ": " + std::string(config.status().message()));
        return NVML_ERROR_UNKNOWN;
      }
      if (config->state_path.empty()) {
        Report(std::string(fn) + ": " + kEnvState + " is not set");
        return NVML_ERROR_DRIVER_NOT_LOADED;
      }
      StatusOr<std::unique_ptr<SimHost>> opened = SimHost::Open(*config);
      if (!opened.ok()) {
        Report(std::string(fn) + ": " + opened.status().ToString());
        return IsFailedPrecondition(opened.status()) ? NVML_ERROR_DRIVER_NOT_LOADED
                                                     : NVML_ERROR_UNKNOWN;
      }
      own = std::move(opened).value();
      host = own.get();
    }
    return Transact(s, *host, fn, std::nullopt, [&](Ctx& c) { return Mutation(body(c.m)); });
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

nvmlReturn_t CopyString(const std::string& s, char* buf, unsigned int length) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < s.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

template <size_t N>
void CopyName(char (&dst)[N], const std::string& s) {
  std::memset(dst, 0, N);
  std::memcpy(dst, s.data(), std::min(s.size(), N - 1));
}

const mig::GiProfile* FindCiOwner(const Ctx& c, const Resolved& r) {
  return &c.m.GiProfileOf(*r.gpu, *r.gi);
}

const mig::CiProfile* FindCiProfileById(const mig::GiProfile& gi, CiProfileId id) {
  for (const mig::CiProfile& cp : gi.ci_profiles) {
    if (cp.id == id) return &cp;
  }
  return nullptr;
}

// "3g.20gb" for a CI spanning the GI, "1c.3g.20gb" for a smaller one.
std::string CiProfileName(const mig::GiProfile& gi, const mig::CiProfile& ci) {
  if (ci.slice_count >= gi.slice_count) return gi.name;
  return std::to_string(ci.slice_count) + "c." + gi.name;
}

std::string GpuName(const Ctx& c, const SimGpu& gpu) {
  const mig::GpuModel& model = c.m.ModelOf(gpu);
  return model.names.empty() ? model.key : model.names[0];
}

std::string DeviceName(const Ctx& c, const Resolved& r) {
  if (!r.is_mig()) return GpuName(c, *r.gpu);
  const mig::GiProfile& gp = c.m.GiProfileOf(*r.gpu, *r.gi);
  return GpuName(c, *r.gpu) + " MIG " + CiProfileName(gp, c.m.CiProfileOf(*r.gpu, *r.gi, *r.ci));
}

void FillGiV1(const mig::GiProfile& p, nvmlGpuInstanceProfileInfo_t* o) {
  *o = {};
  o->id = p.id.value();
  o->isP2pSupported = 0;
  o->sliceCount = p.slice_count;
  o->instanceCount = p.instance_count;
  o->multiprocessorCount = p.sm_count;
  o->copyEngineCount = p.engines.copy_engines;
  o->decoderCount = p.engines.decoders;
  o->encoderCount = p.engines.encoders;
  o->jpegCount = p.engines.jpeg;
  o->ofaCount = p.engines.ofa;
  o->memorySizeMB = p.memory_mib;
}

// Writes the v2 or v3 layout, chosen by `version`, into the caller's buffer.
[[maybe_unused]] void FillGiV(const mig::GiProfile& p, unsigned int version, void* out) {
  if (version == nvml_abi::kGpuInstanceProfileInfoV3) {
    nvmlGpuInstanceProfileInfo_v3_t v3{};
    v3.version = version;
    v3.id = p.id.value();
    v3.sliceCount = p.slice_count;
    v3.instanceCount = p.instance_count;
    v3.multiprocessorCount = p.sm_count;
    v3.copyEngineCount = p.engines.copy_engines;
    v3.decoderCount = p.engines.decoders;
    v3.encoderCount = p.engines.encoders;
    v3.jpegCount = p.engines.jpeg;
    v3.ofaCount = p.engines.ofa;
    v3.memorySizeMB = p.memory_mib;
    CopyName(v3.name, "MIG " + p.name);
    v3.capabilities = p.variant == mig::Variant::kGfx ? nvml_abi::kGiCapsGfx : 0;
    std::memcpy(out, &v3, sizeof(v3));
    return;
  }
  nvmlGpuInstanceProfileInfo_v2_t v2{};
  v2.version = version;
  v2.id = p.id.value();
  v2.isP2pSupported = 0;
  v2.sliceCount = p.slice_count;
  v2.instanceCount = p.instance_count;
  v2.multiprocessorCount = p.sm_count;
  v2.copyEngineCount = p.engines.copy_engines;
  v2.decoderCount = p.engines.decoders;
  v2.encoderCount = p.engines.encoders;
  v2.jpegCount = p.engines.jpeg;
  v2.ofaCount = p.engines.ofa;
  v2.memorySizeMB = p.memory_mib;
  CopyName(v2.name, "MIG " + p.name);
  std::memcpy(out, &v2, sizeof(v2));
}

[[maybe_unused]] bool AcceptedGiVersion(const Ctx& c, unsigned int version) {
  return version == nvml_abi::kGpuInstanceProfileInfoV2 ||
         (version == nvml_abi::kGpuInstanceProfileInfoV3 &&
          c.config().profile_info_max_version >= 3);
}

[[maybe_unused]] bool AcceptedCiVersion(const Ctx& c, unsigned int version) {
  return version == nvml_abi::kComputeInstanceProfileInfoV2 ||
         (version == nvml_abi::kComputeInstanceProfileInfoV3 &&
          c.config().profile_info_max_version >= 3);
}

nvmlComputeInstanceProfileInfo_t CiV1(const mig::GiProfile& gi, const mig::CiProfile& ci) {
  nvmlComputeInstanceProfileInfo_t o{};
  o.id = ci.id.value();
  o.sliceCount = ci.slice_count;
  o.instanceCount = ci.instance_count;
  o.multiprocessorCount = gi.slice_count == 0 ? 0 : gi.sm_count * ci.slice_count / gi.slice_count;
  o.sharedCopyEngineCount = gi.engines.copy_engines;
  o.sharedDecoderCount = gi.engines.decoders;
  o.sharedEncoderCount = gi.engines.encoders;
  o.sharedJpegCount = gi.engines.jpeg;
  o.sharedOfaCount = gi.engines.ofa;
  return o;
}

[[maybe_unused]] void FillCiV(const mig::GiProfile& gi, const mig::CiProfile& ci,
                              unsigned int version, void* out) {
  const nvmlComputeInstanceProfileInfo_t v1 = CiV1(gi, ci);
  nvmlComputeInstanceProfileInfo_v3_t v3{};
  v3.version = version;
  v3.id = v1.id;
  v3.sliceCount = v1.sliceCount;
  v3.instanceCount = v1.instanceCount;
  v3.multiprocessorCount = v1.multiprocessorCount;
  v3.sharedCopyEngineCount = v1.sharedCopyEngineCount;
  v3.sharedDecoderCount = v1.sharedDecoderCount;
  v3.sharedEncoderCount = v1.sharedEncoderCount;
  v3.sharedJpegCount = v1.sharedJpegCount;
  v3.sharedOfaCount = v1.sharedOfaCount;
  CopyName(v3.name, "MIG " + CiProfileName(gi, ci));
  v3.capabilities = gi.variant == mig::Variant::kGfx ? nvml_abi::kCiCapsGfx : 0;
  // v2 is v3 without the trailing capabilities word.
  std::memcpy(out, &v3,
              version == nvml_abi::kComputeInstanceProfileInfoV3
                  ? sizeof(nvmlComputeInstanceProfileInfo_v3_t)
                  : sizeof(nvmlComputeInstanceProfileInfo_v2_t));
}

struct PciFields {
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t function = 0;
};

// "[domain:]bus:device.function", hex, any case. nullopt if malformed.
std::optional<PciFields> ParsePciBusId(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(':', start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) return std::nullopt;
  auto hex = [](std::string_view t, uint32_t* out) {
    if (t.empty() || t.size() > 8) return false;
    uint32_t v = 0;
    for (char ch : t) {
      int d = std::isxdigit(static_cast<unsigned char>(ch)) == 0 ? -1
              : ch <= '9'                                        ? ch - '0'
                                                                 : (std::tolower(ch) - 'a' + 10);
      if (d < 0) return false;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    *out = v;
    return true;
  };
  PciFields f;
  size_t i = 0;
  if (parts.size() == 3 && !hex(parts[i++], &f.domain)) return std::nullopt;
  if (!hex(parts[i++], &f.bus)) return std::nullopt;
  std::string_view dev_fn = parts[i];
  size_t dot = dev_fn.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  if (!hex(dev_fn.substr(0, dot), &f.device) || !hex(dev_fn.substr(dot + 1), &f.function)) {
    return std::nullopt;
  }
  return f;
}

bool SamePci(const PciFields& a, const PciFields& b) {
  return a.domain == b.domain && a.bus == b.bus && a.device == b.device && a.function == b.function;
}

// Which layout GetPciInfo writes.
enum class PciVersion { kV1, kV2, kV3 };

nvmlReturn_t FillPci(const Ctx& c, nvmlDevice_t device, nvmlPciInfo_t* pci, PciVersion version) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::optional<PciFields> f = ParsePciBusId(r->gpu->pci_bus_id);
  if (!f) return NVML_ERROR_UNKNOWN;
  const mig::GpuModel& model = c.m.ModelOf(*r->gpu);
  nvmlPciInfo_t out{};
  char legacy[16];
  std::snprintf(legacy, sizeof(legacy), "%04X:%02X:%02X.%X", f->domain, f->bus, f->device,
                f->function);
  CopyName(out.busIdLegacy, legacy);
  out.domain = f->domain;
  out.bus = f->bus;
  out.device = f->device;
  out.pciDeviceId = model.pci_device_ids.empty() ? 0 : model.pci_device_ids[0];
  out.pciSubSystemId = out.pciDeviceId;
  // v3 fills busId with the 8-digit domain; v2 with the legacy 4-digit form;
  // v1's struct ends before busId, so it is left untouched.
  CopyName(out.busId, version == PciVersion::kV3 ? r->gpu->pci_bus_id : std::string(legacy));
  std::memcpy(pci, &out, version == PciVersion::kV1 ? offsetof(nvmlPciInfo_t, busId) : sizeof(out));
  return NVML_SUCCESS;
}

uint64_t UsedBytes(const SimGi& gi) {
  uint64_t used = 0;
  for (const SimCi& ci : gi.compute_instances) {
    for (const SimProcess& p : ci.processes) used += p.used_gpu_memory;
  }
  return used;
}

// total, used of a device in bytes.
std::pair<uint64_t, uint64_t> DeviceMemory(const Ctx& c, const Resolved& r) {
  constexpr uint64_t kMiB = 1024 * 1024;
  if (r.is_mig()) {
    const uint64_t total = c.m.GiProfileOf(*r.gpu, *r.gi).memory_mib * kMiB;
    return {total, std::min(total, UsedBytes(*r.gi))};
  }
  const uint64_t total = c.m.ModelOf(*r.gpu).memory_mib * kMiB;
  uint64_t used = 0;
  for (const SimGi& gi : r.gpu->gpu_instances) used += UsedBytes(gi);
  return {total, std::min(total, used)};
}

struct ProcRow {
  uint32_t pid;
  uint64_t used;
  uint32_t gi;
  uint32_t ci;
};

std::vector<ProcRow> DeviceProcesses(const Resolved& r) {
  std::vector<ProcRow> rows;
  auto add_ci = [&](const SimGi& gi, const SimCi& ci) {
    for (const SimProcess& p : ci.processes) {
      rows.push_back({p.pid, p.used_gpu_memory, gi.id.value(), ci.id.value()});
    }
  };
  if (r.is_mig()) {
    add_ci(*r.gi, *r.ci);
  } else {
    for (const SimGi& gi : r.gpu->gpu_instances) {
      for (const SimCi& ci : gi.compute_instances) add_ci(gi, ci);
    }
  }
  return rows;
}

// Shared body of the compute-process queries; Info is the v1 or v2 struct.
template <typename Info>
nvmlReturn_t ListProcesses(const Ctx& c, nvmlDevice_t device, unsigned int* count, Info* infos) {
  std::optional<Resolved> r = c.Device(device);
  if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const std::vector<ProcRow> rows = DeviceProcesses(*r);
  if (*count < rows.size()) {
    *count = static_cast<unsigned int>(rows.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (!rows.empty() && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < rows.size(); ++i) {
    Info info{};
    info.pid = rows[i].pid;
    info.usedGpuMemory = rows[i].used;
    if constexpr (std::is_same_v<Info, nvmlProcessInfo_t>) {
      info.gpuInstanceId = r->gpu->mig_current ? rows[i].gi : nvml_abi::kInvalidInstanceId;
      info.computeInstanceId = r->gpu->mig_current ? rows[i].ci : nvml_abi::kInvalidInstanceId;
    }
    infos[i] = info;
  }
  *count = static_cast<unsigned int>(rows.size());
  return NVML_SUCCESS;
}

// The GI profile `id` of the GPU's model, if this library knows it: the R470
// library knows only the first 8 profile indices.
const mig::GiProfile* KnownProfileById(const Ctx& c, const SimGpu& gpu, GiProfileId id) {
  const mig::GiProfile* p = c.m.ModelOf(gpu).FindProfileById(id);
  if (p == nullptr || p->index.value() > kMaxGiProfileIndex) return nullptr;
  return p;
}

nvmlReturn_t GetHandleByIndex(Ctx& c, unsigned int index, nvmlDevice_t* device) {
  if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const SimGpu* gpu = c.m.FindGpu(GpuIndex(index));
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu->permission) return NVML_ERROR_NO_PERMISSION;
  *device = c.GpuHandle(*gpu);
  return NVML_SUCCESS;
}

nvmlReturn_t GetCount(const Ctx& c, unsigned int* count) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned int>(c.m.state().gpus.size());
  return NVML_SUCCESS;
}

[[maybe_unused]] nvmlReturn_t ProfileInfoV(Ctx& c, nvmlDevice_t device, unsigned int profile,
                                           bool by_id, nvmlGpuInstanceProfileInfo_v2_t* info) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int version = 0;
  std::memcpy(&version, info, sizeof(version));
  if (!AcceptedGiVersion(c, version)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
  const mig::GpuModel& model = c.m.ModelOf(*r->gpu);
  const mig::GiProfile* p = nullptr;
  if (by_id) {
    p = model.FindProfileById(GiProfileId(profile));
  } else {
    if (profile > kMaxGiProfileIndex) return NVML_ERROR_INVALID_ARGUMENT;
    p = model.FindProfileByIndex(GiProfileIndex(profile));
  }
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  FillGiV(*p, version, info);
  return NVML_SUCCESS;
}

nvmlReturn_t GiPlacements(Ctx& c, nvmlDevice_t device, unsigned int profile_id,
                          nvmlGpuInstancePlacement_t* placements, unsigned int* count, bool v2) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // _v2 answers "regardless of whether MIG is enabled or not" (13.x doc); the
  // 11.4 doc of _v2 and the v1 call need MIG mode on.
  if ((!v2 || kLegacy) && !r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
  const mig::GiProfile* p = KnownProfileById(c, *r->gpu, GiProfileId(profile_id));
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  const auto n = static_cast<unsigned int>(p->placements.size());
  if (placements == nullptr) {
    if (!v2) return NVML_ERROR_INVALID_ARGUMENT;  // no count query before _v2
    *count = n;
    return NVML_SUCCESS;
  }
  // `count` is output only ("Returns number of allowed placements"): the
  // buffer "must be large enough to accommodate the placements supported by
  // the profile", whatever *count held.
  for (unsigned int i = 0; i < n; ++i) {
    placements[i] = {p->placements[i].start, p->placements[i].size};
  }
  *count = n;
  return NVML_SUCCESS;
}

Outcome CreateGi(Ctx& c, nvmlDevice_t device, unsigned int profile_id,
                 const nvmlGpuInstancePlacement_t* placement, nvmlGpuInstance_t* gpu_instance) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || gpu_instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (r->gpu->mig_current && KnownProfileById(c, *r->gpu, GiProfileId(profile_id)) == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  std::optional<mig::Placement> where;
  if (placement != nullptr) where = mig::Placement{placement->start, placement->size};
  SimOr<SimGi> gi = c.m.CreateGi(r->gpu->index, GiProfileId(profile_id), where);
  if (!gi.ok()) return gi.code();
  *gpu_instance = c.GiHandle(*r->gpu, *gi);
  return Outcome(NVML_SUCCESS, true);
}

nvmlReturn_t CiProfileInfo(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile,
                           unsigned int eng_profile, const mig::GiProfile** gi_out,
                           const mig::CiProfile** ci_out) {
  std::optional<Resolved> r = c.Gi(gpu_instance);
  if (!r) return NVML_ERROR_INVALID_ARGUMENT;
  if (profile >= nvml_abi::kCiProfileCount) return NVML_ERROR_INVALID_ARGUMENT;
  if (eng_profile != nvml_abi::kCiEngineProfileShared) return NVML_ERROR_INVALID_ARGUMENT;
  const mig::GiProfile* gp = FindCiOwner(c, *r);
  const mig::CiProfile* cp = gp->FindCiByIndex(CiProfileIndex(profile));
  if (cp == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *gi_out = gp;
  *ci_out = cp;
  return NVML_SUCCESS;
}

Outcome CreateCi(Ctx& c, nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
                 const nvmlComputeInstancePlacement_t* placement,
                 nvmlComputeInstance_t* compute_instance) {
  std::optional<Resolved> r = c.Gi(gpu_instance);
  if (!r || compute_instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::optional<mig::Placement> where;
  if (placement != nullptr) where = mig::Placement{placement->start, placement->size};
  SimOr<SimCi> ci = c.m.CreateCi(r->gpu->index, r->gi->id, CiProfileId(profile_id), where);
  if (!ci.ok()) return ci.code();
  const SimGi* gi = c.m.FindGi(r->gpu->index, r->gi->id);
  *compute_instance = c.CiHandle(*r->gpu, *gi, *ci);
  c.NoteNewCi(*r->gpu, *ci);
  return Outcome(NVML_SUCCESS, true);
}

nvmlReturn_t CiInfo(Ctx& c, nvmlComputeInstance_t compute_instance,
                    nvmlComputeInstanceInfo_t* out) {
  std::optional<Resolved> r = c.Ci(compute_instance);
  if (!r || out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // nvml.h: "nvmlDevice_t device; //!< Parent device" -- the GPU, not the
  // MIG device (which only GetMigDeviceHandleByIndex / GetHandleByUUID give).
  out->device = c.GpuHandle(*r->gpu);
  out->gpuInstance = c.GiHandle(*r->gpu, *r->gi);
  out->id = r->ci->id.value();
  out->profileId = r->ci->profile_id.value();
  out->placement = {r->ci->placement.start, r->ci->placement.size};
  return NVML_SUCCESS;
}

// Parses "MIG-GPU-<gpu uuid>/<gi>/<ci>" (the pre-R470 MIG UUID form).
std::optional<std::tuple<std::string, uint32_t, uint32_t>> ParseLegacyMigUuid(std::string_view s) {
  if (!s.starts_with("MIG-GPU-")) return std::nullopt;
  s.remove_prefix(4);
  size_t slash2 = s.rfind('/');
  if (slash2 == std::string_view::npos) return std::nullopt;
  size_t slash1 = s.rfind('/', slash2 - 1);
  if (slash1 == std::string_view::npos || slash1 == 0) return std::nullopt;
  auto num = [](std::string_view t, uint32_t* out) {
    if (t.empty() || t.size() > 2) return false;
    uint32_t v = 0;
    for (char ch : t) {
      if (ch < '0' || ch > '9') return false;
      v = v * 10 + static_cast<uint32_t>(ch - '0');
    }
    *out = v;
    return true;
  };
  uint32_t gi = 0;
  uint32_t ci = 0;
  if (!num(s.substr(slash1 + 1, slash2 - slash1 - 1), &gi) || !num(s.substr(slash2 + 1), &ci)) {
    return std::nullopt;
  }
  return std::make_tuple(std::string(s.substr(0, slash1)), gi, ci);
}

// Get{Gpu,Compute}InstanceId given a GPU handle: the header documents them
// for "the given MIG device handle" only (MIGD_SIM_PARENT_INSTANCE_ID).
nvmlReturn_t ParentInstanceIdResult(const Ctx& c) {
  return c.config().parent_instance_id == ParentInstanceIdAnswer::kInvalidArgument
             ? NVML_ERROR_INVALID_ARGUMENT
             : NVML_ERROR_NOT_SUPPORTED;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace migd::sim

using migd::CiProfileId;
using migd::GiProfileId;
using migd::GpuIndex;
using migd::NvmlCiId;
using migd::NvmlGiId;
using migd::sim::Ctx;
using migd::sim::Outcome;
using migd::sim::Resolved;
using migd::sim::RunCall;
namespace mig = migd::mig;
namespace nvml_abi = migd::nvml_abi;

// §3.1 Library lifecycle and system.

MIGD_SIM_EXPORT nvmlReturn_t nvmlInit_v2(void) { return migd::sim::InitImpl(__func__); }
MIGD_SIM_EXPORT nvmlReturn_t nvmlInit(void) { return migd::sim::InitImpl(__func__); }
MIGD_SIM_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) {
  return migd::sim::InitImpl(__func__);
}
MIGD_SIM_EXPORT nvmlReturn_t nvmlShutdown(void) { return migd::sim::ShutdownImpl(__func__); }

MIGD_SIM_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  return migd::sim::NvmlErrorText(result);
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::CopyString(c.m.state().driver_version, version, length);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::CopyString(c.m.state().nvml_version, version, length);
  });
}

// §3.2 Device discovery and identity.

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* device_count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return migd::sim::GetCount(c, device_count); });
}
MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* device_count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome { return migd::sim::GetCount(c, device_count); });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                           nvmlDevice_t* device) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return migd::sim::GetHandleByIndex(c, index, device); });
}
MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return migd::sim::GetHandleByIndex(c, index, device); });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const std::string_view want(uuid);
    for (const migd::sim::SimGpu& gpu : c.m.state().gpus) {
      if (migd::sim::EqualsIgnoreCase(gpu.uuid.value(), want)) {
        if (!gpu.permission) return NVML_ERROR_NO_PERMISSION;
        *device = c.GpuHandle(gpu);
        return NVML_SUCCESS;
      }
    }
    std::optional<migd::sim::CiLocation> loc = c.m.FindCiByUuid(want);
    if (!loc) {
      if (auto legacy = migd::sim::ParseLegacyMigUuid(want)) {
        // Whether the pre-R470 form is still accepted is not in the header.
        switch (c.config().legacy_mig_uuid) {
          case migd::sim::LegacyMigUuidLookup::kAccepted:
            break;
          case migd::sim::LegacyMigUuidLookup::kNotFound:
            return NVML_ERROR_NOT_FOUND;
          case migd::sim::LegacyMigUuidLookup::kInvalidArgument:
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        for (const migd::sim::SimGpu& gpu : c.m.state().gpus) {
          if (migd::sim::EqualsIgnoreCase(gpu.uuid.value(), std::get<0>(*legacy)) &&
              c.m.FindCi(gpu.index, NvmlGiId(std::get<1>(*legacy)),
                         NvmlCiId(std::get<2>(*legacy))) != nullptr) {
            loc = migd::sim::CiLocation{gpu.index, NvmlGiId(std::get<1>(*legacy)),
                                        NvmlCiId(std::get<2>(*legacy))};
          }
        }
      }
    }
    if (!loc) return NVML_ERROR_NOT_FOUND;
    const migd::sim::SimGpu* gpu = c.m.FindGpu(loc->gpu);
    if (!gpu->permission) return NVML_ERROR_NO_PERMISSION;
    *device =
        c.MigHandle(*gpu, *c.m.FindGi(loc->gpu, loc->gi), *c.m.FindCi(loc->gpu, loc->gi, loc->ci));
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pci_bus_id,
                                                              nvmlDevice_t* device) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    if (pci_bus_id == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::optional<migd::sim::PciFields> want = migd::sim::ParsePciBusId(pci_bus_id);
    if (!want) return NVML_ERROR_INVALID_ARGUMENT;
    for (const migd::sim::SimGpu& gpu : c.m.state().gpus) {
      std::optional<migd::sim::PciFields> have = migd::sim::ParsePciBusId(gpu.pci_bus_id);
      if (have && migd::sim::SamePci(*have, *want)) {
        if (!gpu.permission) return NVML_ERROR_NO_PERMISSION;
        *device = c.GpuHandle(gpu);
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                               unsigned int length) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Device(device);
    if (!r) return NVML_ERROR_INVALID_ARGUMENT;
    return migd::sim::CopyString(r->is_mig() ? r->ci->uuid.value() : r->gpu->uuid.value(), uuid,
                                 length);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                               unsigned int length) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Device(device);
    if (!r) return NVML_ERROR_INVALID_ARGUMENT;
    return migd::sim::CopyString(migd::sim::DeviceName(c, *r), name, length);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Device(device);
    if (!r || index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r->is_mig()) {
      *index = r->gpu->index.value();
      return NVML_SUCCESS;
    }
    const auto slots = c.m.MigDeviceSlots(r->gpu->index, c.config().mig_index,
                                          c.HiddenCis(*r->gpu, /*walk_start=*/false));
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] && slots[i]->gi == r->gi->id && slots[i]->ci == r->ci->id) {
        *index = static_cast<unsigned int>(i);
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;  // not visible to the walk yet
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device,
                                                      unsigned int* minor_number) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Device(device);
    if (!r || minor_number == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (r->is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *minor_number = r->gpu->minor;
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::FillPci(c, device, pci, migd::sim::PciVersion::kV3);
  });
}
MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::FillPci(c, device, pci, migd::sim::PciVersion::kV2);
  });
}
MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::FillPci(c, device, pci, migd::sim::PciVersion::kV1);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Device(device);
    if (!r || memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    auto [total, used] = migd::sim::DeviceMemory(c, *r);
    memory->total = total;
    memory->used = used;
    memory->free = total - used;
    return NVML_SUCCESS;
  });
}

#ifndef MIGD_SIM_LEGACY_R470
MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                        nvmlMemory_v2_t* memory) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Device(device);
    if (!r || memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvml_abi::kMemoryV2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    auto [total, used] = migd::sim::DeviceMemory(c, *r);
    memory->total = total;
    memory->reserved = 0;
    memory->used = used;
    memory->free = total - used;
    return NVML_SUCCESS;
  });
}
#endif

// §3.3 MIG mode and MIG device handles.

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current_mode,
                                                  unsigned int* pending_mode) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gpu(device);
    if (!r || current_mode == nullptr || pending_mode == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    *current_mode = r->gpu->mig_current ? nvml_abi::kMigEnable : nvml_abi::kMigDisable;
    *pending_mode = r->gpu->mig_pending ? nvml_abi::kMigEnable : nvml_abi::kMigDisable;
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                                  nvmlReturn_t* activation_status) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gpu(device);
    if (!r || activation_status == nullptr ||
        (mode != nvml_abi::kMigEnable && mode != nvml_abi::kMigDisable)) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    const bool changed = r->gpu->mig_pending != (mode == nvml_abi::kMigEnable);
    migd::sim::SimOr<nvmlReturn_t> activation =
        c.m.SetMigMode(r->gpu->index, mode == nvml_abi::kMigEnable);
    if (!activation.ok()) return activation.code();
    *activation_status = *activation;
    return Outcome(NVML_SUCCESS, changed);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device,
                                                            unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gpu(device);
    if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = c.m.MaxMigDeviceCount(r->gpu->index);
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                                 unsigned int index,
                                                                 nvmlDevice_t* mig_device) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gpu(device);
    if (!r || mig_device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= c.m.MaxMigDeviceCount(r->gpu->index)) return NVML_ERROR_INVALID_ARGUMENT;
    const auto slots = c.m.MigDeviceSlots(r->gpu->index, c.config().mig_index,
                                          c.HiddenCis(*r->gpu, /*walk_start=*/index == 0));
    // "NVML_ERROR_NOT_FOUND if no valid MIG device was found at index".
    if (index >= slots.size() || !slots[index]) return NVML_ERROR_NOT_FOUND;
    const migd::sim::MigDeviceRef ref = *slots[index];
    const migd::sim::SimGi* gi = c.m.FindGi(r->gpu->index, ref.gi);
    const migd::sim::SimCi* ci = c.m.FindCi(r->gpu->index, ref.gi, ref.ci);
    *mig_device = c.MigHandle(*r->gpu, *gi, *ci);
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device,
                                                         unsigned int* is_mig_device) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Device(device);
    if (!r || is_mig_device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig_device = r->is_mig() ? 1 : 0;
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig_device,
                                                                          nvmlDevice_t* device) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Device(mig_device);
    if (!r || !r->is_mig() || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *device = c.GpuHandle(*r->gpu);
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Device(device);
    if (!r || id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r->is_mig()) return migd::sim::ParentInstanceIdResult(c);
    *id = r->gi->id.value();
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Device(device);
    if (!r || id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r->is_mig()) return migd::sim::ParentInstanceIdResult(c);
    *id = r->ci->id.value();
    return NVML_SUCCESS;
  });
}

// §3.4 GPU instances.

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(
    nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gpu(device);
    if (!r || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (profile > migd::sim::kMaxGiProfileIndex) return NVML_ERROR_INVALID_ARGUMENT;
    // 12.4+ doc: NOT_SUPPORTED "If device doesn't support MIG", so it answers
    // with MIG disabled; the 11.4 doc (R470): "doesn't have MIG mode enabled".
    if (migd::sim::kLegacy && !r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
    const mig::GiProfile* p =
        c.m.ModelOf(*r->gpu).FindProfileByIndex(migd::GiProfileIndex(profile));
    if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    migd::sim::FillGiV1(*p, info);
    return NVML_SUCCESS;
  });
}

#ifndef MIGD_SIM_LEGACY_R470
MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(
    nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_v2_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::ProfileInfoV(c, device, profile, /*by_id=*/false, info);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(
    nvmlDevice_t device, unsigned int profile_id, nvmlGpuInstanceProfileInfo_v2_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::ProfileInfoV(c, device, profile_id, /*by_id=*/true, info);
  });
}
#endif

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    nvmlDevice_t device, unsigned int profile_id, nvmlGpuInstancePlacement_t* placements,
    unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::GiPlacements(c, device, profile_id, placements, count, /*v2=*/true);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(
    nvmlDevice_t device, unsigned int profile_id, nvmlGpuInstancePlacement_t* placements,
    unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::GiPlacements(c, device, profile_id, placements, count, /*v2=*/false);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device,
                                                                       unsigned int profile_id,
                                                                       unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gpu(device);
    if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (r->gpu->mig_current &&
        migd::sim::KnownProfileById(c, *r->gpu, GiProfileId(profile_id)) == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    migd::sim::SimOr<uint32_t> cap =
        c.m.GiRemainingCapacity(r->gpu->index, GiProfileId(profile_id));
    if (!cap.ok()) return cap.code();
    *count = *cap;
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device,
                                                         unsigned int profile_id,
                                                         nvmlGpuInstance_t* gpu_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::CreateGi(c, device, profile_id, nullptr, gpu_instance);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(
    nvmlDevice_t device, unsigned int profile_id, const nvmlGpuInstancePlacement_t* placement,
    nvmlGpuInstance_t* gpu_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    if (placement == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return migd::sim::CreateGi(c, device, profile_id, placement, gpu_instance);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpu_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gi(gpu_instance);
    if (!r) return NVML_ERROR_INVALID_ARGUMENT;
    return migd::sim::Mutation(c.m.DestroyGi(r->gpu->index, r->gi->id));
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profile_id,
                                                       nvmlGpuInstance_t* gpu_instances,
                                                       unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gpu(device);
    if (!r || gpu_instances == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
    if (migd::sim::KnownProfileById(c, *r->gpu, GiProfileId(profile_id)) == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    // The buffer holds the profile's instanceCount entries (nvml.md §3.4),
    // which bounds how many GIs of one profile can exist.
    unsigned int n = 0;
    for (const migd::sim::SimGi& gi : r->gpu->gpu_instances) {
      if (gi.profile_id.value() == profile_id) gpu_instances[n++] = c.GiHandle(*r->gpu, gi);
    }
    *count = n;
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                          nvmlGpuInstance_t* gpu_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gpu(device);
    if (!r || gpu_instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
    const migd::sim::SimGi* gi = c.m.FindGi(r->gpu->index, NvmlGiId(id));
    if (gi == nullptr) return NVML_ERROR_NOT_FOUND;
    *gpu_instance = c.GiHandle(*r->gpu, *gi);
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpu_instance,
                                                    nvmlGpuInstanceInfo_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gi(gpu_instance);
    if (!r || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    info->device = c.GpuHandle(*r->gpu);
    info->id = r->gi->id.value();
    info->profileId = r->gi->profile_id.value();
    info->placement = {r->gi->placement.start, r->gi->placement.size};
    return NVML_SUCCESS;
  });
}

// §3.5 Compute instances.

MIGD_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(
    nvmlGpuInstance_t gpu_instance, unsigned int profile, unsigned int eng_profile,
    nvmlComputeInstanceProfileInfo_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const mig::GiProfile* gp = nullptr;
    const mig::CiProfile* cp = nullptr;
    nvmlReturn_t r = migd::sim::CiProfileInfo(c, gpu_instance, profile, eng_profile, &gp, &cp);
    if (r != NVML_SUCCESS) return r;
    *info = migd::sim::CiV1(*gp, *cp);
    return NVML_SUCCESS;
  });
}

#ifndef MIGD_SIM_LEGACY_R470
MIGD_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    nvmlGpuInstance_t gpu_instance, unsigned int profile, unsigned int eng_profile,
    nvmlComputeInstanceProfileInfo_v2_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int version = 0;
    std::memcpy(&version, info, sizeof(version));
    if (!c.Gi(gpu_instance)) return NVML_ERROR_INVALID_ARGUMENT;
    if (!migd::sim::AcceptedCiVersion(c, version)) return NVML_ERROR_INVALID_ARGUMENT;
    const mig::GiProfile* gp = nullptr;
    const mig::CiProfile* cp = nullptr;
    nvmlReturn_t r = migd::sim::CiProfileInfo(c, gpu_instance, profile, eng_profile, &gp, &cp);
    if (r != NVML_SUCCESS) return r;
    migd::sim::FillCiV(*gp, *cp, version, info);
    return NVML_SUCCESS;
  });
}
#endif

MIGD_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(
    nvmlGpuInstance_t gpu_instance, unsigned int profile_id, unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gi(gpu_instance);
    if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    migd::sim::SimOr<uint32_t> cap =
        c.m.CiRemainingCapacity(r->gpu->index, r->gi->id, CiProfileId(profile_id));
    if (!cap.ok()) return cap.code();
    *count = *cap;
    return NVML_SUCCESS;
  });
}

#ifndef MIGD_SIM_LEGACY_R470
MIGD_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(
    nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
    nvmlComputeInstancePlacement_t* placements, unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gi(gpu_instance);
    if (!r || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const mig::CiProfile* cp =
        migd::sim::FindCiProfileById(c.m.GiProfileOf(*r->gpu, *r->gi), CiProfileId(profile_id));
    if (cp == nullptr) return NVML_ERROR_NOT_SUPPORTED;
    const auto n = static_cast<unsigned int>(cp->placements.size());
    if (placements == nullptr) {
      *count = n;
      return NVML_SUCCESS;
    }
    // `count` is output only, as for the GI placements.
    for (unsigned int i = 0; i < n; ++i) {
      placements[i] = {cp->placements[i].start, cp->placements[i].size};
    }
    *count = n;
    return NVML_SUCCESS;
  });
}
#endif

MIGD_SIM_EXPORT nvmlReturn_t
nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
                                     nvmlComputeInstance_t* compute_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::CreateCi(c, gpu_instance, profile_id, nullptr, compute_instance);
  });
}

#ifndef MIGD_SIM_LEGACY_R470
MIGD_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(
    nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
    const nvmlComputeInstancePlacement_t* placement, nvmlComputeInstance_t* compute_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    if (placement == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return migd::sim::CreateCi(c, gpu_instance, profile_id, placement, compute_instance);
  });
}
#endif

MIGD_SIM_EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t compute_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Ci(compute_instance);
    if (!r) return NVML_ERROR_INVALID_ARGUMENT;
    return migd::sim::Mutation(c.m.DestroyCi(r->gpu->index, r->gi->id, r->ci->id));
  });
}

MIGD_SIM_EXPORT nvmlReturn_t
nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpu_instance, unsigned int profile_id,
                                   nvmlComputeInstance_t* compute_instances, unsigned int* count) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gi(gpu_instance);
    if (!r || compute_instances == nullptr || count == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    // nvml.h: NOT_SUPPORTED "If profileId isn't supported" (by this GI).
    if (migd::sim::FindCiProfileById(c.m.GiProfileOf(*r->gpu, *r->gi), CiProfileId(profile_id)) ==
        nullptr) {
      return NVML_ERROR_NOT_SUPPORTED;
    }
    unsigned int n = 0;
    for (const migd::sim::SimCi& ci : r->gi->compute_instances) {
      if (ci.profile_id.value() == profile_id) {
        compute_instances[n++] = c.CiHandle(*r->gpu, *r->gi, ci);
      }
    }
    *count = n;
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(
    nvmlGpuInstance_t gpu_instance, unsigned int id, nvmlComputeInstance_t* compute_instance) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    std::optional<Resolved> r = c.Gi(gpu_instance);
    if (!r || compute_instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r->gpu->mig_current) return NVML_ERROR_NOT_SUPPORTED;
    const migd::sim::SimCi* ci = c.m.FindCi(r->gpu->index, r->gi->id, NvmlCiId(id));
    if (ci == nullptr) return NVML_ERROR_NOT_FOUND;
    *compute_instance = c.CiHandle(*r->gpu, *r->gi, *ci);
    return NVML_SUCCESS;
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t compute_instance,
                                                           nvmlComputeInstanceInfo_t* info) {
  return RunCall(__func__,
                 [&](Ctx& c) -> Outcome { return migd::sim::CiInfo(c, compute_instance, info); });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t compute_instance,
                                                        nvmlComputeInstanceInfo_t* info) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // The 11.1 struct has no placement: write only its 24 bytes (nvml.md §3.5).
    nvmlComputeInstanceInfo_t full{};
    nvmlReturn_t r = migd::sim::CiInfo(c, compute_instance, &full);
    if (r == NVML_SUCCESS) std::memcpy(info, &full, offsetof(nvmlComputeInstanceInfo_t, placement));
    return r;
  });
}

// §3.6 Processes.

#ifndef MIGD_SIM_LEGACY_R470
MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                     unsigned int* info_count,
                                                                     nvmlProcessInfo_t* infos) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::ListProcesses(c, device, info_count, infos);
  });
}
#endif

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                     unsigned int* info_count,
                                                                     nvmlProcessInfo_t* infos) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::ListProcesses(c, device, info_count, infos);
  });
}

MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                                  unsigned int* info_count,
                                                                  nvmlProcessInfo_v1_t* infos) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    return migd::sim::ListProcesses(c, device, info_count, infos);
  });
}

#ifndef MIGD_SIM_LEGACY_R470
MIGD_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
                                                                      unsigned int* info_count,
                                                                      nvmlProcessInfo_t* infos) {
  return RunCall(__func__, [&](Ctx& c) -> Outcome {
    (void)infos;
    std::optional<Resolved> r = c.Device(device);
    if (!r || info_count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *info_count = 0;  // the simulator models no graphics clients
    return NVML_SUCCESS;
  });
}
#endif

// The simulator's own controls (docs/simulator.md "Marking processes").

MIGD_SIM_EXPORT nvmlReturn_t migdSimAttachProcess(const char* mig_uuid, unsigned int pid,
                                                  unsigned long long used_bytes) {
  if (mig_uuid == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return migd::sim::RunControl(
      __func__, [&](migd::sim::Machine& m) { return m.AttachProcess(mig_uuid, pid, used_bytes); });
}

MIGD_SIM_EXPORT nvmlReturn_t migdSimDetachProcess(const char* mig_uuid, unsigned int pid) {
  if (mig_uuid == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return migd::sim::RunControl(
      __func__, [&](migd::sim::Machine& m) { return m.DetachProcess(mig_uuid, pid); });
}

MIGD_SIM_EXPORT nvmlReturn_t migdSimReboot(void) {
  return migd::sim::RunControl(__func__, [](migd::sim::Machine& m) {
    m.Reboot();
    return migd::sim::SimStatus();
  });
}

// Every exported signature must match the pointer type the loader uses.
static_assert(std::is_same_v<decltype(&nvmlInit_v2), nvmlInit_fn>);
static_assert(std::is_same_v<decltype(&nvmlInit), nvmlInit_fn>);
static_assert(std::is_same_v<decltype(&nvmlShutdown), nvmlShutdown_fn>);
static_assert(std::is_same_v<decltype(&nvmlErrorString), nvmlErrorString_fn>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetDriverVersion), nvmlSystemGetDriverVersion_fn>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetNVMLVersion), nvmlSystemGetNVMLVersion_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCount_v2), nvmlDeviceGetCount_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCount), nvmlDeviceGetCount_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetHandleByIndex_v2), nvmlDeviceGetHandleByIndex_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetHandleByIndex), nvmlDeviceGetHandleByIndex_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetHandleByUUID), nvmlDeviceGetHandleByUUID_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetHandleByPciBusId_v2), nvmlDeviceGetHandleByUUID_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetUUID), nvmlDeviceGetString_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetName), nvmlDeviceGetString_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetIndex), nvmlDeviceGetUint_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMinorNumber), nvmlDeviceGetUint_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPciInfo_v3), nvmlDeviceGetPciInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPciInfo_v2), nvmlDeviceGetPciInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPciInfo), nvmlDeviceGetPciInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryInfo), nvmlDeviceGetMemoryInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigMode), nvmlDeviceGetMigMode_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMaxMigDeviceCount), nvmlDeviceGetUint_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceIsMigDeviceHandle), nvmlDeviceGetUint_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceId), nvmlDeviceGetUint_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetComputeInstanceId), nvmlDeviceGetUint_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigDeviceHandleByIndex),
                             nvmlDeviceGetMigDeviceHandleByIndex_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetDeviceHandleFromMigDeviceHandle),
                             nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceProfileInfo),
                             nvmlDeviceGetGpuInstanceProfileInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstancePossiblePlacements_v2),
                             nvmlDeviceGetGpuInstancePossiblePlacements_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstancePossiblePlacements),
                             nvmlDeviceGetGpuInstancePossiblePlacements_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceRemainingCapacity),
                             nvmlDeviceGetGpuInstanceRemainingCapacity_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceCreateGpuInstance), nvmlDeviceCreateGpuInstance_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceCreateGpuInstanceWithPlacement),
                             nvmlDeviceCreateGpuInstanceWithPlacement_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceDestroy), nvmlGpuInstanceDestroy_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstances), nvmlDeviceGetGpuInstances_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceById), nvmlDeviceGetGpuInstanceById_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetInfo), nvmlGpuInstanceGetInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetComputeInstanceProfileInfo),
                             nvmlGpuInstanceGetComputeInstanceProfileInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetComputeInstanceRemainingCapacity),
                             nvmlGpuInstanceGetComputeInstanceRemainingCapacity_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceCreateComputeInstance),
                             nvmlGpuInstanceCreateComputeInstance_fn>);
static_assert(std::is_same_v<decltype(&nvmlComputeInstanceDestroy), nvmlComputeInstanceDestroy_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetComputeInstances),
                             nvmlGpuInstanceGetComputeInstances_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetComputeInstanceById),
                             nvmlGpuInstanceGetComputeInstanceById_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlComputeInstanceGetInfo_v2), nvmlComputeInstanceGetInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlComputeInstanceGetInfo), nvmlComputeInstanceGetInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses_v2),
                             nvmlDeviceGetComputeRunningProcesses_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses),
                             nvmlDeviceGetComputeRunningProcessesV1_fn>);
#ifndef MIGD_SIM_LEGACY_R470
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceProfileInfoV),
                             nvmlDeviceGetGpuInstanceProfileInfoV_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceProfileInfoByIdV),
                             nvmlDeviceGetGpuInstanceProfileInfoV_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetComputeInstanceProfileInfoV),
                             nvmlGpuInstanceGetComputeInstanceProfileInfoV_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetComputeInstancePossiblePlacements),
                             nvmlGpuInstanceGetComputeInstancePossiblePlacements_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceCreateComputeInstanceWithPlacement),
                             nvmlGpuInstanceCreateComputeInstanceWithPlacement_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses_v3),
                             nvmlDeviceGetComputeRunningProcesses_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGraphicsRunningProcesses_v3),
                             nvmlDeviceGetComputeRunningProcesses_fn>);
#endif
