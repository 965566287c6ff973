#include "sim/sim_status.h"

#include "sim/nvml_names.h"

namespace migd::sim {

std::string SimStatus::ToString() const {
  if (ok()) return "SUCCESS";
  std::string out = "NVML_" + NvmlResultName(code_) + " (" + NvmlErrorText(code_) + ")";
  if (!message_.empty()) out += ": " + message_;
  return out;
}

StatusCode NvmlResultToCode(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return StatusCode::kOk;
    case NVML_ERROR_INVALID_ARGUMENT:
      return StatusCode::kInvalidArgument;
    case NVML_ERROR_NOT_FOUND:
      return StatusCode::kNotFound;
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return StatusCode::kResourceExhausted;
    case NVML_ERROR_NO_PERMISSION:
      return StatusCode::kPermissionDenied;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_IN_USE:
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_RESET_REQUIRED:
      return StatusCode::kFailedPrecondition;
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_TIMEOUT:
      return StatusCode::kUnavailable;
    case NVML_ERROR_UNKNOWN:
      return StatusCode::kUnknown;
    default:
      return StatusCode::kInternal;
  }
}

Status SimStatus::ToStatus() const {
  if (ok()) return OkStatus();
  return Status(NvmlResultToCode(code_), ToString());
}

}  // namespace migd::sim
