// File: base/status_macros.h
//
// Early-return helpers for Status and StatusOr. They never log: an error is
// logged once, where it is finally handled (style.md §2.3).
//
// Example:
//   MIGD_RETURN_IF_ERROR(driver.DestroyCi(gpu, gi, ci));
//   MIGD_ASSIGN_OR_RETURN(auto gis, driver.ListGpuInstances(gpu));
#ifndef MIGD_BASE_STATUS_MACROS_H_
#define MIGD_BASE_STATUS_MACROS_H_

#include "base/status.h"

#define MIGD_STATUS_CONCAT_INNER_(a, b) a##b
#define MIGD_STATUS_CONCAT_(a, b) MIGD_STATUS_CONCAT_INNER_(a, b)

#define MIGD_RETURN_IF_ERROR(expr)                                       \
  do {                                                                   \
    ::migd::Status migd_status_tmp_ = (expr);                            \
    if (!migd_status_tmp_.ok()) return migd_status_tmp_;                 \
  } while (0)

#define MIGD_ASSIGN_OR_RETURN(lhs, expr) \
  MIGD_ASSIGN_OR_RETURN_IMPL_(MIGD_STATUS_CONCAT_(migd_statusor_, __COUNTER__), lhs, expr)

#define MIGD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

// Logs and aborts: only for programmer errors where continuing is unsafe.
#define MIGD_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) ::migd::internal_status::CheckFailed(__FILE__, __LINE__, #cond);     \
  } while (0)

namespace migd::internal_status {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond);
}  // namespace migd::internal_status

#endif  // MIGD_BASE_STATUS_MACROS_H_
