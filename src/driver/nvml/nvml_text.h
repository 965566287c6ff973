// File: driver/nvml/nvml_text.h
//
// Small helpers shared by NvmlDriver's sources (internal to driver/nvml/):
// C buffers to strings, the "GPU <n>" of error messages, the retry bound of
// the two-call size protocols.
//
// Thread-safety: pure functions.
#ifndef MIGD_DRIVER_NVML_NVML_TEXT_H_
#define MIGD_DRIVER_NVML_NVML_TEXT_H_

#include <cstddef>
#include <cstring>
#include <string>

#include "base/ids.h"

namespace migd::driver {

// Retries of a query after INSUFFICIENT_SIZE (the list may grow between the
// count and the fill).
inline constexpr int kMaxSizeRetries = 5;

// The NUL-terminated string in `buf` (at most `size` bytes).
inline std::string CStr(const char* buf, size_t size) {
  return std::string(buf, strnlen(buf, size));
}

inline std::string GpuText(GpuIndex gpu) { return "GPU " + std::to_string(gpu.value()); }

}  // namespace migd::driver

#endif  // MIGD_DRIVER_NVML_NVML_TEXT_H_
