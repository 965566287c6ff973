#include "k8s/resource_name.h"

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>

#include <string>

namespace migd::k8s {
namespace {

// k8s.io/apimachinery/pkg/util/validation: DNS1123SubdomainMaxLength,
// qualifiedNameMaxLength, and v1.DefaultResourceRequestsPrefix /
// v1.ResourceDefaultNamespacePrefix (k8s.io/api/core/v1/resource.go).
constexpr size_t kDnsSubdomainMaxLength = 253;
constexpr size_t kQualifiedNameMaxLength = 63;
constexpr char kRequestsPrefix[] = "requests.";
constexpr size_t kRequestsPrefixLength = sizeof(kRequestsPrefix) - 1;
constexpr char kNativeNamespacePrefix[] = "kubernetes.io/";

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// qualifiedNameFmt: ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
bool IsQualifiedNamePart(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

Status Invalid(const std::string& name, const std::string& why) {
  return InvalidArgumentError(absl::StrCat("resource name \"", name, "\" ", why,
                                           " (kubelet's Register would refuse it: "
                                           "IsExtendedResourceName); use e.g. nvidia.com/gpu"));
}

}  // namespace

bool IsDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > kDnsSubdomainMaxLength) return false;
  // dns1123SubdomainFmt: [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*
  size_t start = 0;
  while (start <= s.size()) {
    size_t dot = s.find('.', start);
    if (dot == std::string_view::npos) dot = s.size();
    const std::string_view label = s.substr(start, dot - start);
    if (label.empty() || !IsLowerAlnum(label.front()) || !IsLowerAlnum(label.back())) {
      return false;
    }
    for (char c : label) {
      if (!IsLowerAlnum(c) && c != '-') return false;
    }
    start = dot + 1;
  }
  return true;
}

Status CheckExtendedResourceName(std::string_view resource) {
  const std::string name(resource);
  const size_t slash = name.find('/');
  if (slash == std::string::npos) {
    return Invalid(name, "has no domain: it must be <domain>/<name>");
  }
  if (absl::StrContains(name, kNativeNamespacePrefix)) {
    return Invalid(name,
                   "is in the kubernetes.io namespace, which is reserved for native resources");
  }
  if (absl::StartsWith(name, kRequestsPrefix)) {
    return Invalid(name, "starts with \"requests.\", the resource-quota prefix");
  }
  if (name.find('/', slash + 1) != std::string::npos) {
    return Invalid(name, "has more than one '/'");
  }
  // IsQualifiedName("requests." + name): the prefix part is checked with the
  // quota prefix in front, so the domain may be 253 - 9 = 244 characters.
  const std::string prefix = std::string(kRequestsPrefix) + name.substr(0, slash);
  if (slash == 0 || !IsDns1123Subdomain(prefix)) {
    return Invalid(name, absl::StrCat("has a domain that is not a DNS-1123 subdomain of at most ",
                                      kDnsSubdomainMaxLength - kRequestsPrefixLength,
                                      " characters (lower-case letters, digits, '-' and '.')"));
  }
  const std::string part = name.substr(slash + 1);
  if (part.size() > kQualifiedNameMaxLength || !IsQualifiedNamePart(part)) {
    return Invalid(name, absl::StrCat("has a name part that is not 1..", kQualifiedNameMaxLength,
                                      " letters, digits, '-', '_' or '.' starting and ending "
                                      "with a letter or digit"));
  }
  return OkStatus();
}

}  // namespace migd::k8s
