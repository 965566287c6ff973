// File: k8s/dra/testing/fake_health_source.h
//
// FakeHealthSource: a DeviceHealthSource (k8s/dra/health.h) whose verdicts a
// test sets; every Set* notifies the listeners synchronously, as the
// contract allows.
//
// Thread-safety: all methods are thread-safe.
#ifndef MIGD_K8S_DRA_TESTING_FAKE_HEALTH_SOURCE_H_
#define MIGD_K8S_DRA_TESTING_FAKE_HEALTH_SOURCE_H_

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "k8s/dra/health.h"

namespace migd::k8s::dra::testing {

class FakeHealthSource final : public DeviceHealthSource {
 public:
  HealthSnapshot Snapshot() override {
    MutexLock l(&mu_);
    ++snapshots_;
    return snapshot_;
  }
  uint64_t AddListener(std::function<void()> on_change) override {
    MutexLock l(&mu_);
    listeners_[++next_] = std::move(on_change);
    return next_;
  }
  // Waits for a notification in progress, so the listener is not called
  // after this returns.
  void RemoveListener(uint64_t handle) override {
    MutexLock n(&notify_mu_);
    MutexLock l(&mu_);
    listeners_.erase(handle);
  }

  void SetGpu(GpuIndex gpu, HealthVerdict v) {
    Change([&](HealthSnapshot& s) { s.gpus[gpu] = std::move(v); });
  }
  void SetInstance(const MigUuid& uuid, HealthVerdict v) {
    Change([&](HealthSnapshot& s) { s.instances[uuid] = std::move(v); });
  }
  void Clear() {
    Change([](HealthSnapshot& s) { s = HealthSnapshot{}; });
  }
  size_t listeners() const {
    MutexLock l(&mu_);
    return listeners_.size();
  }
  int snapshots() const {
    MutexLock l(&mu_);
    return snapshots_;
  }

 private:
  void Change(const std::function<void(HealthSnapshot&)>& fn) {
    MutexLock n(&notify_mu_);  // listeners never call back into the source
    std::vector<std::function<void()>> notify;
    {
      MutexLock l(&mu_);
      fn(snapshot_);
      for (const auto& [id, f] : listeners_) notify.push_back(f);
    }
    for (const auto& f : notify) f();
  }

  Mutex notify_mu_;  // held while listeners run; taken before mu_
  mutable Mutex mu_;
  HealthSnapshot snapshot_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::function<void()>> listeners_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  int snapshots_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace migd::k8s::dra::testing

#endif  // MIGD_K8S_DRA_TESTING_FAKE_HEALTH_SOURCE_H_
