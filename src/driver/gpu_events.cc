#include "driver/gpu_events.h"

#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

namespace migd::driver {

std::string_view GpuEventKindName(GpuEventKind kind) {
  switch (kind) {
    case GpuEventKind::kXid: return "xid";
    case GpuEventKind::kMigConfigChange: return "mig-config-change";
    case GpuEventKind::kGpuLost: return "gpu-lost";
  }
  return "unknown";
}

bool GpuEventKinds::Has(GpuEventKind kind) const {
  switch (kind) {
    case GpuEventKind::kXid: return xid;
    case GpuEventKind::kMigConfigChange: return mig_config_change;
    case GpuEventKind::kGpuLost: return gpu_lost;
  }
  return false;
}

std::string GpuEventKinds::ToString() const {
  std::vector<std::string> names;
  for (GpuEventKind k :
       {GpuEventKind::kXid, GpuEventKind::kMigConfigChange, GpuEventKind::kGpuLost}) {
    if (Has(k)) names.emplace_back(GpuEventKindName(k));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ",");
}

std::string DescribeGpuEvent(const GpuEvent& event) {
  std::string out = absl::StrCat("GPU ", event.gpu.value(), ": ");
  if (event.kind != GpuEventKind::kXid) {
    return absl::StrCat(out, std::string(GpuEventKindName(event.kind)));
  }
  absl::StrAppend(&out, "xid ", event.xid);
  if (event.xid == kUnknownXid) absl::StrAppend(&out, " (unknown to NVML)");
  if (event.gi) {
    absl::StrAppend(&out, " (GI ", event.gi->value());
    if (event.ci) absl::StrAppend(&out, ", CI ", event.ci->value());
    absl::StrAppend(&out, ")");
  }
  return out;
}

}  // namespace migd::driver
