#include "driver/nvml/nvml_session.h"

#include <atomic>
#include <utility>
#include <vector>

#include "driver/nvml/nvml_status.h"

namespace migd::driver {
namespace {

// The process-wide "a session is open" flag and generation counter.
ABSL_CONST_INIT Mutex g_process_mu;
const NvmlSession* g_open_session ABSL_GUARDED_BY(g_process_mu) = nullptr;
uint64_t g_last_generation ABSL_GUARDED_BY(g_process_mu) = 0;

}  // namespace

NvmlSession::Token::Token(Token&& other) noexcept
    : session_(std::exchange(other.session_, nullptr)),
      generation_(std::exchange(other.generation_, 0)) {}

NvmlSession::Token& NvmlSession::Token::operator=(Token&& other) noexcept {
  if (this != &other) {
    Release();
    session_ = std::exchange(other.session_, nullptr);
    generation_ = std::exchange(other.generation_, 0);
  }
  return *this;
}

NvmlSession::Token::~Token() { Release(); }

void NvmlSession::Token::Release() {
  if (session_ != nullptr) std::exchange(session_, nullptr)->ReleaseToken();
}

NvmlSession::NvmlSession(std::shared_ptr<NvmlLibrary> library) : library_(std::move(library)) {}

NvmlSession::~NvmlSession() { Close().IgnoreError(); }

Status NvmlSession::Open() {
  uint64_t generation = 0;
  {
    MutexLock plock(&g_process_mu);
    if (g_open_session == this) {
      return FailedPreconditionError("NVML session is already open");
    }
    if (g_open_session != nullptr) {
      return FailedPreconditionError(
          "another NVML session is open in this process; only one may be open at a time");
    }
    MutexLock lock(&mu_);
    if (state_ != State::kClosed) return FailedPreconditionError("NVML session is not closed");
    g_open_session = this;
    state_ = State::kOpening;
    generation = ++g_last_generation;
  }
  NvmlSymbol init = NvmlSymbol::kInitV2;
  library_->FirstBound({NvmlSymbol::kInitV2, NvmlSymbol::kInit}, &init);
  // No lock is held across the NVML call (style.md §2.5).
  const nvmlReturn_t r = library_->Call<nvmlInit_fn>(init);
  MutexLock plock(&g_process_mu);
  MutexLock lock(&mu_);
  if (r != NVML_SUCCESS) {
    state_ = State::kClosed;
    g_open_session = nullptr;
    return FromNvml(r, std::string(NvmlSymbolName(init)) + " of " + library_->path(),
                    library_->ErrorString(r));
  }
  generation_ = generation;
  state_ = State::kOpen;
  return OkStatus();
}

StatusOr<NvmlSession::Token> NvmlSession::Acquire() {
  MutexLock lock(&mu_);
  if (state_ != State::kOpen) {
    return UnavailableError(state_ == State::kClosing ? "NVML session is closing"
                                                      : "NVML session is not open");
  }
  ++in_flight_;
  return Token(this, generation_);
}

void NvmlSession::ReleaseToken() {
  MutexLock lock(&mu_);
  if (--in_flight_ == 0) cv_.SignalAll();
}

Status NvmlSession::Close() {
  std::vector<std::function<void()>> hooks;
  {
    MutexLock lock(&mu_);
    if (state_ == State::kClosing) {
      cv_.Wait(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return state_ != State::kClosing;
      });
      return OkStatus();
    }
    if (state_ != State::kOpen) return OkStatus();
    state_ = State::kClosing;
    cv_.Wait(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; });
    hooks.reserve(close_hooks_.size());
    for (const auto& [id, hook] : close_hooks_) hooks.push_back(hook);
  }
  for (const std::function<void()>& hook : hooks) hook();
  const nvmlReturn_t r = library_->Call<nvmlShutdown_fn>(NvmlSymbol::kShutdown);
  {
    MutexLock plock(&g_process_mu);
    MutexLock lock(&mu_);
    state_ = State::kClosed;
    if (g_open_session == this) g_open_session = nullptr;
  }
  cv_.SignalAll();
  return FromNvml(r, "nvmlShutdown", library_->ErrorString(r));
}

uint64_t NvmlSession::AddCloseHook(std::function<void()> hook) {
  MutexLock lock(&mu_);
  const uint64_t id = next_hook_id_++;
  close_hooks_.emplace(id, std::move(hook));
  return id;
}

void NvmlSession::RemoveCloseHook(uint64_t id) {
  MutexLock lock(&mu_);
  close_hooks_.erase(id);
}

bool NvmlSession::is_open() const {
  MutexLock lock(&mu_);
  return state_ == State::kOpen;
}

uint64_t NvmlSession::generation() const {
  MutexLock lock(&mu_);
  return generation_;
}

int NvmlSession::in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace migd::driver
