#include "driver/nvml/nvml_library.h"

#include <absl/strings/ascii.h>
#include <dlfcn.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "driver/nvml/nvml_status.h"

namespace migd::driver {
namespace {

using S = NvmlSymbol;

constexpr std::array<std::string_view, kNvmlSymbolCount> kSymbolNames = {
#define MIGD_NVML_NAME(id, name, type, since, header, use, head, effect) \
  MIGD_NVML_IF_BOUND_##use(#name, )
    MIGD_NVML_FUNCTIONS(MIGD_NVML_NAME)
#undef MIGD_NVML_NAME
};

// How an entry of the list is bound.
enum class Use { kRequired, kOptional, kFallback };
#define MIGD_NVML_USE_REQUIRED Use::kRequired
#define MIGD_NVML_USE_OPTIONAL Use::kOptional
#define MIGD_NVML_USE_FALLBACK Use::kFallback

struct Entry {
  NvmlSymbol id;
  Use use;
  NvmlSymbol head;
};
constexpr Entry kEntries[] = {
#define MIGD_NVML_ENTRY(id, name, type, since, header, use, head, effect) \
  MIGD_NVML_IF_BOUND_##use(Entry{S::id, MIGD_NVML_USE_##use, S::head}, )
    MIGD_NVML_FUNCTIONS(MIGD_NVML_ENTRY)
#undef MIGD_NVML_ENTRY
};

void* DlsymResolver(const char* name, void* handle) { return dlsym(handle, name); }

}  // namespace

std::string_view NvmlSymbolName(NvmlSymbol s) {
  const int i = static_cast<int>(s);
  if (i < 0 || i >= kNvmlSymbolCount) return "nvml?";
  return kSymbolNames[i];
}

const std::vector<NvmlFunctionSpec>& NvmlFunctionSpecs() {
  static const std::vector<NvmlFunctionSpec>* specs = [] {
    auto* out = new std::vector<NvmlFunctionSpec>;
    for (const Entry& e : kEntries) {
      if (e.use == Use::kFallback) continue;
      NvmlFunctionSpec spec{NvmlSymbolName(e.id), {e.id}, e.use == Use::kRequired};
      for (const Entry& f : kEntries) {
        if (f.use == Use::kFallback && f.head == e.id) spec.chain.push_back(f.id);
      }
      out->push_back(std::move(spec));
    }
    return out;
  }();
  return *specs;
}

std::string ReadKernelDriverVersion(const std::string& proc_path) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep ..."
  std::ifstream in(proc_path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  const std::string marker = "Kernel Module";
  auto pos = line.find(marker);
  if (pos == std::string::npos) return "";
  std::istringstream rest(line.substr(pos + marker.size()));
  std::string version;
  rest >> version;
  return version;
}

NvmlLibrary::NvmlLibrary(std::string path, void* handle)
    : path_(std::move(path)), handle_(handle) {}

NvmlLibrary::~NvmlLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

StatusOr<std::shared_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  const std::string p = path.empty() ? std::string(kDefaultPath) : path;
  dlerror();  // clear
  // RTLD_NODELETE: NVML (and the simulator) keep process-wide state, and
  // possibly threads, that must outlive this object and static destructors;
  // the library stays mapped until the process exits.
  void* handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* err = dlerror();
    return UnavailableError(p + " not found: " + (err != nullptr ? err : "dlopen failed") +
                            "; install the NVIDIA driver or pass --nvml-library");
  }
  std::shared_ptr<NvmlLibrary> lib(new NvmlLibrary(p, handle));
  Status s = lib->BindAll(&DlsymResolver, handle);
  if (!s.ok()) return s;
  return lib;
}

StatusOr<std::shared_ptr<NvmlLibrary>> NvmlLibrary::FromResolver(Resolver resolve, void* ctx,
                                                                 const std::string& path) {
  std::shared_ptr<NvmlLibrary> lib(new NvmlLibrary(path, nullptr));
  Status s = lib->BindAll(resolve, ctx);
  if (!s.ok()) return s;
  return lib;
}

Status NvmlLibrary::BindAll(Resolver resolve, void* ctx) {
  for (int i = 0; i < kNvmlSymbolCount; ++i) {
    symbols_[i] = resolve(std::string(kSymbolNames[i]).c_str(), ctx);
  }
  std::vector<std::string> missing;
  for (const NvmlFunctionSpec& spec : NvmlFunctionSpecs()) {
    NvmlSymbol bound;
    if (spec.required && !FirstBound(spec.chain, &bound)) {
      std::string names;
      for (NvmlSymbol s : spec.chain) {
        if (!names.empty()) names += " or ";
        names += NvmlSymbolName(s);
      }
      missing.push_back(names);
    }
  }
  if (missing.empty()) return OkStatus();

  // Best effort: the driver version, without nvmlInit (NvmlSession alone may
  // call it). The real NVML answers UNINITIALIZED here; the kernel module's
  // /proc file usually knows.
  std::string version;
  if (Has(NvmlSymbol::kSystemGetDriverVersion)) {
    char buf[nvml_abi::kSystemDriverVersionBufferSize] = {};
    if (Call<nvmlSystemGetDriverVersion_fn>(NvmlSymbol::kSystemGetDriverVersion, buf,
                                            static_cast<unsigned int>(sizeof(buf))) ==
        NVML_SUCCESS) {
      version = std::string(
          absl::StripAsciiWhitespace(absl::string_view(buf, strnlen(buf, sizeof(buf)))));
    }
  }
  if (version.empty()) version = ReadKernelDriverVersion();

  std::string msg = path_ + " is too old or incomplete for migd: missing required symbol";
  if (missing.size() > 1) msg += "s";
  msg += " ";
  for (size_t i = 0; i < missing.size(); ++i) {
    if (i > 0) msg += ", ";
    msg += missing[i];
  }
  msg += " (driver " + (version.empty() ? std::string("version unknown") : version) +
         "); migd needs NVIDIA driver R460 or newer (R470+ recommended)";
  return UnavailableError(msg);
}

bool NvmlLibrary::FirstBound(const std::vector<NvmlSymbol>& chain, NvmlSymbol* out) const {
  for (NvmlSymbol s : chain) {
    if (Has(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

std::vector<NvmlBinding> NvmlLibrary::Bindings() const {
  std::vector<NvmlBinding> out;
  for (const NvmlFunctionSpec& spec : NvmlFunctionSpecs()) {
    NvmlBinding b;
    b.function = std::string(spec.function);
    b.required = spec.required;
    NvmlSymbol bound;
    if (FirstBound(spec.chain, &bound)) b.bound = std::string(NvmlSymbolName(bound));
    out.push_back(std::move(b));
  }
  return out;
}

const char* NvmlLibrary::ErrorString(nvmlReturn_t r) const {
  if (!Has(NvmlSymbol::kErrorString)) return nullptr;
  return reinterpret_cast<nvmlErrorString_fn>(symbols_[Index(NvmlSymbol::kErrorString)])(r);
}

int NvmlLibrary::ResultSlot(nvmlReturn_t r) {
  const int v = static_cast<int>(r);
  if (v >= 0 && v <= static_cast<int>(NVML_ERROR_RESET_TYPE_NOT_SUPPORTED)) return v;
  return kResultSlots - 1;
}

void NvmlLibrary::Count(NvmlSymbol s, nvmlReturn_t r) const {
  counts_[Index(s)][ResultSlot(r)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t NvmlLibrary::CallCount(NvmlSymbol s, nvmlReturn_t r) const {
  return counts_[Index(s)][ResultSlot(r)].load(std::memory_order_relaxed);
}

std::vector<NvmlCallCount> NvmlLibrary::CallCounts() const {
  std::vector<NvmlCallCount> out;
  for (int s = 0; s < kNvmlSymbolCount; ++s) {
    for (int slot = 0; slot < kResultSlots; ++slot) {
      const uint64_t n = counts_[s][slot].load(std::memory_order_relaxed);
      if (n == 0) continue;
      const nvmlReturn_t r =
          slot == kResultSlots - 1 ? NVML_ERROR_UNKNOWN : static_cast<nvmlReturn_t>(slot);
      std::string_view name = NvmlReturnName(r);
      name.remove_prefix(5);  // "NVML_"
      out.push_back({std::string(kSymbolNames[s]), std::string(name), n});
    }
  }
  return out;
}

uint64_t NvmlLibrary::TotalCalls() const {
  uint64_t total = 0;
  for (const auto& row : counts_) {
    for (const auto& c : row) total += c.load(std::memory_order_relaxed);
  }
  return total;
}

}  // namespace migd::driver
