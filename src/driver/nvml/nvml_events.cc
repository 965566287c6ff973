#include "driver/nvml/nvml_events.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status_macros.h"
#include "driver/nvml/nvml_abi.h"
#include "driver/nvml/nvml_status.h"
#include "driver/nvml/nvml_text.h"

namespace migd::driver {
namespace {

namespace abi = ::migd::nvml_abi;
using S = NvmlSymbol;

// The event types GpuEventWatch asks NVML for.
constexpr unsigned long long kWatchedTypes = abi::kEventTypeXidCriticalError |
                                             abi::kEventMigConfigChange |
                                             abi::kEventTypeGpuUnavailableError;

unsigned long long TypesOf(GpuEventKinds kinds) {
  unsigned long long t = 0;
  if (kinds.xid) t |= abi::kEventTypeXidCriticalError;
  if (kinds.mig_config_change) t |= abi::kEventMigConfigChange;
  if (kinds.gpu_lost) t |= abi::kEventTypeGpuUnavailableError;
  return t;
}

// What a registration gives: the registered types, plus kGpuLost whenever it
// was wanted (without the event type, NVML_ERROR_GPU_IS_LOST reports it).
GpuEventKinds KindsOf(unsigned long long registered, GpuEventKinds wanted) {
  GpuEventKinds k;
  k.xid = (registered & abi::kEventTypeXidCriticalError) != 0;
  k.mig_config_change = (registered & abi::kEventMigConfigChange) != 0;
  k.gpu_lost = wanted.gpu_lost || (registered & abi::kEventTypeGpuUnavailableError) != 0;
  return k;
}

std::optional<GpuEventKind> KindOfType(unsigned long long type) {
  switch (type) {
    case abi::kEventTypeXidCriticalError: return GpuEventKind::kXid;
    case abi::kEventMigConfigChange: return GpuEventKind::kMigConfigChange;
    case abi::kEventTypeGpuUnavailableError: return GpuEventKind::kGpuLost;
    default: return std::nullopt;
  }
}

bool HasEventApi(const NvmlLibrary& lib) {
  return lib.Has(S::kEventSetCreate) && lib.Has(S::kDeviceGetSupportedEventTypes) &&
         lib.Has(S::kDeviceRegisterEvents) && lib.Has(S::kEventSetWaitV2) &&
         lib.Has(S::kEventSetFree);
}

}  // namespace

class NvmlEventWatch::State {
 public:
  explicit State(std::shared_ptr<NvmlSession> session) : session_(std::move(session)) {}

  Status Create();
  StatusOr<GpuEventKinds> Register(GpuIndex gpu, GpuEventKinds wanted);
  StatusOr<std::optional<GpuEvent>> Wait(std::chrono::milliseconds timeout);
  Status Close();
  // The session's close hook: frees the set without a token (none can be
  // admitted any more, none is in flight).
  void FreeAtSessionClose();
  // True once no NVML set is held.
  bool freed() {
    MutexLock lock(&mu_);
    return set_ == nullptr;
  }
  NvmlSession& session() const { return *session_; }

 private:
  struct Gpu {
    nvmlDevice_t handle = nullptr;
    unsigned long long types = 0;  // registered
    GpuEventKinds wanted;
  };

  NvmlLibrary& lib() const { return session_->library(); }
  Status Err(nvmlReturn_t r, const std::string& what) const {
    return FromNvml(r, what, lib().ErrorString(r));
  }
  // A token of the set's own session, or why there is none.
  StatusOr<NvmlSession::Token> Admit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StatusOr<nvmlDevice_t> Handle(GpuIndex gpu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // nvmlDeviceRegisterEvents of `types` (type by type after an unexpected
  // NOT_SUPPORTED); *registered gets the types registered. Returns SUCCESS
  // or the first other failure.
  nvmlReturn_t RegisterTypes(nvmlEventSet_t set, nvmlDevice_t dev, unsigned long long types,
                             unsigned long long* registered) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new set with every GPU of gpus_ registered again; the old one freed.
  // A GPU that cannot be registered again is dropped (kGpuLost queued if it
  // answers GPU_IS_LOST).
  Status Remake() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After NVML_ERROR_GPU_IS_LOST: queues kGpuLost for every registered GPU
  // that answers it, drops them and re-makes the set.
  Status TraceLostGpus() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<GpuEvent> Translate(const nvmlEventData_t& data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Free(const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<NvmlSession> session_;
  Mutex mu_;
  nvmlEventSet_t set_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::string closed_why_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, Gpu> gpus_ ABSL_GUARDED_BY(mu_);
  std::deque<GpuEvent> pending_ ABSL_GUARDED_BY(mu_);
};

Status NvmlEventWatch::State::Create() {
  MutexLock lock(&mu_);
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  nvmlEventSet_t set = nullptr;
  const nvmlReturn_t r = lib().Call<nvmlEventSetCreate_fn>(S::kEventSetCreate, &set);
  if (r != NVML_SUCCESS) return Err(r, "creating an NVML event set");
  set_ = set;
  generation_ = token.generation();
  return OkStatus();
}

StatusOr<NvmlSession::Token> NvmlEventWatch::State::Admit() {
  if (closed_) return FailedPreconditionError("the event set is freed (" + closed_why_ + ")");
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session_->Acquire());
  if (token.generation() != generation_) {
    // Defensive: the close hook normally got here first.
    closed_ = true;
    closed_why_ = "its NVML session was closed";
    set_ = nullptr;
    return FailedPreconditionError("the event set is freed (its NVML session was closed)");
  }
  return token;
}

StatusOr<nvmlDevice_t> NvmlEventWatch::State::Handle(GpuIndex gpu) {
  auto it = gpus_.find(gpu.value());
  if (it != gpus_.end()) return it->second.handle;
  nvmlDevice_t dev = nullptr;
  const nvmlReturn_t r = lib().Call<nvmlDeviceGetHandleByIndex_fn>(S::kDeviceGetHandleByIndexV2,
                                                                   gpu.value(), &dev);
  if (r == NVML_ERROR_INVALID_ARGUMENT) return NotFoundError("no " + GpuText(gpu));
  if (r != NVML_SUCCESS) return Err(r, "getting the handle of " + GpuText(gpu));
  return dev;
}

nvmlReturn_t NvmlEventWatch::State::RegisterTypes(nvmlEventSet_t set, nvmlDevice_t dev,
                                                  unsigned long long types,
                                                  unsigned long long* registered) {
  *registered = 0;
  if (types == 0) return NVML_SUCCESS;
  nvmlReturn_t r =
      lib().Call<nvmlDeviceRegisterEvents_fn>(S::kDeviceRegisterEvents, dev, types, set);
  if (r == NVML_SUCCESS) *registered = types;
  if (r != NVML_ERROR_NOT_SUPPORTED) return r;
  // NOT_SUPPORTED registered none of them; perhaps some one by one.
  for (unsigned long long bit = 1; bit != 0 && bit <= types; bit <<= 1) {
    if ((types & bit) == 0) continue;
    r = lib().Call<nvmlDeviceRegisterEvents_fn>(S::kDeviceRegisterEvents, dev, bit, set);
    if (r == NVML_SUCCESS) {
      *registered |= bit;
    } else if (r != NVML_ERROR_NOT_SUPPORTED) {
      return r;
    }
  }
  return NVML_SUCCESS;
}

StatusOr<GpuEventKinds> NvmlEventWatch::State::Register(GpuIndex gpu, GpuEventKinds wanted) {
  MutexLock lock(&mu_);
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, Admit());
  MIGD_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  const std::string what = GpuText(gpu);
  unsigned long long supported = 0;
  const nvmlReturn_t r = lib().Call<nvmlDeviceGetSupportedEventTypes_fn>(
      S::kDeviceGetSupportedEventTypes, dev, &supported);
  if (r != NVML_SUCCESS) return Err(r, "reading the supported event types of " + what);
  Gpu& entry = gpus_[gpu.value()];
  const Gpu before = entry;
  entry.handle = dev;
  entry.wanted.xid |= wanted.xid;
  entry.wanted.mig_config_change |= wanted.mig_config_change;
  entry.wanted.gpu_lost |= wanted.gpu_lost;
  const unsigned long long fresh = TypesOf(wanted) & kWatchedTypes & supported & ~entry.types;
  unsigned long long got = 0;
  const nvmlReturn_t reg = RegisterTypes(set_, dev, fresh, &got);
  if (reg != NVML_SUCCESS) {
    if (before.handle == nullptr) {
      gpus_.erase(gpu.value());
    } else {
      entry = before;
    }
    // "If function reports NVML_ERROR_UNKNOWN, event set is in undefined
    // state and should be freed."
    if (reg == NVML_ERROR_UNKNOWN) Remake().IgnoreError();
    return Err(reg, "registering events of " + what);
  }
  entry.types |= got;
  return KindsOf(entry.types, entry.wanted);
}

std::optional<GpuEvent> NvmlEventWatch::State::Translate(const nvmlEventData_t& data) {
  std::optional<GpuEventKind> kind = KindOfType(data.eventType);
  if (!kind) return std::nullopt;  // a type not asked for
  for (const auto& [index, gpu] : gpus_) {
    if (gpu.handle != data.device) continue;
    GpuEvent e;
    e.gpu = GpuIndex(index);
    e.kind = *kind;
    if (*kind == GpuEventKind::kXid) {
      e.xid = data.eventData;
      if (data.gpuInstanceId != abi::kInvalidInstanceId) e.gi = NvmlGiId(data.gpuInstanceId);
      if (data.computeInstanceId != abi::kInvalidInstanceId) {
        e.ci = NvmlCiId(data.computeInstanceId);
      }
    }
    return e;
  }
  return std::nullopt;  // not a device of this set
}

Status NvmlEventWatch::State::Remake() {
  nvmlEventSet_t fresh = nullptr;
  const nvmlReturn_t r = lib().Call<nvmlEventSetCreate_fn>(S::kEventSetCreate, &fresh);
  if (r != NVML_SUCCESS) return Err(r, "creating an NVML event set");
  for (auto it = gpus_.begin(); it != gpus_.end();) {
    unsigned long long got = 0;
    const nvmlReturn_t reg = RegisterTypes(fresh, it->second.handle, it->second.types, &got);
    if (reg == NVML_SUCCESS) {
      it->second.types = got;
      ++it;
      continue;
    }
    const std::string what = GpuText(GpuIndex(it->first));
    spdlog::warn("NVML events: {} left out of the re-made event set: {}", what,
                 Err(reg, "registering events of " + what).ToString());
    if (reg == NVML_ERROR_GPU_IS_LOST) {
      GpuEvent lost;
      lost.gpu = GpuIndex(it->first);
      lost.kind = GpuEventKind::kGpuLost;
      pending_.push_back(lost);
    }
    it = gpus_.erase(it);
  }
  std::swap(set_, fresh);
  const nvmlReturn_t f = lib().Call<nvmlEventSetFree_fn>(S::kEventSetFree, fresh);
  if (f != NVML_SUCCESS) spdlog::warn("NVML events: {}", Err(f, "freeing the old event set").ToString());
  return OkStatus();
}

Status NvmlEventWatch::State::TraceLostGpus() {
  std::vector<uint32_t> lost;
  for (const auto& [index, gpu] : gpus_) {
    unsigned long long types = 0;
    const nvmlReturn_t r = lib().Call<nvmlDeviceGetSupportedEventTypes_fn>(
        S::kDeviceGetSupportedEventTypes, gpu.handle, &types);
    if (r == NVML_ERROR_GPU_IS_LOST) lost.push_back(index);
  }
  for (uint32_t index : lost) {
    GpuEvent e;
    e.gpu = GpuIndex(index);
    e.kind = GpuEventKind::kGpuLost;
    pending_.push_back(e);
    gpus_.erase(index);
  }
  MIGD_RETURN_IF_ERROR(Remake());
  if (lost.empty()) {
    return Err(NVML_ERROR_GPU_IS_LOST,
               "waiting for events (no registered GPU answers GPU_IS_LOST; the set was re-made)");
  }
  return OkStatus();
}

StatusOr<std::optional<GpuEvent>> NvmlEventWatch::State::Wait(std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  if (!closed_ && !pending_.empty()) {
    GpuEvent e = pending_.front();
    pending_.pop_front();
    return std::optional<GpuEvent>(e);
  }
  MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, Admit());
  // Never 0: nvml.h does not say whether a 0 ms wait returns at once or
  // blocks until an event arrives.
  const auto ms = std::clamp(timeout, std::chrono::milliseconds(1), kMaxWait);
  nvmlEventData_t data{};
  const nvmlReturn_t r = lib().Call<nvmlEventSetWait_fn>(S::kEventSetWaitV2, set_, &data,
                                                         static_cast<unsigned int>(ms.count()));
  if (r == NVML_ERROR_TIMEOUT) return std::optional<GpuEvent>();
  if (r == NVML_ERROR_GPU_IS_LOST) {
    MIGD_RETURN_IF_ERROR(TraceLostGpus());
  } else if (r != NVML_SUCCESS) {
    return Err(r, "waiting for events");
  } else {
    std::optional<GpuEvent> e = Translate(data);
    if (e && e->kind == GpuEventKind::kGpuLost) {
      gpus_.erase(e->gpu.value());
      Remake().IgnoreError();
    }
    return e;
  }
  if (pending_.empty()) return std::optional<GpuEvent>();
  GpuEvent e = pending_.front();
  pending_.pop_front();
  return std::optional<GpuEvent>(e);
}

void NvmlEventWatch::State::Free(const char* why) {
  if (set_ != nullptr) {
    const nvmlReturn_t r = lib().Call<nvmlEventSetFree_fn>(S::kEventSetFree, set_);
    if (r != NVML_SUCCESS) spdlog::warn("NVML events: {}", Err(r, "freeing the event set").ToString());
    set_ = nullptr;
  }
  if (!closed_) {
    closed_ = true;
    closed_why_ = why;
  }
  gpus_.clear();
  pending_.clear();
}

Status NvmlEventWatch::State::Close() {
  MutexLock lock(&mu_);
  if (closed_) return OkStatus();
  StatusOr<NvmlSession::Token> token = Admit();
  if (!token.ok()) {
    // The session is closing (its hook frees the set) or closed (the set
    // died with it): nothing to call.
    closed_ = true;
    closed_why_ = "Close() was called";
    return OkStatus();
  }
  Free("Close() was called");
  return OkStatus();
}

void NvmlEventWatch::State::FreeAtSessionClose() {
  MutexLock lock(&mu_);
  Free("its NVML session was closed");
}

StatusOr<std::unique_ptr<NvmlEventWatch>> NvmlEventWatch::Open(
    std::shared_ptr<NvmlSession> session) {
  if (!HasEventApi(session->library())) {
    return UnimplementedError("the NVML library " + session->library().path() +
                              " lacks the event API (nvmlEventSetCreate, "
                              "nvmlDeviceGetSupportedEventTypes, nvmlDeviceRegisterEvents, "
                              "nvmlEventSetWait_v2, nvmlEventSetFree)");
  }
  auto state = std::make_shared<State>(session);
  MIGD_RETURN_IF_ERROR(state->Create());
  std::unique_ptr<NvmlEventWatch> watch(new NvmlEventWatch(state));
  // Weak: the state holds the session, the session its hooks.
  std::weak_ptr<State> weak = state;
  watch->hook_id_ = session->AddCloseHook([weak]() {
    if (std::shared_ptr<State> s = weak.lock()) s->FreeAtSessionClose();
  });
  return watch;
}

NvmlEventWatch::NvmlEventWatch(std::shared_ptr<State> state) : state_(std::move(state)) {}

NvmlEventWatch::~NvmlEventWatch() {
  Close().IgnoreError();
  // A set still held is the closing session's to free: keep its hook then.
  if (state_->freed()) state_->session().RemoveCloseHook(hook_id_);
}

StatusOr<GpuEventKinds> NvmlEventWatch::Register(GpuIndex gpu, GpuEventKinds wanted) {
  return state_->Register(gpu, wanted);
}

StatusOr<std::optional<GpuEvent>> NvmlEventWatch::Wait(std::chrono::milliseconds timeout) {
  return state_->Wait(timeout);
}

Status NvmlEventWatch::Close() { return state_->Close(); }

}  // namespace migd::driver
