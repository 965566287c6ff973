#include "daemon/k8s_wiring.h"

namespace migd::daemon {

StatusOr<std::vector<engine::OwnedInstance>> FailClosedOwnerSource::ActiveOwners(
    const std::vector<store::Record>& records) {
  StatusOr<std::vector<engine::OwnedInstance>> owned = inner_->ActiveOwners(records);
  if (owned.ok()) return owned;
  return FailedPreconditionError(
      std::string(owned.status().message()) +
      " (recovery.ownerSource: " + std::string(inner_->name()) +
      " could not say which instances are in use, so none were touched; fix the source and "
      "restart, or set recovery.ownerSource: records to trust migd's own records)");
}

void DeferredBackend::Set(k8s::AllocationBackend* backend) {
  backend->SetDevicesChangedCallback([this] { NotifyDevicesChanged(); });
  {
    MutexLock lock(&mu_);
    backend_ = backend;
  }
  NotifyDevicesChanged();  // the plugin sends the real list now
}

void HealthForwarder::Set(k8s::HamiBackend* backend) {
  MutexLock lock(&mu_);
  backend_ = backend;
}

void HealthForwarder::OnHealthChange(const engine::HealthChange& change) {
  MutexLock lock(&mu_);
  if (backend_ != nullptr) backend_->OnHealthChange(change);
}

k8s::AllocationBackend* DeferredBackend::Get() {
  MutexLock lock(&mu_);
  return backend_;
}

std::vector<k8s::AdvertisedDevice> DeferredBackend::Devices() {
  k8s::AllocationBackend* b = Get();
  return b != nullptr ? b->Devices() : std::vector<k8s::AdvertisedDevice>{};
}

StatusOr<k8s::ContainerAllocation> DeferredBackend::AllocateContainer(
    const std::vector<std::string>& device_ids) {
  k8s::AllocationBackend* b = Get();
  if (b == nullptr) {
    return UnavailableError(
        "migd is still recovering its MIG state after a restart; kubelet retries the pod");
  }
  return b->AllocateContainer(device_ids);
}

StatusOr<std::vector<std::string>> DeferredBackend::PreferredAllocation(
    const std::vector<std::string>& available, const std::vector<std::string>& must_include,
    int size) {
  k8s::AllocationBackend* b = Get();
  if (b == nullptr) return AllocationBackend::PreferredAllocation(available, must_include, size);
  return b->PreferredAllocation(available, must_include, size);
}

}  // namespace migd::daemon
