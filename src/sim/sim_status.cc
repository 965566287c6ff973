#include "sim/sim_status.h"

#include "driver/nvml/nvml_status.h"
#include "sim/nvml_names.h"

namespace migd::sim {

std::string SimStatus::ToString() const {
  if (ok()) return "SUCCESS";
  std::string out = "NVML_" + NvmlResultName(code_) + " (" + NvmlErrorText(code_) + ")";
  if (!message_.empty()) out += ": " + message_;
  return out;
}

StatusCode NvmlResultToCode(nvmlReturn_t result) { return driver::NvmlReturnToCode(result); }

Status SimStatus::ToStatus() const {
  if (ok()) return OkStatus();
  return Status(NvmlResultToCode(code_), ToString());
}

}  // namespace migd::sim
