// File: k8s/dra/health.h
//
// DeviceHealthSource: what the DRA plugin's resource-health stream
// (NodeWatchResources, kubelet's dra-health API) reads. The GPU and instance
// health monitor implements it; the plugin only maps its verdicts onto DRA
// devices:
//   - a GPU reported unhealthy (or unknown) makes every device of that GPU
//     unhealthy (unknown), with the GPU's message;
//   - otherwise an instance (by MIG UUID) reported unhealthy (or unknown)
//     makes the device at that instance's GPU, profile and placement
//     unhealthy (unknown);
//   - everything else is healthy.
//
// Contract for implementations:
//   Snapshot()     the current verdicts; cheap (called on every change and
//                  every heartbeat of every stream); thread-safe.
//   AddListener()  `on_change` is called, from any thread, whenever Snapshot
//                  may have changed. It must not block and must not call
//                  back into the source. RemoveListener() returns only once
//                  the listener will not be called any more.
//
// Thread-safety: implementations are thread-safe.
#ifndef MIGD_K8S_DRA_HEALTH_H_
#define MIGD_K8S_DRA_HEALTH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/ids.h"

namespace migd::k8s::dra {

enum class Health { kUnknown, kHealthy, kUnhealthy };

struct HealthVerdict {
  Health health = Health::kUnknown;
  std::string message;         // why; empty when healthy
  int64_t updated_unix_s = 0;  // when the monitor last determined it
  friend bool operator==(const HealthVerdict&, const HealthVerdict&) = default;
};

struct HealthSnapshot {
  // GPUs the monitor knows; a GPU missing here is healthy.
  std::map<GpuIndex, HealthVerdict> gpus;
  // Instances the monitor has a verdict on, by MIG UUID; missing: healthy.
  std::map<MigUuid, HealthVerdict> instances;
  friend bool operator==(const HealthSnapshot&, const HealthSnapshot&) = default;
};

// The health of one DRA device, as the stream reports it.
struct DeviceHealthReport {
  std::string pool;
  std::string device;
  Health health = Health::kUnknown;
  std::string message;
  int64_t updated_unix_s = 0;
  friend bool operator==(const DeviceHealthReport&, const DeviceHealthReport&) = default;
};

class DeviceHealthSource {
 public:
  virtual ~DeviceHealthSource() = default;
  virtual HealthSnapshot Snapshot() = 0;
  // Returns a handle for RemoveListener.
  virtual uint64_t AddListener(std::function<void()> on_change) = 0;
  virtual void RemoveListener(uint64_t handle) = 0;
};

// What the plugin's health stream reads: the source (for its change
// notifications) and the complete device list (HealthReporter::Feed()).
// A null source: the plugin offers no health service.
struct HealthFeed {
  DeviceHealthSource* source = nullptr;
  std::function<std::vector<DeviceHealthReport>()> reports;
};

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_HEALTH_H_
