// File: engine/instance_view.h
//
// Value types the Manager hands out about GPUs and instances (copies; no
// lifetime ties to the Manager). An InstanceView is the instance's identity
// (store::InstanceIdentity: GPU UUID, profile id, placement, GI id, CI id,
// MIG UUID) plus its state, owner and use.
//
// Thread-safety: plain values.
#ifndef MIGD_ENGINE_INSTANCE_VIEW_H_
#define MIGD_ENGINE_INSTANCE_VIEW_H_

#include <optional>
#include <string>

#include "base/clock.h"
#include "base/ids.h"
#include "driver/gpu_driver.h"
#include "engine/instance_state.h"
#include "mig/catalog.h"
#include "store/instance_identity.h"
#include "store/record.h"

namespace migd::engine {

// gi_id, ci_id and mig_uuid are 0 / empty while the instance is Creating.
struct InstanceView : store::InstanceIdentity {
  InstanceState state = InstanceState::kNone;
  GpuIndex gpu;
  std::string profile;  // canonical profile name
  store::Owner owner;
  std::string request_id;
  std::optional<Clock::TimePoint> last_used;
  // Marked by the health monitor (engine/engine_health.h): never reused.
  bool unhealthy = false;
  std::string health_reason;  // why; empty when healthy
};

// One GPU as found at startup. `model` is null when MIG is not enabled (no
// placement table); otherwise the table built from NVML (slice count,
// profiles, placements).
struct GpuView {
  driver::GpuInfo info;
  const mig::GpuModel* model = nullptr;  // owned by the Manager
  // Marked by the health monitor: no new allocation on this GPU.
  bool unhealthy = false;
  std::string health_reason;  // why; empty when healthy
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_INSTANCE_VIEW_H_
