// File: base/status.h
//
// Status and StatusOr: the error-return types of every migd module. Codes carry
// the same numeric values as grpc::StatusCode (and absl::StatusCode), so the
// gRPC boundary converts with a cast.
//
// Choosing a code (abseil's rule, applied to migd):
//   kUnavailable        retry the same call later (NVML not loaded, socket absent)
//   kAborted            retry at a higher level (layout changed underneath)
//   kFailedPrecondition do not retry until the system is fixed (MIG disabled)
//   kResourceExhausted  no free placement or capacity
//   kInvalidArgument    bad request or configuration
//   kDataLoss           corrupt record or state file
//   kInternal           a broken invariant
//
// Example:
//   migd::StatusOr<int> ParsePort(std::string_view s);
//   MIGD_ASSIGN_OR_RETURN(int port, ParsePort(text));
//
// Thread-safety: Status and StatusOr are value types; distinct objects may be
// used from different threads without synchronisation.
#ifndef MIGD_BASE_STATUS_H_
#define MIGD_BASE_STATUS_H_

#include <cstdlib>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace migd {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// Returns the canonical upper-case name, e.g. "INVALID_ARGUMENT".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // An OK status. Holds no allocation.
  Status() = default;
  // REQUIRES: code != kOk (an OK status with a message is a programming error;
  // the message is dropped).
  Status(StatusCode code, std::string_view message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message without the code name; empty for OK.
  std::string_view message() const {
    return rep_ ? std::string_view(rep_->message) : std::string_view();
  }
  // "OK" or "<CODE_NAME>: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <old message>". OK stays OK.
  Status WithContext(std::string_view context) const&;
  Status WithContext(std::string_view context) &&;

  // Marks a status as deliberately ignored.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

std::ostream& operator<<(std::ostream& os, const Status& s);

inline Status OkStatus() { return Status(); }
Status CancelledError(std::string_view message);
Status UnknownError(std::string_view message);
Status InvalidArgumentError(std::string_view message);
Status DeadlineExceededError(std::string_view message);
Status NotFoundError(std::string_view message);
Status AlreadyExistsError(std::string_view message);
Status PermissionDeniedError(std::string_view message);
Status ResourceExhaustedError(std::string_view message);
Status FailedPreconditionError(std::string_view message);
Status AbortedError(std::string_view message);
Status OutOfRangeError(std::string_view message);
Status UnimplementedError(std::string_view message);
Status InternalError(std::string_view message);
Status UnavailableError(std::string_view message);
Status DataLossError(std::string_view message);

bool IsNotFound(const Status& s);
bool IsInvalidArgument(const Status& s);
bool IsUnavailable(const Status& s);
bool IsFailedPrecondition(const Status& s);
bool IsResourceExhausted(const Status& s);

namespace internal_status {
[[noreturn]] void DieOnBadAccess(const Status& s);
}  // namespace internal_status

// Holds either a T or a non-OK Status. Never OK without a value: constructing
// from an OK Status yields kInternal.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // NOLINTNEXTLINE(google-explicit-constructor): implicit like absl::StatusOr.
  StatusOr(const Status& status) : status_(status) { CheckNotOk(); }
  // NOLINTNEXTLINE(google-explicit-constructor)
  StatusOr(Status&& status) : status_(std::move(status)) { CheckNotOk(); }
  // NOLINTNEXTLINE(google-explicit-constructor)
  StatusOr(const T& value) : value_(value) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  StatusOr(T&& value) : value_(std::move(value)) {}
  template <typename U,
            typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                        !std::is_same_v<std::decay_t<U>, T> &&
                                        !std::is_same_v<std::decay_t<U>, Status> &&
                                        !std::is_same_v<std::decay_t<U>, StatusOr<T>>>>
  // NOLINTNEXTLINE(google-explicit-constructor)
  StatusOr(U&& value) : value_(T(std::forward<U>(value))) {}

  bool ok() const { return value_.has_value(); }
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  const T& value() const& {
    if (!ok()) internal_status::DieOnBadAccess(status_);
    return *value_;
  }
  T& value() & {
    if (!ok()) internal_status::DieOnBadAccess(status_);
    return *value_;
  }
  T&& value() && {
    if (!ok()) internal_status::DieOnBadAccess(status_);
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  template <typename U>
  T value_or(U&& fallback) const& {
    return ok() ? *value_ : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  void CheckNotOk() {
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "StatusOr built from OK status");
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace migd

#endif  // MIGD_BASE_STATUS_H_
