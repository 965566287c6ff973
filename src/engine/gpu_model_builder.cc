#include "engine/gpu_model_builder.h"

#include <algorithm>
#include <string>

namespace migd::engine {
namespace {

mig::Variant VariantOf(const std::string& name, uint32_t slices, uint64_t memory_mib,
                       uint64_t min_one_slice_memory) {
  if (name.find("+me.all") != std::string::npos) return mig::Variant::kMeAll;
  if (name.find("+me") != std::string::npos) return mig::Variant::kMe;
  if (name.find("-me") != std::string::npos) return mig::Variant::kNoMe;
  if (name.find("+gfx") != std::string::npos) return mig::Variant::kGfx;
  if (slices == 1 && min_one_slice_memory > 0 && memory_mib * 2 > min_one_slice_memory * 3) {
    return mig::Variant::kDoubleMemory;
  }
  return mig::Variant::kBase;
}

void MaxInto(mig::Engines& total, const mig::Engines& e) {
  total.copy_engines = std::max(total.copy_engines, e.copy_engines);
  total.decoders = std::max(total.decoders, e.decoders);
  total.encoders = std::max(total.encoders, e.encoders);
  total.jpeg = std::max(total.jpeg, e.jpeg);
  total.ofa = std::max(total.ofa, e.ofa);
}

}  // namespace

StatusOr<mig::GpuModel> BuildGpuModel(const driver::GpuInfo& gpu,
                                      const std::vector<driver::GiProfileInfo>& profiles) {
  mig::GpuModel model;
  model.key = "nvml:" + gpu.name;
  model.names = {gpu.name};
  if (gpu.pci_device_id != 0) model.pci_device_ids = {gpu.pci_device_id};
  uint64_t min_one_slice = 0;
  for (const driver::GiProfileInfo& p : profiles) {
    if (p.slice_count == 1 && p.name.find('+') == std::string::npos &&
        p.name.find("-me") == std::string::npos) {
      if (min_one_slice == 0 || p.memory_mib < min_one_slice) min_one_slice = p.memory_mib;
    }
  }
  for (const driver::GiProfileInfo& p : profiles) {
    if (p.placements.empty()) continue;
    mig::GiProfile gp;
    gp.name = p.name;
    if (gp.name.empty()) {
      gp.name = std::to_string(p.slice_count) + "g." +
                std::to_string((p.memory_mib + 512) / 1024) + "gb";
    }
    gp.index = p.index;
    gp.id = p.id;
    gp.slice_count = p.slice_count;
    gp.instance_count = p.instance_count;
    gp.memory_mib = p.memory_mib;
    gp.sm_count = p.multiprocessor_count;
    gp.engines = {p.copy_engines, p.decoders, p.encoders, p.jpeg, p.ofa};
    gp.placements = p.placements;
    std::sort(gp.placements.begin(), gp.placements.end());
    for (const mig::Placement& pl : gp.placements) {
      if (pl.size != gp.placements[0].size || pl.size == 0) {
        return InvalidArgumentError("GPU " + gpu.uuid.value() + ": profile " + gp.name +
                                    " has placements of different sizes");
      }
      if (pl.end() > mig::kMaxMemorySlices) {
        return InvalidArgumentError("GPU " + gpu.uuid.value() + ": profile " + gp.name +
                                    " placement " + pl.ToString() + " out of range");
      }
      model.memory_slices = std::max(model.memory_slices, pl.end());
    }
    gp.variant = VariantOf(p.name, p.slice_count, p.memory_mib, min_one_slice);
    gp.confirmed = true;
    model.compute_slices = std::max(model.compute_slices, p.slice_count);
    model.memory_mib = std::max(model.memory_mib, p.memory_mib);
    model.sm_count = std::max(model.sm_count, p.multiprocessor_count);
    MaxInto(model.engine_totals, gp.engines);
    model.gi_profiles.push_back(std::move(gp));
  }
  if (model.gi_profiles.empty()) {
    return InvalidArgumentError("GPU " + gpu.uuid.value() + ": NVML reports no GI profile with "
                                "placements");
  }
  return model;
}

}  // namespace migd::engine
