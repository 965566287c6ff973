// Machine's event log (sim/machine.h, "Events").
#include <string>

#include "sim/events.h"

#include "driver/nvml/nvml_abi.h"
#include "sim/machine.h"

namespace migd::sim {

namespace abi = ::migd::nvml_abi;

void Machine::RecordEvent(GpuIndex gpu, uint64_t type, uint64_t data, uint32_t gi, uint32_t ci) {
  SimEvent e;
  e.seq = ++state_->event_seq;
  e.gpu = gpu.value();
  e.type = type;
  e.data = data;
  e.gi = gi;
  e.ci = ci;
  state_->events.push_back(e);
  if (state_->events.size() > kMaxEvents) {
    state_->events.erase(state_->events.begin(),
                         state_->events.begin() +
                             static_cast<std::ptrdiff_t>(state_->events.size() - kMaxEvents));
  }
}

void Machine::RecordMigConfigChange(GpuIndex gpu) {
  // "eventData is 0 for any other event"; the instance ids are only for
  // Xids (nvml.h, nvmlEventData_t).
  RecordEvent(gpu, abi::kEventMigConfigChange, 0);
}

SimStatus Machine::InjectEvent(const EventSpec& spec) {
  SimGpu* gpu = MutableGpu(GpuIndex(spec.gpu));
  if (gpu == nullptr) {
    return SimStatus(NVML_ERROR_INVALID_ARGUMENT, "no GPU " + std::to_string(spec.gpu));
  }
  const bool comes_back =
      spec.kind == EventSpecKind::kGpuBack || spec.kind == EventSpecKind::kGpuReset;
  if (comes_back && !gpu->lost) {
    return SimStatus(NVML_ERROR_INVALID_ARGUMENT,
                     "GPU " + std::to_string(spec.gpu) + " is not lost: it cannot come back");
  }
  if (gpu->lost && !comes_back) {
    return SimStatus(NVML_ERROR_GPU_IS_LOST, "GPU " + std::to_string(spec.gpu) + " is lost");
  }
  switch (spec.kind) {
    case EventSpecKind::kXid:
      if (spec.gi && !gpu->mig_current) {
        return SimStatus(NVML_ERROR_INVALID_ARGUMENT,
                         "an Xid attributed to a GI needs MIG on GPU " + std::to_string(spec.gpu));
      }
      RecordEvent(gpu->index, abi::kEventTypeXidCriticalError, spec.xid,
                  spec.gi.value_or(abi::kInvalidInstanceId),
                  spec.ci.value_or(abi::kInvalidInstanceId));
      break;
    case EventSpecKind::kMigConfigChange: RecordMigConfigChange(gpu->index); break;
    case EventSpecKind::kGpuLost:
      gpu->lost = true;
      RecordEvent(gpu->index, abi::kEventTypeGpuUnavailableError, 0);
      break;
    case EventSpecKind::kGpuReset:
      gpu->gpu_instances.clear();  // a reset destroys every GI and CI
      ++state_->serial;
      gpu->lost = false;
      break;
    case EventSpecKind::kGpuBack: gpu->lost = false; break;
  }
  return SimStatus();
}

}  // namespace migd::sim
