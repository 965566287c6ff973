// File: k8s/dra/engine_health_source.h
//
// EngineHealthSource: the DeviceHealthSource (health.h) the daemon gives the
// DRA plugin, read from the engine's health marks (engine/engine_health.h):
// a GPU the Manager lists as unhealthy, and every instance with a MIG UUID
// the Manager lists as unhealthy, each with its reason. It is also the
// engine listener that tells the plugin's streams when those marks may have
// changed (a health change, an instance event of an unhealthy instance).
//
// Lifecycle: added to the engine's listener fan-out before the Manager
// exists; SetManager() once recovery is done (before it, and after
// SetManager(nullptr), Snapshot() is empty: no verdicts).
//
// Thread-safety: thread-safe. Listeners are called with this object's lock
// held (so RemoveListener returns only once its listener is not running);
// engine callbacks come with the Manager's registry lock held, and Snapshot()
// takes that lock: the two are never nested the other way round.
#ifndef MIGD_K8S_DRA_ENGINE_HEALTH_SOURCE_H_
#define MIGD_K8S_DRA_ENGINE_HEALTH_SOURCE_H_

#include <cstdint>
#include <functional>
#include <map>

#include "base/mutex.h"
#include "engine/events.h"
#include "engine/manager.h"
#include "k8s/dra/health.h"

namespace migd::k8s::dra {

// The verdicts of the Manager's views: unhealthy GPUs and instances (with a
// MIG UUID) only; everything missing is healthy (health.h).
HealthSnapshot HealthFromViews(const std::vector<engine::GpuView>& gpus,
                               const std::vector<engine::InstanceView>& instances);

class EngineHealthSource final : public DeviceHealthSource, public engine::EngineListener {
 public:
  // `manager` (may be null) must outlive the next SetManager.
  void SetManager(const engine::Manager* manager) ABSL_LOCKS_EXCLUDED(mu_);

  HealthSnapshot Snapshot() override ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t AddListener(std::function<void()> on_change) override ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveListener(uint64_t handle) override ABSL_LOCKS_EXCLUDED(mu_);

  void OnInstanceEvent(const engine::InstanceEvent& event) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnAllocation(const engine::AllocationOutcome&) override {}
  void OnReclaim(engine::EventReason, const engine::InstanceView&) override {}
  void OnHealthChange(const engine::HealthChange& change) override ABSL_LOCKS_EXCLUDED(mu_);

  // Change notifications sent to listeners so far (tests).
  uint64_t notifications() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Notify() ABSL_LOCKS_EXCLUDED(mu_);

  mutable Mutex mu_;
  const engine::Manager* manager_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<uint64_t, std::function<void()>> listeners_ ABSL_GUARDED_BY(mu_);
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t notifications_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_ENGINE_HEALTH_SOURCE_H_
