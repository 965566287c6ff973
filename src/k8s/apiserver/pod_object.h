// File: k8s/apiserver/pod_object.h
//
// Typed, strictly read views of the Kubernetes objects HAMi mode reads: the
// object metadata of a Pod or Node, and the Pod fields migd acts on. Read
// with JsonReader, so a malformed answer names its field:
//   "pod default/p: /spec/containers/0/resources/limits/nvidia.com~1gpu:
//    expected a whole number, got \"1.5\"".
//
// Which fields are trusted for what is docs/security.md's trust boundary:
// spec.nodeName and status.phase are written by the scheduler's binding and
// by kubelet; annotations are written by whoever may patch the pod.
//
// Thread-safety: plain values and pure functions.
#ifndef MIGD_K8S_APISERVER_POD_OBJECT_H_
#define MIGD_K8S_APISERVER_POD_OBJECT_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_reader.h"
#include "base/status.h"

namespace migd::k8s {

struct ObjectMeta {
  std::string name;
  std::string ns;  // empty for cluster-scoped objects (Node)
  std::string uid;
  std::string resource_version;
  bool deleting = false;  // metadata.deletionTimestamp is set
  std::map<std::string, std::string> annotations;

  std::optional<std::string> Annotation(std::string_view key) const;
};

// `object` is a Pod or Node; metadata.name is required, annotation values
// must be strings. The reader's code for every error.
StatusOr<ObjectMeta> ReadObjectMeta(const JsonReader& object);

struct PodContainer {
  std::string name;
  bool init = false;
  std::map<std::string, std::string> limits;  // resources.limits, quantities as text
};

struct PodObject {
  ObjectMeta meta;
  std::string node_name;  // spec.nodeName; empty while unbound
  std::string phase;      // status.phase; empty when absent
  // Init containers first, then regular ones: the order of HAMi's
  // containerIndex (pkg/device/devices.go, Resourcereqs).
  std::vector<PodContainer> containers;

  std::string Key() const { return meta.ns + "/" + meta.name; }
  // Holds its devices: not being deleted and not Succeeded/Failed (HAMi's
  // reconciler: util.IsPodInTerminatedState / IsPodTerminating).
  bool Active() const;
};

// One Pod object read from `pod` (errors name pod's source and pointer).
// metadata.namespace, name and uid are required.
StatusOr<PodObject> ReadPodObject(const JsonReader& pod);
// The same for a document of its own. metadata.namespace, name and uid are required.
// kInvalidArgument by default (an API-server answer is input).
StatusOr<PodObject> ParsePodObject(const nlohmann::json& pod, std::string source,
                                   StatusCode code = StatusCode::kInvalidArgument);

// The items of a PodList.
StatusOr<std::vector<PodObject>> ParsePodList(const nlohmann::json& list, std::string source,
                                              StatusCode code = StatusCode::kInvalidArgument);

// The number of devices of `resource` the container requests
// (resources.limits: kubelet allocates by limits, which equal requests for
// extended resources; pkg/kubelet/cm/devicemanager/manager.go,
// allocateContainerResources). 0 when absent; kInvalidArgument when the
// quantity is not a whole number.
StatusOr<int64_t> DeviceLimit(const PodContainer& container, const std::string& resource);

}  // namespace migd::k8s

#endif  // MIGD_K8S_APISERVER_POD_OBJECT_H_
