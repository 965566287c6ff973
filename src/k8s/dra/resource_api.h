// File: k8s/dra/resource_api.h
//
// ResourceApi: the API-server calls of migd's DRA frontend, over the shared
// KubeClient (k8s/apiserver/kube_client.h; its error mapping applies:
// 404 -> kNotFound, 409 -> kAborted, ...):
//   GET    /version                                          server version
//   GET    /apis/resource.k8s.io/v1/resourceslices?fieldSelector=
//          spec.driver=<driver>,spec.nodeName=<node>          our slices
//   POST   /apis/resource.k8s.io/v1/resourceslices           create
//   PUT    /apis/resource.k8s.io/v1/resourceslices/<name>    update (the
//          object's metadata.resourceVersion makes it conditional)
//   DELETE /apis/resource.k8s.io/v1/resourceslices/<name>    (404 is success)
//   GET    /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>
//   GET    /api/v1/nodes/<name>                               the owner's UID
// Field selectors spec.driver and spec.nodeName are the ones k8s.io/api
// resource/v1 declares (ResourceSliceSelectorDriver / ...NodeName).
//
// Thread-safety: thread-safe (KubeClient is).
#ifndef MIGD_K8S_DRA_RESOURCE_API_H_
#define MIGD_K8S_DRA_RESOURCE_API_H_

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "k8s/apiserver/kube_client.h"

namespace migd::k8s::dra {

struct ServerVersion {
  int major = 0;
  int minor = 0;
  std::string git_version;  // "v1.35.2"
};

class ResourceApi {
 public:
  // `client` is not owned and must outlive this object.
  explicit ResourceApi(KubeClient* client) : client_(client) {}

  // kDataLoss when /version has no readable major/minor ("35+" reads 35).
  StatusOr<ServerVersion> Version();
  // The ResourceSliceList's items.
  StatusOr<nlohmann::json> ListSlices(const std::string& driver, const std::string& node);
  StatusOr<nlohmann::json> CreateSlice(const nlohmann::json& slice);
  StatusOr<nlohmann::json> UpdateSlice(const nlohmann::json& slice);
  Status DeleteSlice(const std::string& name);
  StatusOr<nlohmann::json> GetClaim(const std::string& ns, const std::string& name);
  // metadata.uid of the Node.
  StatusOr<std::string> NodeUid(const std::string& node);

 private:
  KubeClient* const client_;
};

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_RESOURCE_API_H_
