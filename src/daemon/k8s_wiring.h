// File: daemon/k8s_wiring.h
//
// Two adapters the daemon puts between its Kubernetes pieces (daemon.cc):
//
// FailClosedOwnerSource wraps recovery's owner source and turns any of its
// errors into kFailedPrecondition with a hint: an owner source that cannot
// answer (kubelet or the API server unreachable, inconsistent data) must
// fail startup closed (exit 3, nothing touched), not read as an NVML problem
// (the daemon maps kUnavailable from recovery to exit 2).
//
// DeferredBackend is the device plugin's AllocationBackend before recovery
// has finished: the plugin serves and registers with kubelet first
// (so that kubelet sees the plugin again before any slow work),
// advertising nothing and refusing Allocate with
// kUnavailable (kubelet retries the pod) until Set() hands it the real
// backend; from then on every call is forwarded and the backend's
// devices-changed notifications reach the plugin.
//
// HealthForwarder is the engine listener (added to the fan-out before the
// Manager exists) that hands health changes to the HAMi backend once it
// exists, so that the device plugin re-sends its list at once.
//
// Thread-safety: FailClosedOwnerSource as its inner source (recovery calls
// it once). DeferredBackend is thread-safe; Set is called once.
// HealthForwarder is thread-safe; Set(nullptr) before the backend goes.
#ifndef MIGD_DAEMON_K8S_WIRING_H_
#define MIGD_DAEMON_K8S_WIRING_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "engine/events.h"
#include "engine/owner_source.h"
#include "k8s/allocation_backend.h"
#include "k8s/apiserver/hami_backend.h"

namespace migd::daemon {

class FailClosedOwnerSource final : public engine::OwnerSource {
 public:
  explicit FailClosedOwnerSource(std::unique_ptr<engine::OwnerSource> inner)
      : inner_(std::move(inner)) {}
  std::string_view name() const override { return inner_->name(); }
  StatusOr<std::vector<engine::OwnedInstance>> ActiveOwners(
      const std::vector<store::Record>& records) override;

 private:
  std::unique_ptr<engine::OwnerSource> inner_;
};

class DeferredBackend final : public k8s::AllocationBackend {
 public:
  // `backend` must outlive this object.
  void Set(k8s::AllocationBackend* backend) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<k8s::AdvertisedDevice> Devices() override;
  StatusOr<k8s::ContainerAllocation> AllocateContainer(
      const std::vector<std::string>& device_ids) override;
  StatusOr<std::vector<std::string>> PreferredAllocation(
      const std::vector<std::string>& available, const std::vector<std::string>& must_include,
      int size) override;

 private:
  k8s::AllocationBackend* Get() ABSL_LOCKS_EXCLUDED(mu_);
  Mutex mu_;
  k8s::AllocationBackend* backend_ ABSL_GUARDED_BY(mu_) = nullptr;
};

class HealthForwarder final : public engine::EngineListener {
 public:
  // `backend` (may be null) must outlive the next Set.
  void Set(k8s::HamiBackend* backend) ABSL_LOCKS_EXCLUDED(mu_);
  void OnInstanceEvent(const engine::InstanceEvent&) override {}
  void OnAllocation(const engine::AllocationOutcome&) override {}
  void OnReclaim(engine::EventReason, const engine::InstanceView&) override {}
  void OnHealthChange(const engine::HealthChange& change) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Mutex mu_;
  k8s::HamiBackend* backend_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_K8S_WIRING_H_
