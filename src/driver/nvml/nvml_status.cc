#include "driver/nvml/nvml_status.h"

#include <string>

namespace migd::driver {

std::string_view NvmlReturnName(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "NVML_SUCCESS";
    case NVML_ERROR_UNINITIALIZED: return "NVML_ERROR_UNINITIALIZED";
    case NVML_ERROR_INVALID_ARGUMENT: return "NVML_ERROR_INVALID_ARGUMENT";
    case NVML_ERROR_NOT_SUPPORTED: return "NVML_ERROR_NOT_SUPPORTED";
    case NVML_ERROR_NO_PERMISSION: return "NVML_ERROR_NO_PERMISSION";
    case NVML_ERROR_ALREADY_INITIALIZED: return "NVML_ERROR_ALREADY_INITIALIZED";
    case NVML_ERROR_NOT_FOUND: return "NVML_ERROR_NOT_FOUND";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "NVML_ERROR_INSUFFICIENT_SIZE";
    case NVML_ERROR_INSUFFICIENT_POWER: return "NVML_ERROR_INSUFFICIENT_POWER";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "NVML_ERROR_DRIVER_NOT_LOADED";
    case NVML_ERROR_TIMEOUT: return "NVML_ERROR_TIMEOUT";
    case NVML_ERROR_IRQ_ISSUE: return "NVML_ERROR_IRQ_ISSUE";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case NVML_ERROR_CORRUPTED_INFOROM: return "NVML_ERROR_CORRUPTED_INFOROM";
    case NVML_ERROR_GPU_IS_LOST: return "NVML_ERROR_GPU_IS_LOST";
    case NVML_ERROR_RESET_REQUIRED: return "NVML_ERROR_RESET_REQUIRED";
    case NVML_ERROR_OPERATING_SYSTEM: return "NVML_ERROR_OPERATING_SYSTEM";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case NVML_ERROR_IN_USE: return "NVML_ERROR_IN_USE";
    case NVML_ERROR_MEMORY: return "NVML_ERROR_MEMORY";
    case NVML_ERROR_NO_DATA: return "NVML_ERROR_NO_DATA";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "NVML_ERROR_INSUFFICIENT_RESOURCES";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "NVML_ERROR_FREQ_NOT_SUPPORTED";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
    case NVML_ERROR_DEPRECATED: return "NVML_ERROR_DEPRECATED";
    case NVML_ERROR_NOT_READY: return "NVML_ERROR_NOT_READY";
    case NVML_ERROR_GPU_NOT_FOUND: return "NVML_ERROR_GPU_NOT_FOUND";
    case NVML_ERROR_INVALID_STATE: return "NVML_ERROR_INVALID_STATE";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED";
    case NVML_ERROR_UNKNOWN: return "NVML_ERROR_UNKNOWN";
  }
  return "NVML_ERROR_UNKNOWN";
}

bool IsKnownNvmlReturn(nvmlReturn_t r) {
  const int v = static_cast<int>(r);
  return (v >= 0 && v <= static_cast<int>(NVML_ERROR_RESET_TYPE_NOT_SUPPORTED)) ||
         r == NVML_ERROR_UNKNOWN;
}

StatusCode NvmlReturnToCode(nvmlReturn_t r) {
  if (!IsKnownNvmlReturn(r)) return StatusCode::kUnknown;
  switch (r) {
    case NVML_SUCCESS:
      return StatusCode::kOk;
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return StatusCode::kResourceExhausted;
    case NVML_ERROR_INVALID_ARGUMENT:
      return StatusCode::kInvalidArgument;
    case NVML_ERROR_NOT_FOUND:
      return StatusCode::kNotFound;
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

Status FromNvml(nvmlReturn_t r, std::string_view what, const char* error_string) {
  if (r == NVML_SUCCESS) return OkStatus();
  std::string msg(what);
  if (!msg.empty()) msg += ": ";
  msg += NvmlReturnName(r);
  std::string detail = error_string != nullptr ? std::string(error_string) : std::string();
  if (!IsKnownNvmlReturn(r)) {
    if (!detail.empty()) detail += "; ";
    detail += "value " + std::to_string(static_cast<int>(r));
  }
  if (!detail.empty()) msg += " (" + detail + ")";
  return Status(NvmlReturnToCode(r), msg);
}

}  // namespace migd::driver
