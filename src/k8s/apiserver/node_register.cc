#include "k8s/apiserver/node_register.h"

#include <absl/strings/match.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "mig/catalog.h"

namespace migd::k8s::hami {
namespace {

bool Allowed(const mig::GiProfile& p, const std::set<std::string>& allowlist) {
  if (allowlist.empty() || allowlist.count(p.name) > 0) return true;
  return std::any_of(p.aliases.begin(), p.aliases.end(),
                     [&](const std::string& a) { return allowlist.count(a) > 0; });
}

nlohmann::ordered_json Profile(const mig::GiProfile& p, uint32_t full_sm) {
  nlohmann::ordered_json prof;
  prof["name"] = p.name;
  prof["memoryMB"] = p.memory_mib;
  prof["core"] = full_sm == 0 ? 0 : (p.sm_count * 100 + full_sm - 1) / full_sm;
  prof["sliceCount"] = p.slice_count;
  nlohmann::ordered_json placements = nlohmann::ordered_json::array();
  for (const mig::Placement& x : p.placements) {
    placements.push_back({{"start", x.start}, {"size", x.size}});
  }
  prof["placements"] = std::move(placements);
  return prof;
}

}  // namespace

std::string DeviceType(const std::string& nvml_name) {
  return absl::StartsWith(nvml_name, "NVIDIA") ? nvml_name : "NVIDIA-" + nvml_name;
}

nlohmann::ordered_json NodeRegisterValue(const std::vector<engine::GpuView>& gpus,
                                         const std::set<std::string>& allowlist) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const engine::GpuView& g : gpus) {
    if (g.model == nullptr) continue;
    uint32_t full_sm = 0;
    for (const mig::GiProfile& p : g.model->gi_profiles) full_sm = std::max(full_sm, p.sm_count);
    nlohmann::ordered_json profiles = nlohmann::ordered_json::array();
    uint32_t count = 0;
    for (const mig::GiProfile& p : g.model->gi_profiles) {
      if (p.variant != mig::Variant::kBase || !Allowed(p, allowlist)) continue;
      profiles.push_back(Profile(p, full_sm));
      count = std::max(count, p.instance_count);
    }
    if (profiles.empty()) continue;  // HAMi skips a GPU without profile capacity
    nlohmann::ordered_json d;
    d["id"] = g.info.uuid.value();
    if (g.info.index.value() != 0) d["index"] = g.info.index.value();
    d["count"] = count;
    d["devmem"] = g.info.memory_total_mib != 0 ? g.info.memory_total_mib : g.model->memory_mib;
    d["devcore"] = 100;
    d["type"] = DeviceType(g.info.name);
    d["mode"] = "mig";
    d["migProfiles"] = std::move(profiles);
    // DeviceInfo.Health (`json:"health,omitempty"`, HAMi pkg/device/devices.go):
    // HAMi's own encoder drops a false one, its decoder reads a missing or a
    // false key alike; migd writes it always, so an unhealthy GPU reads
    // "health": false to a person too.
    d["health"] = !g.unhealthy;
    arr.push_back(std::move(d));
  }
  return arr;
}

}  // namespace migd::k8s::hami
