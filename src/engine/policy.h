// File: engine/policy.h
//
// Policy: the Manager's reloadable settings (ManagerPolicy: idle TTL, per-GPU
// idle cap, warm pool, profile allowlist), their validation against the GPUs'
// profile tables, and the allowlist check of a request.
//
// Thread-safety: thread-safe. Its lock is a leaf (taken inside the registry
// lock by Allocate; never held while calling out).
#ifndef MIGD_ENGINE_POLICY_H_
#define MIGD_ENGINE_POLICY_H_

#include <absl/base/thread_annotations.h>

#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "engine/gpu_table.h"
#include "engine/manager_types.h"

namespace migd::engine {

class Policy {
 public:
  explicit Policy(ManagerPolicy initial);
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  // Replaces the policy. kInvalidArgument (nothing changed) for a
  // non-positive TTL, or, when some GPU is managed, a warm-pool or allowlist
  // profile that no managed GPU offers (a GPU managed later is not checked:
  // unknown names plan nothing there).
  Status Set(const ManagerPolicy& policy, const GpuTable& gpus);
  ManagerPolicy Get() const;

  // kPermissionDenied naming the profile and the list when a spec names a
  // profile outside a non-empty allowlist. A spec and the list may name one
  // profile by different aliases (resolved on the managed GPUs the spec may
  // use).
  Status CheckAllowlist(const std::vector<InstanceSpec>& specs, const GpuTable& gpus) const;

 private:
  mutable Mutex mu_;
  ManagerPolicy policy_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_POLICY_H_
