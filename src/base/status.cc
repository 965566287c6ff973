#include "base/status.h"

#include <cstdio>

#include "base/status_macros.h"

namespace migd {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCancelled:
      return "CANCELLED";
    case StatusCode::kUnknown:
      return "UNKNOWN";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kAborted:
      return "ABORTED";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
    case StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
  }
  return "UNKNOWN_CODE";
}

Status::Status(StatusCode code, std::string_view message) {
  if (code != StatusCode::kOk) rep_ = std::make_unique<Rep>(Rep{code, std::string(message)});
}

Status::Status(const Status& other)
    : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
  return *this;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(rep_->code));
  if (!rep_->message.empty()) {
    out += ": ";
    out += rep_->message;
  }
  return out;
}

Status Status::WithContext(std::string_view context) const& {
  Status copy(*this);
  return std::move(copy).WithContext(context);
}

Status Status::WithContext(std::string_view context) && {
  if (rep_ && !context.empty()) {
    std::string msg(context);
    if (!rep_->message.empty()) {
      msg += ": ";
      msg += rep_->message;
    }
    rep_->message = std::move(msg);
  }
  return std::move(*this);
}

std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

Status CancelledError(std::string_view m) { return Status(StatusCode::kCancelled, m); }
Status UnknownError(std::string_view m) { return Status(StatusCode::kUnknown, m); }
Status InvalidArgumentError(std::string_view m) { return Status(StatusCode::kInvalidArgument, m); }
Status DeadlineExceededError(std::string_view m) {
  return Status(StatusCode::kDeadlineExceeded, m);
}
Status NotFoundError(std::string_view m) { return Status(StatusCode::kNotFound, m); }
Status AlreadyExistsError(std::string_view m) { return Status(StatusCode::kAlreadyExists, m); }
Status PermissionDeniedError(std::string_view m) {
  return Status(StatusCode::kPermissionDenied, m);
}
Status ResourceExhaustedError(std::string_view m) {
  return Status(StatusCode::kResourceExhausted, m);
}
Status FailedPreconditionError(std::string_view m) {
  return Status(StatusCode::kFailedPrecondition, m);
}
Status AbortedError(std::string_view m) { return Status(StatusCode::kAborted, m); }
Status OutOfRangeError(std::string_view m) { return Status(StatusCode::kOutOfRange, m); }
Status UnimplementedError(std::string_view m) { return Status(StatusCode::kUnimplemented, m); }
Status InternalError(std::string_view m) { return Status(StatusCode::kInternal, m); }
Status UnavailableError(std::string_view m) { return Status(StatusCode::kUnavailable, m); }
Status DataLossError(std::string_view m) { return Status(StatusCode::kDataLoss, m); }

bool IsNotFound(const Status& s) { return s.code() == StatusCode::kNotFound; }
bool IsInvalidArgument(const Status& s) { return s.code() == StatusCode::kInvalidArgument; }
bool IsUnavailable(const Status& s) { return s.code() == StatusCode::kUnavailable; }
bool IsFailedPrecondition(const Status& s) { return s.code() == StatusCode::kFailedPrecondition; }
bool IsResourceExhausted(const Status& s) { return s.code() == StatusCode::kResourceExhausted; }

namespace internal_status {
void DieOnBadAccess(const Status& s) {
  std::fprintf(stderr, "migd: StatusOr::value() on error: %s\n", s.ToString().c_str());
  std::abort();
}
}  // namespace internal_status

}  // namespace migd

namespace migd::internal_status {
void CheckFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "migd: check failed at %s:%d: %s\n", file, line, cond);
  std::abort();
}
}  // namespace migd::internal_status
