// File: sim/sim_status.h
//
// SimStatus: the result of an operation on the simulated hardware, i.e. the
// NVML return code the real driver would give plus a human message saying
// why. The C ABI layer returns code(); FakeGpuDriver converts with ToStatus()
// so its errors look like NvmlDriver's ("...: NVML_ERROR_IN_USE (In use by
// another client)").
//
// Example:
//   SimOr<SimGi> gi = machine.CreateGi(0, 9, mig::Placement{4, 4});
//   if (!gi.ok()) return gi.status().code();  // e.g. NVML_ERROR_INSUFFICIENT_RESOURCES
//
// Thread-safety: value types.
#ifndef MIGD_SIM_SIM_STATUS_H_
#define MIGD_SIM_SIM_STATUS_H_

#include <optional>
#include <string>
#include <utility>

#include "base/status.h"
#include "driver/nvml/nvml_abi.h"

namespace migd::sim {

class SimStatus {
 public:
  // NVML_SUCCESS.
  SimStatus() = default;
  // REQUIRES: code != NVML_SUCCESS.
  SimStatus(nvmlReturn_t code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == NVML_SUCCESS; }
  nvmlReturn_t code() const { return code_; }
  const std::string& message() const { return message_; }

  // "NVML_ERROR_IN_USE (In use by another client): <message>"; "SUCCESS" if ok.
  std::string ToString() const;

  // The migd::Status of the same failure (NvmlResultToCode), with
  // ToString() as its message.
  Status ToStatus() const;

 private:
  nvmlReturn_t code_ = NVML_SUCCESS;
  std::string message_;
};

// The StatusCode migd uses for an NVML result: driver::NvmlReturnToCode, the
// one mapping of NVML's error space (driver/nvml/nvml_status.h).
StatusCode NvmlResultToCode(nvmlReturn_t result);

// A value or a failed SimStatus (never SUCCESS without a value).
template <typename T>
class SimOr {
 public:
  // NOLINTNEXTLINE(google-explicit-constructor)
  SimOr(SimStatus status) : status_(std::move(status)) {
    if (status_.ok()) status_ = SimStatus(NVML_ERROR_UNKNOWN, "SimOr built from SUCCESS");
  }
  // NOLINTNEXTLINE(google-explicit-constructor)
  SimOr(T value) : value_(std::move(value)) {}

  bool ok() const { return value_.has_value(); }
  const SimStatus& status() const { return status_; }
  nvmlReturn_t code() const { return status_.code(); }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  SimStatus status_;
  std::optional<T> value_;
};

}  // namespace migd::sim

#endif  // MIGD_SIM_SIM_STATUS_H_
