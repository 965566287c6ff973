#include "sim/nvml_sim_session.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "mig/catalog.h"
#include "sim/events.h"
#include "sim/nvml_names.h"
#include "sim/nvml_sim_calls.h"
#include "sim/proc_files.h"
#include "sim/state.h"
#include "sim/state_store.h"

namespace migd::sim::lib {
namespace {

[[noreturn]] void Die() {
  std::fflush(nullptr);
  ::kill(::getpid(), SIGKILL);
  ::_exit(137);
}

void Sleep(uint32_t ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Runs `body` on the machine in one state transaction and counts `fn` with
// its result (or with `injected` instead of running the body). Returns the
// call's result; NVML_ERROR_UNKNOWN (with a message on stderr) if the state
// file cannot be read or written.
nvmlReturn_t Transact(Session& session, SimHost& host, const char* fn,
                      std::optional<nvmlReturn_t> injected,
                      const std::function<Outcome(Ctx&)>& body)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu) {
  nvmlReturn_t result = NVML_ERROR_UNKNOWN;
  bool mutated = false;
  const LostCalls lost_calls = session.config.lost_calls;  // read under session.mu
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
          // A call that met a lost GPU changed nothing (its handles did not
          // resolve) and answers as the knob says.
          if (ctx.met_lost_gpu() && result != NVML_SUCCESS) {
            result = LostAnswer(lost_calls, fn);
          }
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
void CountOnly(Session& session, const char* fn, const std::string& result)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu) {
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

// A fault of `fn`'s next call, numbered per process; CRASH kills here.
// `count` records the injected result where it can be counted.
std::optional<FaultRule> NextFault(Session& s, const SimConfig& config, const char* fn,
                                   const std::function<void(const std::string&)>& count)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  const uint64_t n = ++s.call_numbers[fn];
  std::optional<FaultRule> fault = config.faults.Match(fn, n);
  if (fault && fault->action == FaultAction::kCrash) {
    count("CRASH");
    Die();
  }
  if (fault && fault->action == FaultAction::kReturn) count(NvmlResultName(fault->code));
  return fault;
}

// nvmlInit when already initialised: only the reference count changes. The
// latency is slept holding the session mutex, so that a concurrent shutdown
// cannot interleave.
nvmlReturn_t InitAgain(Session& s, const char* fn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  Sleep(s.config.LatencyFor(fn));
  auto count = [&](const std::string& r) {
    s.mu.AssertHeld();
    CountOnly(s, fn, r);
  };
  const std::optional<FaultRule> fault = NextFault(s, s.config, fn, count);
  if (fault && fault->action == FaultAction::kReturn) return fault->code;
  ++s.refcount;
  CountOnly(s, fn, NvmlResultName(NVML_SUCCESS));
  if (fault && fault->action == FaultAction::kCrashAfter) Die();
  return NVML_SUCCESS;
}

// MIGD_SIM_EVENTS (sim/events.h, docs/simulator.md §11): once per process,
// after its first successful nvmlInit, a detached thread injects each event
// `delay_ms` after that init, in delay order, as migdSimInjectEvents does. A
// bad list is reported and injects nothing; an event the machine refuses is
// reported and skipped.
void StartEnvEvents() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* text = std::getenv(kEnvEvents);
    if (text == nullptr || *text == '\0') return;
    StatusOr<std::vector<EventSpec>> specs = ParseEventSpecs(text, /*allow_delay=*/true);
    if (!specs.ok()) {
      Report(std::string(kEnvEvents) + ": " + specs.status().ToString() + " (no event injected)");
      return;
    }
    std::stable_sort(specs->begin(), specs->end(),
                     [](const EventSpec& a, const EventSpec& b) { return a.delay_ms < b.delay_ms; });
    const auto start = std::chrono::steady_clock::now();
    std::thread([list = std::move(specs).value(), start] {
      for (const EventSpec& spec : list) {
        std::this_thread::sleep_until(start + std::chrono::milliseconds(spec.delay_ms));
        const nvmlReturn_t r = RunControl(
            "migdSimInjectEvents", [&](Machine& m) { return m.InjectEvent(spec); });
        if (r != NVML_SUCCESS) {
          Report(std::string(kEnvEvents) + ": an event for GPU " + std::to_string(spec.gpu) +
                 " was refused (" + NvmlResultName(r) + "), skipped");
        }
      }
    }).detach();
  });
}

// The nvmlInit that takes the count from 0 to 1: reads the knobs and opens
// (or creates) the machine.
nvmlReturn_t InitFirst(Session& s, const char* fn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
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
  auto count = [&](const std::string& r) { CountInFile(*config, fn, r); };
  const std::optional<FaultRule> fault = NextFault(s, *config, fn, count);
  if (fault && fault->action == FaultAction::kReturn) return fault->code;
  SimConfig effective = *config;
  if constexpr (kLegacy) {
    // A machine created by the legacy library reports an R470 driver.
    effective.driver_version = std::string(kLegacyDriverVersion);
    effective.nvml_version = std::string(kLegacyNvmlVersion);
  }
  StatusOr<std::unique_ptr<SimHost>> host = SimHost::Open(effective);
  if (!host.ok()) {
    Report(host.status().ToString() + " (" + fn + " fails)");
    const nvmlReturn_t r =
        IsFailedPrecondition(host.status()) ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_ERROR_UNKNOWN;
    CountInFile(*config, fn, NvmlResultName(r));
    return r;
  }
  s.host = std::move(host).value();
  s.config = std::move(effective);
  s.refcount = 1;
  CountOnly(s, fn, NvmlResultName(NVML_SUCCESS));
  if (fault && fault->action == FaultAction::kCrashAfter) Die();
  StartEnvEvents();  // its thread takes s.mu only after this init returns
  return NVML_SUCCESS;
}

// The calls of the entry points, with exceptions turned into UNKNOWN.
template <typename F>
nvmlReturn_t Guarded(const char* fn, F&& f) noexcept {
  try {
    return f();
  } catch (const std::exception& e) {
    Report(std::string(fn) + ": internal error: " + e.what());
  } catch (...) {
    Report(std::string(fn) + ": internal error");
  }
  return NVML_ERROR_UNKNOWN;
}

}  // namespace

Session& Session::Get() {
  static Session* session = new Session;
  return *session;
}

Handle* Session::Intern(HandleKind kind, uint32_t gpu, uint32_t gi, uint32_t ci, uint64_t serial) {
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

const Handle* Session::Lookup(const void* p) const {
  const auto* h = static_cast<const Handle*>(p);
  if (h == nullptr || !all_handles.contains(h)) return nullptr;
  if (h->magic != Handle::kMagic || h->generation != generation) return nullptr;
  return h;
}

const SimConfig& Ctx::config() const {
  session_.mu.AssertHeld();
  return session_.config;
}

std::optional<Resolved> Ctx::Device(nvmlDevice_t d) const {
  session_.mu.AssertHeld();
  const Handle* h = session_.Lookup(d);
  if (h == nullptr || (h->kind != HandleKind::kGpu && h->kind != HandleKind::kMig)) {
    return std::nullopt;
  }
  return Resolve(h);
}

std::optional<Resolved> Ctx::Gpu(nvmlDevice_t d) const {
  std::optional<Resolved> r = Device(d);
  if (!r || r->is_mig()) return std::nullopt;
  return r;
}

std::optional<Resolved> Ctx::Gi(nvmlGpuInstance_t g) const {
  session_.mu.AssertHeld();
  const Handle* h = session_.Lookup(g);
  if (h == nullptr || h->kind != HandleKind::kGi) return std::nullopt;
  return Resolve(h);
}

std::optional<Resolved> Ctx::Ci(nvmlComputeInstance_t c) const {
  session_.mu.AssertHeld();
  const Handle* h = session_.Lookup(c);
  if (h == nullptr || h->kind != HandleKind::kCi) return std::nullopt;
  return Resolve(h);
}

void Ctx::NoteNewCi(const SimGpu& gpu, const SimCi& ci) {
  session_.mu.AssertHeld();
  if (session_.config.new_ci_hidden_walks > 0) {
    session_.hidden_cis[ci.serial] = Session::HiddenCi{gpu.index.value(), 0};
  }
}

std::set<uint64_t> Ctx::HiddenCis(const SimGpu& gpu, bool walk_start) {
  session_.mu.AssertHeld();
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

EventSetObj* Ctx::NewEventSet() {
  session_.mu.AssertHeld();
  auto* set = new EventSetObj();  // never freed: see EventSetObj
  set->generation = session_.generation;
  session_.event_sets.insert(set);
  return set;
}

EventSetObj* Ctx::EventSet(nvmlEventSet_t set) const {
  session_.mu.AssertHeld();
  auto* obj = reinterpret_cast<EventSetObj*>(set);
  if (obj == nullptr || !session_.event_sets.contains(obj)) return nullptr;
  if (obj->freed || obj->generation != session_.generation) return nullptr;
  return obj;
}

nvmlDevice_t Ctx::GpuHandle(const SimGpu& gpu) {
  session_.mu.AssertHeld();
  return reinterpret_cast<nvmlDevice_t>(
      session_.Intern(HandleKind::kGpu, gpu.index.value(), 0, 0, 0));
}

nvmlDevice_t Ctx::MigHandle(const SimGpu& gpu, const SimGi& gi, const SimCi& ci) {
  session_.mu.AssertHeld();
  return reinterpret_cast<nvmlDevice_t>(session_.Intern(HandleKind::kMig, gpu.index.value(),
                                                        gi.id.value(), ci.id.value(), ci.serial));
}

nvmlGpuInstance_t Ctx::GiHandle(const SimGpu& gpu, const SimGi& gi) {
  session_.mu.AssertHeld();
  return reinterpret_cast<nvmlGpuInstance_t>(
      session_.Intern(HandleKind::kGi, gpu.index.value(), gi.id.value(), 0, gi.serial));
}

nvmlComputeInstance_t Ctx::CiHandle(const SimGpu& gpu, const SimGi& gi, const SimCi& ci) {
  session_.mu.AssertHeld();
  return reinterpret_cast<nvmlComputeInstance_t>(
      session_.Intern(HandleKind::kCi, gpu.index.value(), gi.id.value(), ci.id.value(), ci.serial));
}

bool Ctx::Lost(const SimGpu& gpu) const {
  if (gpu.lost) met_lost_gpu_ = true;
  return gpu.lost;
}

// The calls of this library whose nvml.h entry lists "NVML_ERROR_GPU_IS_LOST
// if the target GPU has fallen off the bus or is otherwise inaccessible" (or,
// for the wait, "if a GPU has fallen off the bus"); NVIDIA/go-nvml
// gen/nvml/nvml.h. The others are silent on a lost GPU.
constexpr std::string_view kCallsDocumentingGpuIsLost[] = {
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByPciBusId_v2",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetName",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetSupportedEventTypes",
    "nvmlDeviceGetUUID",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait_v2",
};

nvmlReturn_t LostAnswer(LostCalls lost_calls, std::string_view fn) {
  if (lost_calls == LostCalls::kGpuIsLost) return NVML_ERROR_GPU_IS_LOST;
  for (std::string_view documented : kCallsDocumentingGpuIsLost) {
    if (fn == documented) return NVML_ERROR_GPU_IS_LOST;
  }
  return NVML_ERROR_UNKNOWN;  // "on any unexpected error"
}

std::optional<Resolved> Ctx::Resolve(const Handle* h) const {
  Resolved r;
  r.handle = h;
  r.gpu = m.FindGpu(GpuIndex(h->gpu));
  if (r.gpu == nullptr || Lost(*r.gpu)) return std::nullopt;
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

void Report(const std::string& message) {
  std::fprintf(stderr, "libnvidia-ml-sim: %s\n", message.c_str());
  std::fflush(stderr);
}

nvmlReturn_t RunCall(const char* fn, const std::function<Outcome(Ctx&)>& body) noexcept {
  return Guarded(fn, [&]() -> nvmlReturn_t {
    Session& s = Session::Get();
    // The simulated latency is slept without the session lock, so that other
    // threads' calls proceed (as with a real driver); the session may have
    // been shut down meanwhile, which the locked check below sees.
    uint32_t latency_ms = 0;
    {
      MutexLock lock(&s.mu);
      if (s.refcount != 0) latency_ms = s.config.LatencyFor(fn);
    }
    if (latency_ms > 0) Sleep(latency_ms);
    MutexLock lock(&s.mu);
    if (s.refcount == 0) {
      CountOnly(s, fn, NvmlResultName(NVML_ERROR_UNINITIALIZED));
      return NVML_ERROR_UNINITIALIZED;
    }
    // An injected error is counted by Transact, which runs no body then.
    const std::optional<FaultRule> fault = NextFault(s, s.config, fn, [&](const std::string& r) {
      s.mu.AssertHeld();
      if (r == "CRASH") CountOnly(s, fn, r);
    });
    std::optional<nvmlReturn_t> injected;
    if (fault && fault->action == FaultAction::kReturn) injected = fault->code;
    const nvmlReturn_t result = Transact(s, *s.host, fn, injected, body);
    if (fault && fault->action == FaultAction::kCrashAfter) Die();
    return result;
  });
}

nvmlReturn_t InitImpl(const char* fn) noexcept {
  return Guarded(fn, [&]() -> nvmlReturn_t {
    Session& s = Session::Get();
    MutexLock lock(&s.mu);
    return s.refcount > 0 ? InitAgain(s, fn) : InitFirst(s, fn);
  });
}

nvmlReturn_t ShutdownImpl(const char* fn) noexcept {
  return Guarded(fn, [&]() -> nvmlReturn_t {
    Session& s = Session::Get();
    MutexLock lock(&s.mu);
    if (s.refcount == 0) {
      // "No error is reported if nvmlShutdown() is called more times than
      // nvmlInit()" (nvml.h, nvmlShutdown).
      CountOnly(s, fn, NvmlResultName(NVML_SUCCESS));
      return NVML_SUCCESS;
    }
    Sleep(s.config.LatencyFor(fn));
    auto count = [&](const std::string& r) {
      s.mu.AssertHeld();
      CountOnly(s, fn, r);
    };
    const std::optional<FaultRule> fault = NextFault(s, s.config, fn, count);
    if (fault && fault->action == FaultAction::kReturn) return fault->code;
    if (--s.refcount == 0) {
      ++s.generation;  // every handle of this session is now invalid
      s.interned.clear();
      s.hidden_cis.clear();
    }
    CountOnly(s, fn, NvmlResultName(NVML_SUCCESS));
    if (fault && fault->action == FaultAction::kCrashAfter) Die();
    return NVML_SUCCESS;
  });
}

void AwaitEvent(nvmlEventSet_t set, unsigned int timeout_ms) noexcept {
  try {
    Session& s = Session::Get();
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      {
        MutexLock lock(&s.mu);
        if (timeout_ms == 0 && s.config.event_wait_zero == EventWaitZero::kImmediate) return;
        const auto* obj = reinterpret_cast<const EventSetObj*>(set);
        if (s.refcount == 0 || !s.host || !s.event_sets.contains(obj) || obj->freed ||
            obj->generation != s.generation) {
          return;
        }
        bool ready = true;
        const SimConfig config = s.config;  // a copy: the lambda holds no lock annotation
        Status st = s.host->store().Inspect([&](const SimState& state) {
          ready = EventReady(state, config, *obj);
          return OkStatus();
        });
        if (!st.ok() || ready) return;
      }
      if (timeout_ms > 0 &&
          std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(timeout_ms)) {
        return;
      }
      Sleep(2);
    }
  } catch (...) {
    return;  // the counted call that follows reports what it finds
  }
}

nvmlReturn_t RunControl(const char* fn, const std::function<SimStatus(Machine&)>& body) noexcept {
  return Guarded(fn, [&]() -> nvmlReturn_t {
    Session& s = Session::Get();
    MutexLock lock(&s.mu);
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
  });
}

}  // namespace migd::sim::lib
