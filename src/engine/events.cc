#include "engine/events.h"

namespace migd::engine {

std::string_view EventReasonName(EventReason reason) {
  switch (reason) {
    case EventReason::kAllocate:
      return "allocate";
    case EventReason::kRelease:
      return "release";
    case EventReason::kReclaimPressure:
      return "reclaim-pressure";
    case EventReason::kReclaimTtl:
      return "reclaim-ttl";
    case EventReason::kReclaimCap:
      return "reclaim-cap";
    case EventReason::kReclaimOperator:
      return "reclaim-operator";
    case EventReason::kRollback:
      return "rollback";
    case EventReason::kDestroy:
      return "destroy";
    case EventReason::kDestroyFailed:
      return "destroy-failed";
    case EventReason::kErrorRetry:
      return "error-retry";
    case EventReason::kDrift:
      return "drift";
    case EventReason::kWarmPool:
      return "warm-pool";
    case EventReason::kUnhealthy: return "unhealthy";
    case EventReason::kMarkedUnhealthy: return "marked-unhealthy";
    case EventReason::kHealthCleared: return "health-cleared";
    case EventReason::kRecovery:
      return "recovery";
  }
  return "unknown";
}

std::string_view AllocationPathName(AllocationPath path) {
  switch (path) {
    case AllocationPath::kNone:
      return "none";
    case AllocationPath::kReuse:
      return "reuse";
    case AllocationPath::kCreate:
      return "create";
    case AllocationPath::kReclaimCreate:
      return "reclaim_create";
  }
  return "unknown";
}

}  // namespace migd::engine
