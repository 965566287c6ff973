// File: k8s/apiserver/kube_client.h
//
// KubeClient: the few Kubernetes API-server calls migd's HAMi mode needs
// (pods on this node, their annotations, the node's annotations), over
// libcurl with JSON bodies (nlohmann-json). Pods are observed by periodic
// LIST (see PodWatcher), not by the watch protocol: a LIST per period is
// what HAMi's plugin does too, and it needs no resume/bookmark handling.
//
// Configuration comes from the in-cluster service account
// (KUBERNETES_SERVICE_HOST/PORT, <sa_dir>/{token,ca.crt}) or a kubeconfig
// file (current context: server, CA file or data, insecure flag, token or
// token file, client certificate and key as files or data). Plain http is
// accepted (tests, kubectl proxy).
//
// Errors name the method, the URL and the HTTP status, plus the API
// server's Status message when the body carries one:
//   409 Conflict -> kAborted (stale resourceVersion: re-read and retry)
//   404 -> kNotFound, 401 -> kUnauthenticated, 403 -> kPermissionDenied,
//   400/422 -> kInvalidArgument, 429/5xx and transport failures ->
//   kUnavailable, timeouts -> kDeadlineExceeded, an oversized response ->
//   kResourceExhausted.
//
// Thread-safety: all methods are thread-safe (one curl handle per request).
#ifndef MIGD_K8S_APISERVER_KUBE_CLIENT_H_
#define MIGD_K8S_APISERVER_KUBE_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace migd::k8s {

struct KubeConfig {
  std::string server;   // "https://10.96.0.1:443" or "http://127.0.0.1:8080"
  std::string token;    // bearer token; empty = none
  std::string ca_file;  // PEM file of the CA that signed the server cert
  std::string ca_data;  // PEM text (kubeconfig certificate-authority-data)
  std::string client_cert_file;
  std::string client_key_file;
  std::string client_cert_data;  // PEM text
  std::string client_key_data;   // PEM text
  bool insecure_skip_tls_verify = false;
  std::chrono::milliseconds connect_timeout{5000};
  // Whole request (connect + transfer).
  std::chrono::milliseconds timeout{15000};
  // Larger responses fail with kResourceExhausted (a node's pod list is far
  // below this).
  size_t max_response_bytes = 64u << 20;
};

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// In-cluster config: KUBERNETES_SERVICE_HOST/PORT from the environment,
// token and ca.crt from `sa_dir`. kFailedPrecondition when the variables are
// unset or the token cannot be read (not running in a pod).
StatusOr<KubeConfig> InClusterConfig(const std::string& sa_dir = kServiceAccountDir);
// The same with host and port given (tests).
StatusOr<KubeConfig> InClusterConfigFor(const std::string& host, const std::string& port,
                                        const std::string& sa_dir);
// Kubeconfig file: the current context (or `context` when non-empty).
// Relative file paths are resolved against the file's directory.
// kInvalidArgument naming the missing/bad key; kNotFound for an unreadable file.
StatusOr<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

// Base64 (standard alphabet, padding optional, whitespace ignored).
StatusOr<std::string> Base64Decode(std::string_view in);

class KubeClient {
 public:
  // kInvalidArgument for an empty server or a scheme other than http/https.
  static StatusOr<std::unique_ptr<KubeClient>> Create(KubeConfig config);

  const KubeConfig& config() const { return config_; }

  // GET /api/v1/namespaces/<ns>/pods/<name> -> Pod.
  StatusOr<nlohmann::json> GetPod(const std::string& ns, const std::string& name);
  // GET /api/v1/pods?fieldSelector=spec.nodeName%3D<node> -> PodList.
  StatusOr<nlohmann::json> ListPods(const std::string& node_name);
  // PATCH (application/merge-patch+json) -> the updated Pod. Put
  // metadata.resourceVersion in `patch` for optimistic concurrency (409 ->
  // kAborted).
  StatusOr<nlohmann::json> PatchPod(const std::string& ns, const std::string& name,
                                    const nlohmann::json& patch);
  StatusOr<nlohmann::json> GetNode(const std::string& name);
  StatusOr<nlohmann::json> PatchNode(const std::string& name, const nlohmann::json& patch);

  // One request; `path` starts with '/'. `body` empty = none.
  StatusOr<nlohmann::json> Request(const std::string& method, const std::string& path,
                                   const std::string& body = "",
                                   const std::string& content_type = "");

 private:
  explicit KubeClient(KubeConfig config) : config_(std::move(config)) {}
  const KubeConfig config_;
};

// Percent-encodes a path segment or query value (RFC 3986 unreserved kept).
std::string UrlEncode(std::string_view s);

}  // namespace migd::k8s

#endif  // MIGD_K8S_APISERVER_KUBE_CLIENT_H_
