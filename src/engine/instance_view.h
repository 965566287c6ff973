// File: engine/instance_view.h
//
// Value types the Manager hands out about GPUs and instances (copies; no
// lifetime ties to the Manager).
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
#include "mig/placement.h"
#include "store/record.h"

namespace migd::engine {

struct InstanceView {
  InstanceState state = InstanceState::kNone;
  GpuIndex gpu;
  GpuUuid gpu_uuid;
  GiProfileId profile_id;
  std::string profile;
  mig::Placement placement;
  NvmlGiId gi_id;
  NvmlCiId ci_id;
  MigUuid mig_uuid;
  store::Owner owner;
  std::string request_id;
  std::optional<Clock::TimePoint> last_used;
};

// One GPU as found at startup. `model` is null when MIG is not enabled (no
// placement table); otherwise the table built from NVML (slice count,
// profiles, placements).
struct GpuView {
  driver::GpuInfo info;
  const mig::GpuModel* model = nullptr;  // owned by the Manager
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_INSTANCE_VIEW_H_
