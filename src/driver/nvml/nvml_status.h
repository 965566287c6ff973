// File: driver/nvml/nvml_status.h
//
// The one mapping from NVML return codes to migd::Status (style.md §2.3).
// Every NVML failure anywhere in driver/nvml/ goes through FromNvml, so the
// message always keeps NVML's own error name:
//   "<what>: NVML_ERROR_<NAME> (<nvmlErrorString text>)"
// e.g. "creating GI profile 9 at 4:4 on GPU 0: NVML_ERROR_INSUFFICIENT_RESOURCES
// (Insufficient Resources)".
//
// Code table (abseil's retry rule applied to NVML):
//   NVML_SUCCESS                          kOk
//   INSUFFICIENT_RESOURCES                kResourceExhausted   no free placement/capacity
//   INVALID_ARGUMENT                      kInvalidArgument     placement not listed, bad id
//   NOT_FOUND                             kNotFound            no such GI/CI/device
//   NOT_SUPPORTED                         kFailedPrecondition  MIG disabled, profile absent
//   NO_PERMISSION                         kPermissionDenied    no root / mig/config
//   IN_USE                                kFailedPrecondition  processes or CIs attached
//   UNINITIALIZED, DRIVER_NOT_LOADED,
//   LIBRARY_NOT_FOUND, FUNCTION_NOT_FOUND,
//   TIMEOUT                               kUnavailable         retry the call later
//   GPU_IS_LOST, RESET_REQUIRED           kFailedPrecondition  needs operator action
//   UNKNOWN                               kUnknown
//   any other known code                  kInternal
//   a value NVML does not define          kUnknown, logged numerically in the
//                                         message ("NVML_ERROR_UNKNOWN (value 1234)")
//
// Example:
//   nvmlReturn_t r = fns.create_gi(dev, id, &placement, &gi);
//   if (r != NVML_SUCCESS) return FromNvml(r, "creating GI", lib.ErrorString(r));
//
// Thread-safety: pure functions.
#ifndef MIGD_DRIVER_NVML_NVML_STATUS_H_
#define MIGD_DRIVER_NVML_NVML_STATUS_H_

#include <string_view>

#include "base/status.h"
#include "driver/nvml/nvml_abi.h"

namespace migd::driver {

// "NVML_SUCCESS", "NVML_ERROR_IN_USE", ...; "NVML_ERROR_UNKNOWN" for values
// NVML does not define (see IsKnownNvmlReturn).
std::string_view NvmlReturnName(nvmlReturn_t r);

// True if `r` is one of the values of nvml.md §5.1.
bool IsKnownNvmlReturn(nvmlReturn_t r);

// The StatusCode of the table above.
StatusCode NvmlReturnToCode(nvmlReturn_t r);

// Converts an NVML result into a Status. OK for NVML_SUCCESS. Otherwise the
// message is "<what>: <NvmlReturnName(r)> (<error_string>)"; the parenthesis
// is omitted when `error_string` is null or empty. For an undefined value the
// name is NVML_ERROR_UNKNOWN and "value <n>" is added to the parenthesis.
// `error_string` is typically nvmlErrorString(r); it is copied.
Status FromNvml(nvmlReturn_t r, std::string_view what, const char* error_string = nullptr);

}  // namespace migd::driver

#endif  // MIGD_DRIVER_NVML_NVML_STATUS_H_
