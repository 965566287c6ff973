// File: driver/nvml/nvml_library.h
//
// NvmlLibrary: dlopen() of libnvidia-ml.so.1 (or a configured path such as the
// simulator's libnvidia-ml-sim.so) and dlsym() of every NVML entry point migd
// uses, by its exported (suffixed) name, with the fallback chains of
// driver/nvml/nvml_functions.h. It also owns the per-(function, result) call counters: every NVML
// call in the code base goes through NvmlLibrary::Call, which is what backs
// NvmlDriver::CallCounts() and, later, the NVML metrics.
//
// NvmlLibrary never calls nvmlInit or nvmlShutdown: that is NvmlSession's job
// (nvml_session.h), and NvmlSession is the only caller.
//
// Example:
//   MIGD_ASSIGN_OR_RETURN(std::shared_ptr<NvmlLibrary> lib, NvmlLibrary::Load());
//   for (const NvmlBinding& b : lib->Bindings()) LOG(b.function, b.bound);
//   auto session = std::make_shared<NvmlSession>(lib);
//
// Thread-safety: immutable after Load() except the call counters, which are
// atomics; all methods are safe for concurrent use.
#ifndef MIGD_DRIVER_NVML_NVML_LIBRARY_H_
#define MIGD_DRIVER_NVML_NVML_LIBRARY_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "driver/nvml/nvml_abi.h"
#include "driver/nvml/nvml_functions.h"

namespace migd::driver {

// Every exported NVML symbol migd may bind, including fallback variants: the
// entries of driver/nvml/nvml_functions.h that are not SIM_ONLY, in its
// order. Each variant is a distinct entry so that call counts say which
// variant actually ran; NvmlSymbolName() gives its exported name.
// clang-format off
enum class NvmlSymbol : int {
#define MIGD_NVML_SYMBOL(id, name, type, since, header, use, head, effect) \
  MIGD_NVML_IF_BOUND_##use(id, )
  MIGD_NVML_FUNCTIONS(MIGD_NVML_SYMBOL)
#undef MIGD_NVML_SYMBOL
  kCount,  // not a symbol
};
// clang-format on
inline constexpr int kNvmlSymbolCount = static_cast<int>(NvmlSymbol::kCount);

// The exported name, e.g. "nvmlDeviceGetPciInfo_v3".
std::string_view NvmlSymbolName(NvmlSymbol s);

// A logical NVML function and its fallback chain, best first: a REQUIRED or
// OPTIONAL entry of nvml_functions.h followed by its FALLBACK entries.
struct NvmlFunctionSpec {
  std::string_view function;  // the wanted (first) symbol name
  std::vector<NvmlSymbol> chain;
  bool required = false;  // Load fails if no symbol of the chain resolves
};
// Every logical function migd binds, in a fixed order.
const std::vector<NvmlFunctionSpec>& NvmlFunctionSpecs();

// Which variant of a logical function was bound (for probe output and tests).
struct NvmlBinding {
  std::string function;  // the wanted symbol, e.g. "nvmlDeviceGetPciInfo_v3"
  std::string bound;     // the symbol actually bound; empty if none resolved
  bool required = false;
};

// One row of the call counters.
struct NvmlCallCount {
  std::string function;  // exported symbol actually called, e.g. "nvmlInit_v2"
  std::string result;    // NvmlReturnName without the "NVML_" prefix: "SUCCESS", "ERROR_IN_USE"
  uint64_t count = 0;
  friend bool operator==(const NvmlCallCount&, const NvmlCallCount&) = default;
};

class NvmlLibrary {
 public:
  static constexpr const char* kDefaultPath = "libnvidia-ml.so.1";

  // dlopen()s `path` (kDefaultPath when empty) with RTLD_NOW | RTLD_LOCAL |
  // RTLD_NODELETE and binds every symbol of NvmlFunctionSpecs(). The library
  // stays mapped for the life of the process (NVML's own process-wide state
  // must outlive us); loading the same path again yields the same instance.
  // kUnavailable when the library cannot be opened ("<path> not found:
  // <dlerror>; install the NVIDIA driver or pass --nvml-library") or when a
  // required function has no symbol of its chain ("... too old: missing
  // <symbol> ... (driver <version>)"; the version is included when it can be
  // read without nvmlInit, from nvmlSystemGetDriverVersion or
  // /proc/driver/nvidia/version).
  static StatusOr<std::shared_ptr<NvmlLibrary>> Load(const std::string& path = "");

  // A library whose symbols come from `resolve(name)` instead of dlsym on a
  // handle of our own (tests: the simulator's symbols from a dlopen handle,
  // with some hidden to act as an older export table, see
  // nvml_sim_testing.h). Same binding and error rules as Load(); `path` is
  // only reported.
  using Resolver = void* (*)(const char* name, void* ctx);
  static StatusOr<std::shared_ptr<NvmlLibrary>> FromResolver(Resolver resolve, void* ctx,
                                                             const std::string& path);

  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // The path given to dlopen.
  const std::string& path() const { return path_; }

  // True if `s` resolved.
  bool Has(NvmlSymbol s) const { return symbols_[Index(s)] != nullptr; }
  // The first symbol of `chain` that resolved, if any.
  bool FirstBound(const std::vector<NvmlSymbol>& chain, NvmlSymbol* out) const;

  // One entry per NvmlFunctionSpecs() element.
  std::vector<NvmlBinding> Bindings() const;

  // Calls symbol `s`, cast to function type `Fn`, with `args`, and counts
  // (s, result). REQUIRES: Has(s) and `Fn` is the symbol's C signature.
  template <typename Fn, typename... Args>
  nvmlReturn_t Call(NvmlSymbol s, Args... args) const {
    const nvmlReturn_t r = reinterpret_cast<Fn>(symbols_[Index(s)])(args...);
    Count(s, r);
    return r;
  }

  // nvmlErrorString(r), or nullptr if the symbol is absent. Not counted: it is
  // a static string lookup, not a driver call.
  const char* ErrorString(nvmlReturn_t r) const;

  // Non-zero counters, ordered by symbol then result.
  std::vector<NvmlCallCount> CallCounts() const;
  // Sum of all counters.
  uint64_t TotalCalls() const;
  // The counter of one (symbol, result) pair.
  uint64_t CallCount(NvmlSymbol s, nvmlReturn_t r) const;

 private:
  // Results 0..30 have their own slot; 999 and unknown values share the last.
  static constexpr int kResultSlots = 32;
  static constexpr int Index(NvmlSymbol s) { return static_cast<int>(s); }
  static int ResultSlot(nvmlReturn_t r);

  NvmlLibrary(std::string path, void* handle);
  Status BindAll(Resolver resolve, void* ctx);
  void Count(NvmlSymbol s, nvmlReturn_t r) const;

  std::string path_;
  void* handle_ = nullptr;  // dlopen handle; null for FromResolver
  std::array<void*, kNvmlSymbolCount> symbols_{};
  mutable std::array<std::array<std::atomic<uint64_t>, kResultSlots>, kNvmlSymbolCount> counts_{};
};

// Reads the kernel module version from /proc/driver/nvidia/version ("580.95.05");
// empty if unreadable. Exposed for the probe.
std::string ReadKernelDriverVersion(const std::string& proc_path = "/proc/driver/nvidia/version");

}  // namespace migd::driver

#endif  // MIGD_DRIVER_NVML_NVML_LIBRARY_H_
