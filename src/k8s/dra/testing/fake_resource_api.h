// File: k8s/dra/testing/fake_resource_api.h
//
// FakeResourceApi: the resource.k8s.io/v1 objects migd's DRA frontend uses,
// served by the fake API server (k8s/apiserver/testing/fake_api_server.h,
// through its AddRoutes hook), in the JSON shapes of k8s.io/api resource/v1:
//   GET    /version                      {"major","minor","gitVersion",...}
//   GET    /apis/resource.k8s.io/v1/resourceslices[?fieldSelector=...]
//          (spec.driver and spec.nodeName; any other field -> 400, as the
//          real server answers for labels it does not support)
//   POST   /apis/resource.k8s.io/v1/resourceslices          201 / 409 AlreadyExists
//   PUT    /apis/resource.k8s.io/v1/resourceslices/{name}   409 on a stale
//          metadata.resourceVersion; spec.driver, spec.pool.name and
//          spec.nodeName immutable (422)
//   DELETE /apis/resource.k8s.io/v1/resourceslices/{name}   200 / 404
//   GET    /apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}
// Writes are validated as the API server validates ResourceSlices of the
// configured version (ValidateSlice; 422 Invalid with every problem), and
// with SetPartitionableDevices(false) the gated fields (sharedCounters,
// consumesCounters, perDeviceNodeSelection) are dropped on write as an API
// server with DRAPartitionableDevices off does.
//
// Thread-safety: all methods are thread-safe.
#ifndef MIGD_K8S_DRA_TESTING_FAKE_RESOURCE_API_H_
#define MIGD_K8S_DRA_TESTING_FAKE_RESOURCE_API_H_

#include <absl/base/thread_annotations.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "k8s/apiserver/testing/fake_api_server.h"

namespace migd::k8s::dra::testing {

// One allocation result of a claim (status.allocation.devices.results[]).
struct AllocatedDevice {
  std::string request = "gpu";
  std::string driver;
  std::string pool;
  std::string device;
  bool admin_access = false;
};

// A ResourceClaim as the API server returns it once the scheduler allocated
// it to `node` (empty `devices`: not allocated).
nlohmann::json MakeClaim(const std::string& ns, const std::string& name, const std::string& uid,
                         const std::string& node, const std::vector<AllocatedDevice>& devices);

// The problems the API server of Kubernetes 1.<minor> would report for this
// ResourceSlice (empty: valid). Covers the rules of k8s.io/api resource/v1
// and pkg/apis/resource/validation that a single object shows.
std::vector<std::string> ValidateSlice(const nlohmann::json& slice, int minor);

class FakeResourceApi {
 public:
  // Installs the routes on `server`; call before server.Start(). The fake
  // must outlive the server's serving.
  explicit FakeResourceApi(k8s::testing::FakeApiServer& server);

  void SetVersion(int major, int minor);
  void SetPartitionableDevices(bool enabled);

  void AddClaim(const nlohmann::json& claim);
  bool RemoveClaim(const std::string& ns, const std::string& name);

  std::vector<nlohmann::json> Slices() const;
  std::optional<nlohmann::json> Slice(const std::string& name) const;
  // What kubelet does at its start: deletes every slice with spec.nodeName.
  int DeleteNodeSlices(const std::string& node);
  // The next `count` writes (POST/PUT/DELETE) of slices answer `code`.
  void FailNextWrites(int count, int code);

  // Handled requests: "list", "create", "update", "delete", "claim", "version".
  int count(const std::string& what) const;
  // Every validation problem of every refused write.
  std::vector<std::string> rejections() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace migd::k8s::dra::testing

#endif  // MIGD_K8S_DRA_TESTING_FAKE_RESOURCE_API_H_
