#include "k8s/apiserver/kube_client.h"

#include <absl/strings/ascii.h>
#include <curl/curl.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <utility>

#include "base/file_util.h"
#include "base/json_reader.h"
#include "base/status_macros.h"

namespace migd::k8s {
namespace {

void GlobalInit() {
  // curl_global_init is not thread-safe; a function-local static runs it
  // once, before any handle, whichever thread comes first.
  static const CURLcode init = curl_global_init(CURL_GLOBAL_DEFAULT);
  (void)init;
}

struct Body {
  std::string data;
  size_t limit = 0;
  bool overflow = false;
};

size_t WriteCallback(char* ptr, size_t size, size_t nmemb, void* userdata) {
  Body* body = static_cast<Body*>(userdata);
  const size_t n = size * nmemb;
  if (body->data.size() + n > body->limit) {
    body->overflow = true;
    return 0;  // makes curl abort with CURLE_WRITE_ERROR
  }
  body->data.append(ptr, n);
  return n;
}

Status HttpError(long code, const std::string& what, const std::string& body) {
  std::string msg = what + ": HTTP " + std::to_string(code);
  // The API server answers errors with a Status object (kind Status); its
  // message is the actionable part (e.g. "the object has been modified").
  // A body that is not one is quoted, shortened.
  StatusOr<nlohmann::json> j = ParseJson(body, what);
  StatusOr<std::string> reason = InternalError("no Status");
  StatusOr<std::string> message = InternalError("no Status");
  if (j.ok()) {
    const JsonReader r(*j, what);
    reason = r.String("reason");
    message = r.String("message");
  }
  if (reason.ok()) msg += " " + *reason;
  if (message.ok()) {
    msg += ": " + *message;
  } else if (!reason.ok() && !body.empty()) {
    msg += ": " + body.substr(0, 200);
  }
  switch (code) {
    case 409:
      return AbortedError(msg + " (resourceVersion is stale: re-read the object and retry)");
    case 404:
      return NotFoundError(msg);
    case 401:
      return Status(StatusCode::kUnauthenticated, msg + " (check the service-account token)");
    case 403:
      return PermissionDeniedError(msg + " (check migd's RBAC role)");
    case 400:
    case 422:
      return InvalidArgumentError(msg);
    default:
      return UnavailableError(msg);
  }
}

// Follows symlinks: the kubelet mounts service-account files as links into a
// directory it swaps on rotation, and kubeconfigs are often linked too. These
// are credentials the operator placed, not files others can plant.
StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& what) {
  StatusOr<std::string> s = ReadFileFollowingSymlinks(path, 1 << 20);
  if (!s.ok()) return s.status().WithContext(what);
  return s;
}

}  // namespace

std::string UrlEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

StatusOr<std::string> Base64Decode(std::string_view in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    const int v = val(c);
    if (v < 0) return InvalidArgumentError(std::string("base64: invalid character '") + c + "'");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

StatusOr<KubeConfig> InClusterConfigFor(const std::string& host, const std::string& port,
                                        const std::string& sa_dir) {
  if (host.empty() || port.empty()) {
    return FailedPreconditionError(
        "KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT unset: not running in a pod; set "
        "kubernetes.kubeconfig instead");
  }
  KubeConfig c;
  // An IPv6 service address needs brackets in a URL.
  const bool v6 = host.find(':') != std::string::npos;
  c.server = "https://" + (v6 ? "[" + host + "]" : host) + ":" + port;
  StatusOr<std::string> token = ReadTextFile(sa_dir + "/token", "service-account token");
  if (!token.ok()) return FailedPreconditionError(token.status().message());
  c.token = std::string(absl::StripAsciiWhitespace(*token));
  c.ca_file = sa_dir + "/ca.crt";
  return c;
}

StatusOr<KubeConfig> InClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  return InClusterConfigFor(host ? host : "", port ? port : "", sa_dir);
}

StatusOr<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  MIGD_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, "kubeconfig " + path));
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto resolve = [&dir](const std::string& p) {
    return p.empty() || p[0] == '/' ? p : (dir / p).string();
  };
  try {
    YAML::Node root = YAML::Load(text);
    const std::string ctx_name =
        context.empty() ? root["current-context"].as<std::string>("") : context;
    if (ctx_name.empty()) {
      return InvalidArgumentError("kubeconfig " + path + ": no current-context");
    }
    auto find = [&root](const char* list, const std::string& name) -> YAML::Node {
      for (const YAML::Node& n : root[list]) {
        if (n["name"].as<std::string>("") == name) return n;
      }
      return YAML::Node();
    };
    YAML::Node ctx = find("contexts", ctx_name);
    if (!ctx || !ctx["context"]) {
      return InvalidArgumentError("kubeconfig " + path + ": context '" + ctx_name +
                                  "' not found in contexts");
    }
    const std::string cluster_name = ctx["context"]["cluster"].as<std::string>("");
    const std::string user_name = ctx["context"]["user"].as<std::string>("");
    YAML::Node cluster = find("clusters", cluster_name);
    if (!cluster || !cluster["cluster"]) {
      return InvalidArgumentError("kubeconfig " + path + ": cluster '" + cluster_name +
                                  "' of context '" + ctx_name + "' not found");
    }
    KubeConfig c;
    const YAML::Node cl = cluster["cluster"];
    c.server = cl["server"].as<std::string>("");
    if (c.server.empty()) {
      return InvalidArgumentError("kubeconfig " + path + ": clusters[" + cluster_name +
                                  "].cluster.server is empty");
    }
    c.ca_file = resolve(cl["certificate-authority"].as<std::string>(""));
    if (cl["certificate-authority-data"]) {
      StatusOr<std::string> ca = Base64Decode(cl["certificate-authority-data"].as<std::string>());
      if (!ca.ok())
        return ca.status().WithContext("kubeconfig " + path + ": certificate-authority-data");
      c.ca_data = *ca;
    }
    c.insecure_skip_tls_verify = cl["insecure-skip-tls-verify"].as<bool>(false);
    YAML::Node user = find("users", user_name);
    if (user && user["user"]) {
      const YAML::Node u = user["user"];
      c.token = u["token"].as<std::string>("");
      if (c.token.empty() && u["tokenFile"]) {
        MIGD_ASSIGN_OR_RETURN(std::string t, ReadTextFile(resolve(u["tokenFile"].as<std::string>()),
                                                          "kubeconfig tokenFile"));
        c.token = std::string(absl::StripAsciiWhitespace(t));
      }
      c.client_cert_file = resolve(u["client-certificate"].as<std::string>(""));
      c.client_key_file = resolve(u["client-key"].as<std::string>(""));
      for (const auto& [key, out] : {std::pair{"client-certificate-data", &c.client_cert_data},
                                     std::pair{"client-key-data", &c.client_key_data}}) {
        if (!u[key]) continue;
        StatusOr<std::string> d = Base64Decode(u[key].as<std::string>());
        if (!d.ok()) return d.status().WithContext("kubeconfig " + path + ": " + key);
        *out = *d;
      }
      if (u["exec"] || u["auth-provider"]) {
        return InvalidArgumentError("kubeconfig " + path + ": user '" + user_name +
                                    "' uses exec/auth-provider, which migd does not run; use a "
                                    "token or a client certificate");
      }
    } else if (!user_name.empty()) {
      return InvalidArgumentError("kubeconfig " + path + ": user '" + user_name + "' not found");
    }
    return c;
  } catch (const std::exception& e) {
    return InvalidArgumentError("kubeconfig " + path + ": " + e.what());
  }
}

StatusOr<std::unique_ptr<KubeClient>> KubeClient::Create(KubeConfig config) {
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    return InvalidArgumentError("API server URL '" + config.server +
                                "' must start with https:// or http://");
  }
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  GlobalInit();
  return std::unique_ptr<KubeClient>(new KubeClient(std::move(config)));
}

StatusOr<nlohmann::json> KubeClient::Request(const std::string& method, const std::string& path,
                                             const std::string& body,
                                             const std::string& content_type) {
  const std::string url = config_.server + path;
  const std::string what = method + " " + url;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return InternalError(what + ": curl_easy_init failed");
  struct curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  if (!config_.token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + config_.token).c_str());
  }
  if (!content_type.empty()) {
    headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
  }
  Body out;
  out.limit = config_.max_response_bytes;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteCallback);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(config_.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(config_.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  if (!body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  if (!config_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, config_.ca_file.c_str());
  curl_blob ca_blob{const_cast<char*>(config_.ca_data.data()), config_.ca_data.size(),
                    CURL_BLOB_NOCOPY};
  if (!config_.ca_data.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca_blob);
  if (!config_.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
  }
  if (!config_.client_key_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY, config_.client_key_file.c_str());
  }
  curl_blob cert_blob{const_cast<char*>(config_.client_cert_data.data()),
                      config_.client_cert_data.size(), CURL_BLOB_NOCOPY};
  curl_blob key_blob{const_cast<char*>(config_.client_key_data.data()),
                     config_.client_key_data.size(), CURL_BLOB_NOCOPY};
  if (!config_.client_cert_data.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert_blob);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
  }
  if (!config_.client_key_data.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key_blob);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  const CURLcode rc = curl_easy_perform(curl);
  long http = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (out.overflow) {
    return ResourceExhaustedError(what + ": response larger than " +
                                  std::to_string(config_.max_response_bytes) + " bytes");
  }
  if (rc != CURLE_OK) {
    const std::string detail = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    if (rc == CURLE_OPERATION_TIMEDOUT) {
      return DeadlineExceededError(what + ": timed out: " + detail);
    }
    return UnavailableError(what + ": " + detail);
  }
  if (http < 200 || http >= 300) return HttpError(http, what, out.data);
  return ParseJson(out.data, what + ": HTTP " + std::to_string(http), StatusCode::kDataLoss);
}

StatusOr<nlohmann::json> KubeClient::GetPod(const std::string& ns, const std::string& name) {
  return Request("GET", "/api/v1/namespaces/" + UrlEncode(ns) + "/pods/" + UrlEncode(name));
}

StatusOr<nlohmann::json> KubeClient::ListPods(const std::string& node_name) {
  return Request("GET", "/api/v1/pods?fieldSelector=" + UrlEncode("spec.nodeName=" + node_name));
}

StatusOr<nlohmann::json> KubeClient::PatchPod(const std::string& ns, const std::string& name,
                                              const nlohmann::json& patch) {
  return Request("PATCH", "/api/v1/namespaces/" + UrlEncode(ns) + "/pods/" + UrlEncode(name),
                 patch.dump(), "application/merge-patch+json");
}

StatusOr<nlohmann::json> KubeClient::GetNode(const std::string& name) {
  return Request("GET", "/api/v1/nodes/" + UrlEncode(name));
}

StatusOr<nlohmann::json> KubeClient::PatchNode(const std::string& name,
                                               const nlohmann::json& patch) {
  return Request("PATCH", "/api/v1/nodes/" + UrlEncode(name), patch.dump(),
                 "application/merge-patch+json");
}

}  // namespace migd::k8s
