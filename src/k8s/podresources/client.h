// File: k8s/podresources/client.h
//
// A client of kubelet's PodResources v1 API (kubelet-apis.md §2), used at
// startup to learn which pods hold devices of migd's resource.
//
// Only `List` is used: `Get` is off by default before Kubernetes 1.34 and
// `GetAllocatableResources` tells nothing about owners (kubelet-apis.md §2.4).
//
// Failure handling: every call has a deadline (kubelet sets none on its side)
// and a bounded response size. UNAVAILABLE (socket absent or being recreated
// while kubelet restarts) and RESOURCE_EXHAUSTED (kubelet's rate limiter,
// 100 QPS / burst 10) are retried with doubling backoff up to `attempts`
// calls; every other error, and the last retryable one, is returned. An
// error is never turned into an empty list: an empty List taken while kubelet
// restarts would make every instance look unowned.
//
// Example:
//   k8s::PodResourcesClient client(
//       {.socket_path = k8s::PodResourcesSocketPath("/var/lib/kubelet/pod-resources")});
//   MIGD_ASSIGN_OR_RETURN(std::vector<k8s::PodResourcesEntry> pods, client.List());
//
// Thread-safety: PodResourcesClient is thread-safe (one gRPC channel, created
// lazily on the first call and shared).
#ifndef MIGD_K8S_PODRESOURCES_CLIENT_H_
#define MIGD_K8S_PODRESOURCES_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"

namespace migd::k8s {

// The devices of one resource held by one container.
struct ContainerDevicesEntry {
  std::string resource_name;
  std::vector<std::string> device_ids;  // the Device.ID strings the plugin advertised
  friend bool operator==(const ContainerDevicesEntry&, const ContainerDevicesEntry&) = default;
};

struct ContainerEntry {
  std::string name;
  std::vector<ContainerDevicesEntry> devices;
  friend bool operator==(const ContainerEntry&, const ContainerEntry&) = default;
};

// One pod of List (PodResources): no uid and no phase, the API has neither.
struct PodResourcesEntry {
  std::string pod_namespace;
  std::string pod_name;
  std::vector<ContainerEntry> containers;
  friend bool operator==(const PodResourcesEntry&, const PodResourcesEntry&) = default;
};

// What the owner source needs (a seam for tests that want a canned answer;
// PodResourcesClient is the production implementation).
class PodResourcesLister {
 public:
  virtual ~PodResourcesLister() = default;
  virtual StatusOr<std::vector<PodResourcesEntry>> List() = 0;
};

// <pod_resources_dir>/kubelet.sock. The directory follows kubelet's
// --root-dir (pkg/kubelet/kubelet_getters.go getPodResourcesDir:
// <root-dir>/pod-resources), unlike the device-plugin directory.
std::string PodResourcesSocketPath(const std::string& pod_resources_dir);

struct PodResourcesClientOptions {
  std::string socket_path;  // absolute path of kubelet's pod-resources socket
  std::chrono::milliseconds call_timeout = std::chrono::seconds(10);  // per attempt
  int max_response_bytes = 16 << 20;  // a node with ~110 pods needs a few KiB
  int attempts = 4;                   // >= 1; retries only UNAVAILABLE / RESOURCE_EXHAUSTED
  std::chrono::milliseconds initial_backoff = std::chrono::milliseconds(250);  // doubles
};

class PodResourcesClient final : public PodResourcesLister {
 public:
  explicit PodResourcesClient(PodResourcesClientOptions options);
  ~PodResourcesClient() override;
  PodResourcesClient(const PodResourcesClient&) = delete;
  PodResourcesClient& operator=(const PodResourcesClient&) = delete;

  // kubelet's List. Errors: kUnavailable ("kubelet pod-resources socket
  // <path>: ...") when kubelet cannot be reached after the retries;
  // kDeadlineExceeded, kResourceExhausted, or the code kubelet returned,
  // each naming the socket; kInvalidArgument for bad options.
  StatusOr<std::vector<PodResourcesEntry>> List() override;

 private:
  struct Channel;
  PodResourcesClientOptions options_;
  Mutex mu_;
  std::shared_ptr<Channel> channel_ ABSL_GUARDED_BY(mu_);  // created on first use
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_PODRESOURCES_CLIENT_H_
