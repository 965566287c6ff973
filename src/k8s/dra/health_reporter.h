// File: k8s/dra/health_reporter.h
//
// HealthReporter: the health of every DRA device of the node (every device
// of every managed GPU's table, published or not, so that the list is
// complete and stable), from a DeviceHealthSource's verdicts (health.h) and
// the engine's instances (which MIG UUID sits at which device). The plugin
// server streams Reports() to kubelet on every change and heartbeat.
//
// Thread-safety: thread-safe (the source and the Manager are).
#ifndef MIGD_K8S_DRA_HEALTH_REPORTER_H_
#define MIGD_K8S_DRA_HEALTH_REPORTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "engine/manager.h"
#include "k8s/dra/device_table.h"
#include "k8s/dra/health.h"

namespace migd::k8s::dra {

// Where an instance sits, to match it to its device.
struct InstanceLocation {
  MigUuid mig_uuid;
  GpuIndex gpu;
  GiProfileId profile;
  mig::Placement placement;
};

// The mapping of health.h, pure. Verdicts without a time get `now_unix_s`.
std::vector<DeviceHealthReport> MapHealth(const std::vector<DeviceTable>& tables,
                                          const std::vector<InstanceLocation>& instances,
                                          const HealthSnapshot& health, const std::string& pool,
                                          int64_t now_unix_s);

class HealthReporter {
 public:
  // Nothing is owned; all must outlive the reporter.
  HealthReporter(DeviceHealthSource* source, const engine::Manager* manager, std::string pool,
                 Clock& clock);
  std::vector<DeviceHealthReport> Reports();
  DeviceHealthSource& source() { return *source_; }
  // For DraPluginServer (plugin_server.h).
  HealthFeed Feed() {
    return {source_, [this] { return Reports(); }};
  }

 private:
  DeviceHealthSource* const source_;
  const engine::Manager* const manager_;
  const std::string pool_;
  Clock& clock_;
};

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_HEALTH_REPORTER_H_
