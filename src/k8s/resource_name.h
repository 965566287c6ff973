// File: k8s/resource_name.h
//
// Kubelet's own check of a device plugin's resource name, so that a bad
// name fails at config load instead of Register failing forever. kubelet's
// Register (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go) accepts
// exactly the names v1helper.IsExtendedResourceName accepts
// (pkg/apis/core/v1/helper/helpers.go):
//   - not native: the name contains '/' and does not contain "kubernetes.io/"
//     anywhere (IsNativeResource / IsPrefixedNativeResource);
//   - no "requests." prefix (the quota convention);
//   - "requests." + name is a qualified name (k8s.io/apimachinery
//     pkg/util/validation IsQualifiedName): at most one '/', the prefix a
//     DNS-1123 subdomain of at most 253 characters (so the domain itself at
//     most 244), the name part 1..63 characters of [A-Za-z0-9-_.] starting
//     and ending alphanumeric.
//
// Thread-safety: pure functions.
#ifndef MIGD_K8S_RESOURCE_NAME_H_
#define MIGD_K8S_RESOURCE_NAME_H_

#include <string_view>

#include "base/status.h"

namespace migd::k8s {

// OK if kubelet accepts `name` in RegisterRequest.resource_name; else
// kInvalidArgument "resource name \"<name>\" <why>".
Status CheckExtendedResourceName(std::string_view name);

// k8s.io/apimachinery IsDNS1123Subdomain: at most 253 characters, lower-case
// alphanumeric labels joined by '.', '-' inside a label.
bool IsDns1123Subdomain(std::string_view s);

}  // namespace migd::k8s

#endif  // MIGD_K8S_RESOURCE_NAME_H_
