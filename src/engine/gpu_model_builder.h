// File: engine/gpu_model_builder.h
//
// Builds the planner's placement table of one GPU (a mig::GpuModel) from what
// NVML reports at startup (GpuDriver::GetGiProfiles): profiles, placements,
// instance counts, engines. The catalogue is not consulted: on a real GPU
// NVML is the only source of truth (mig/catalog.h).
//
// Thread-safety: pure function.
#ifndef MIGD_ENGINE_GPU_MODEL_BUILDER_H_
#define MIGD_ENGINE_GPU_MODEL_BUILDER_H_

#include <vector>

#include "base/status.h"
#include "driver/gpu_driver.h"
#include "mig/catalog.h"

namespace migd::engine {

// The GpuModel of `gpu` from its NVML GI profiles. Engine totals are the
// element-wise maximum over the profiles (the full-GPU profile carries every
// engine). A profile without a name (v1/v2 structs) is named
// "<slices>g.<memory GiB>gb". kInvalidArgument if no profile has placements,
// placements of one profile differ in size, or a placement exceeds
// mig::kMaxMemorySlices.
StatusOr<mig::GpuModel> BuildGpuModel(const driver::GpuInfo& gpu,
                                      const std::vector<driver::GiProfileInfo>& profiles);

}  // namespace migd::engine

#endif  // MIGD_ENGINE_GPU_MODEL_BUILDER_H_
