#include "driver/nvml/nvml_session.h"

#include <atomic>
#include <utility>

#include "driver/nvml/nvml_status.h"

namespace migd::driver {
namespace {

// The process-wide "a session is open" flag and generation counter.
std::mutex& ProcessMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
const NvmlSession* g_open_session = nullptr;  // GUARDED_BY(ProcessMutex())
uint64_t g_last_generation = 0;  // GUARDED_BY(ProcessMutex())

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
    std::lock_guard<std::mutex> plock(ProcessMutex());
    if (g_open_session == this) {
      return FailedPreconditionError("NVML session is already open");
    }
    if (g_open_session != nullptr) {
      return FailedPreconditionError(
          "another NVML session is open in this process; only one may be open at a time");
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kClosed) return FailedPreconditionError("NVML session is not closed");
    g_open_session = this;
    state_ = State::kOpening;
    generation = ++g_last_generation;
  }
  NvmlSymbol init = NvmlSymbol::kInitV2;
  library_->FirstBound({NvmlSymbol::kInitV2, NvmlSymbol::kInit}, &init);
  // No lock is held across the NVML call (style.md §2.5).
  const nvmlReturn_t r = library_->Call<nvmlInit_fn>(init);
  std::lock_guard<std::mutex> plock(ProcessMutex());
  std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kOpen) {
    return UnavailableError(state_ == State::kClosing ? "NVML session is closing"
                                                      : "NVML session is not open");
  }
  ++in_flight_;
  return Token(this, generation_);
}

void NvmlSession::ReleaseToken() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--in_flight_ == 0) cv_.notify_all();
}

Status NvmlSession::Close() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (state_ == State::kClosing) {
      cv_.wait(lock, [this] { return state_ != State::kClosing; });
      return OkStatus();
    }
    if (state_ != State::kOpen) return OkStatus();
    state_ = State::kClosing;
    cv_.wait(lock, [this] { return in_flight_ == 0; });
  }
  const nvmlReturn_t r = library_->Call<nvmlShutdown_fn>(NvmlSymbol::kShutdown);
  {
    std::lock_guard<std::mutex> plock(ProcessMutex());
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kClosed;
    if (g_open_session == this) g_open_session = nullptr;
  }
  cv_.notify_all();
  return FromNvml(r, "nvmlShutdown", library_->ErrorString(r));
}

bool NvmlSession::is_open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ == State::kOpen;
}

uint64_t NvmlSession::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

int NvmlSession::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

}  // namespace migd::driver
