// File: k8s/apiserver/node_lock.h
//
// HAMi's node lock, the node annotation hami.io/mutex.lock that HAMi's
// scheduler sets in Bind before it binds a pod and that the device plugin
// releases when the pod's containers are allocated (HAMi
// pkg/util/nodelock/nodelock.go):
//   value   "<time>,<namespace>,<pod name>" (GenerateNodeLockKeyByPod), the
//           time in Go's time.RFC3339 ("2026-11-29T11:00:00+08:00"); older
//           HAMi wrote the bare time (ParseNodeLock accepts both);
//   expiry  NodeLockTimeout, 5 minutes unless HAMI_NODELOCK_EXPIRE (Helm
//           scheduler.nodeLockExpire) says otherwise; LockNode treats a lock
//           with time.Since(lockTime) > NodeLockTimeout as expired and hands
//           the node to the next pod.
// Writing a node annotation needs `nodes` patch rights, which pods do not
// have: the lock is the scheduler's word on which pod is being bound.
//
// Thread-safety: pure functions.
#ifndef MIGD_K8S_APISERVER_NODE_LOCK_H_
#define MIGD_K8S_APISERVER_NODE_LOCK_H_

#include <chrono>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"

namespace migd::k8s {

// HAMi's default NodeLockTimeout (nodelock.go).
inline constexpr std::chrono::minutes kHamiNodeLockExpiry{5};

struct NodeLock {
  Clock::TimePoint taken;
  std::string ns;    // empty in the legacy bare-time form
  std::string name;  // empty in the legacy bare-time form
};

// HAMi's ParseNodeLock: no ',' -> a bare time; else exactly three
// ','-separated parts. kInvalidArgument naming the value otherwise.
StatusOr<NodeLock> ParseNodeLock(std::string_view value);

// "<RFC 3339 UTC>,<ns>,<name>", as GenerateNodeLockKeyByPod writes it.
std::string FormatNodeLock(Clock::TimePoint taken, std::string_view ns, std::string_view name);

// True when HAMi's scheduler would treat the lock as expired:
// now - taken > expiry.
bool NodeLockExpired(const NodeLock& lock, Clock::TimePoint now, Clock::Duration expiry);

// Go's time.Parse(time.RFC3339, s): "YYYY-MM-DDTHH:MM:SS", optional
// fractional seconds, then "Z" or "+hh:mm" / "-hh:mm". kInvalidArgument
// naming the value otherwise.
StatusOr<Clock::TimePoint> ParseRfc3339(std::string_view s);

}  // namespace migd::k8s

#endif  // MIGD_K8S_APISERVER_NODE_LOCK_H_
