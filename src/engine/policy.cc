#include "engine/policy.h"

#include <string>
#include <utility>

#include "absl/strings/str_join.h"

namespace migd::engine {
namespace {

// The profile `name` resolves to on `model` (canonical name), or "".
std::string Canonical(const mig::GpuModel& model, const std::string& name) {
  const mig::GiProfile* p = model.FindProfileByName(name);
  return p == nullptr ? std::string() : p->name;
}

bool Offered(const GpuTable& gpus, const std::string& name) {
  for (uint32_t g : gpus.ManagedIndices()) {
    if (gpus.Model(g)->FindProfileByName(name) != nullptr) return true;
  }
  return false;
}

bool Allowed(const std::set<std::string>& allowlist, const InstanceSpec& spec,
             const GpuTable& gpus) {
  if (allowlist.count(spec.profile) != 0) return true;
  // Aliases: the request and the list may name the same profile differently.
  for (uint32_t g : gpus.ManagedIndices()) {
    if (spec.gpu && g != spec.gpu->value()) continue;
    const mig::GpuModel& model = *gpus.Model(g);
    const std::string want = Canonical(model, spec.profile);
    if (want.empty()) continue;
    for (const std::string& a : allowlist) {
      if (Canonical(model, a) == want) return true;
    }
  }
  return false;
}

}  // namespace

Policy::Policy(ManagerPolicy initial) : policy_(std::move(initial)) {}

Status Policy::Set(const ManagerPolicy& policy, const GpuTable& gpus) {
  if (policy.idle_ttl && *policy.idle_ttl <= Clock::Duration::zero()) {
    return InvalidArgumentError("lifecycle.idleTTL must be positive (or unset)");
  }
  // Without a managed GPU there is nothing to check the names against.
  if (gpus.AnyManaged()) {
    for (const auto& [name, n] : policy.warm_pool) {
      if (!Offered(gpus, name)) {
        return InvalidArgumentError("lifecycle.warmPool: profile " + name +
                                    " is not offered by any MIG GPU of this node");
      }
    }
    for (const std::string& name : policy.profile_allowlist) {
      if (!Offered(gpus, name)) {
        return InvalidArgumentError("migProfileAllowlist: profile " + name +
                                    " is not offered by any MIG GPU of this node");
      }
    }
  }
  MutexLock lock(&mu_);
  policy_ = policy;
  return OkStatus();
}

ManagerPolicy Policy::Get() const {
  MutexLock lock(&mu_);
  return policy_;
}

Status Policy::CheckAllowlist(const std::vector<InstanceSpec>& specs, const GpuTable& gpus) const {
  MutexLock lock(&mu_);
  if (policy_.profile_allowlist.empty()) return OkStatus();
  for (const InstanceSpec& spec : specs) {
    if (Allowed(policy_.profile_allowlist, spec, gpus)) continue;
    return PermissionDeniedError("profile " + spec.profile + " is not in migProfileAllowlist (" +
                                 absl::StrJoin(policy_.profile_allowlist, ", ") +
                                 "); ask the node's operator to add it to the config");
  }
  return OkStatus();
}

}  // namespace migd::engine
