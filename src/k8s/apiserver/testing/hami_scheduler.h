// File: k8s/apiserver/testing/hami_scheduler.h
//
// FakeHamiScheduler: what HAMi's scheduler writes for one pod, on the fake
// API server, in the real JSON shapes (HAMi pkg/scheduler/scheduler.go
// Filter and Bind, pkg/util/nodelock/nodelock.go, v2.10.0):
//   Filter  pod annotations hami.io/vgpu-devices-to-allocate and
//           -allocated (per container, init first), hami.io/vgpu-mig-
//           allocations (the reservation), hami.io/vgpu-node, hami.io/vgpu-time;
//   Bind    the node lock hami.io/mutex.lock "<RFC 3339>,<ns>,<name>" (with
//           the node's resourceVersion), hami.io/bind-phase=allocating and
//           hami.io/bind-time, then the binding (spec.nodeName).
// The pod's containers get resources.limits[resource] = their number of
// reserved instances, as a HAMi pod requests them. Tests build hostile pods
// with MakePod directly.
//
// Thread-safety: as the fake API server (thread-safe).
#ifndef MIGD_K8S_APISERVER_TESTING_HAMI_SCHEDULER_H_
#define MIGD_K8S_APISERVER_TESTING_HAMI_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "k8s/apiserver/testing/fake_api_server.h"
#include "mig/placement.h"

namespace migd::k8s::testing {

struct HamiReservation {
  int container_index = 0;
  std::string gpu_uuid;
  std::string profile;
  mig::Placement placement;
  int64_t used_mem = 9856;  // the profile's memoryMB, as HAMi's Fit records it
  int64_t used_cores = 29;
};

class FakeHamiScheduler {
 public:
  // Not owned; must outlive the scheduler.
  FakeHamiScheduler(FakeApiServer* api, const Clock* clock, std::string node,
                    std::string resource = "nvidia.com/gpu");

  // Filter + Bind of `pod` (spec.node is overwritten with this node). Fails
  // the test if the node lock is held (HAMi's LockNode refuses then).
  void Schedule(PodSpec pod, const std::vector<HamiReservation>& reservations);

  // The Filter annotations of `pod` alone (what a pod would need to write
  // itself to look scheduled).
  std::map<std::string, std::string> FilterAnnotations(
      const PodSpec& pod, const std::vector<HamiReservation>& reservations) const;

  // HAMi's lock value for a pod, taken `age` ago.
  std::string LockValue(const std::string& ns, const std::string& name,
                        Clock::Duration age = Clock::Duration(0)) const;
  // Sets (or, with "", removes) the node lock as the scheduler would.
  void SetNodeLock(const std::string& value);

 private:
  FakeApiServer* const api_;
  const Clock* const clock_;
  const std::string node_;
  const std::string resource_;
};

}  // namespace migd::k8s::testing

#endif  // MIGD_K8S_APISERVER_TESTING_HAMI_SCHEDULER_H_
