#include "k8s/dra/health_reporter.h"

#include <map>
#include <tuple>
#include <utility>

namespace migd::k8s::dra {

std::vector<DeviceHealthReport> MapHealth(const std::vector<DeviceTable>& tables,
                                          const std::vector<InstanceLocation>& instances,
                                          const HealthSnapshot& health, const std::string& pool,
                                          int64_t now_unix_s) {
  using Where = std::tuple<uint32_t, uint32_t, uint32_t>;  // gpu, profile id, start
  std::map<Where, const HealthVerdict*> by_device;
  for (const InstanceLocation& i : instances) {
    auto it = health.instances.find(i.mig_uuid);
    if (it == health.instances.end()) continue;
    by_device[{i.gpu.value(), i.profile.value(), i.placement.start}] = &it->second;
  }
  auto stamp = [now_unix_s](int64_t t) { return t > 0 ? t : now_unix_s; };
  std::vector<DeviceHealthReport> out;
  for (const DeviceTable& t : tables) {
    const HealthVerdict* gpu = nullptr;
    if (auto it = health.gpus.find(t.gpu); it != health.gpus.end()) gpu = &it->second;
    for (const TableDevice& d : t.devices) {
      DeviceHealthReport r{pool, d.name, Health::kHealthy, "", now_unix_s};
      const HealthVerdict* inst = nullptr;
      if (auto it = by_device.find({t.gpu.value(), d.profile->id.value(), d.placement.start});
          it != by_device.end()) {
        inst = it->second;
      }
      if (gpu != nullptr && gpu->health != Health::kHealthy) {
        r.health = gpu->health;
        r.message = "GPU " + std::to_string(t.gpu.value()) + ": " + gpu->message;
        r.updated_unix_s = stamp(gpu->updated_unix_s);
      } else if (inst != nullptr && inst->health != Health::kHealthy) {
        r.health = inst->health;
        r.message = inst->message;
        r.updated_unix_s = stamp(inst->updated_unix_s);
      } else if (gpu != nullptr) {
        r.updated_unix_s = stamp(gpu->updated_unix_s);
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

HealthReporter::HealthReporter(DeviceHealthSource* source, const engine::Manager* manager,
                               std::string pool, Clock& clock)
    : source_(source), manager_(manager), pool_(std::move(pool)), clock_(clock) {}

std::vector<DeviceHealthReport> HealthReporter::Reports() {
  std::vector<DeviceTable> tables;
  for (const engine::GpuView& g : manager_->Gpus()) {
    if (g.model != nullptr) tables.push_back(BuildDeviceTable(g.info.index, *g.model));
  }
  std::vector<InstanceLocation> instances;
  for (const engine::InstanceView& v : manager_->List().instances) {
    if (!v.mig_uuid.value().empty()) {
      instances.push_back({v.mig_uuid, v.gpu, v.profile_id, v.placement});
    }
  }
  return MapHealth(tables, instances, source_->Snapshot(), pool_, ToUnixSeconds(clock_.Now()));
}

}  // namespace migd::k8s::dra
