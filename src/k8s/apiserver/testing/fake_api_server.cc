#include "k8s/apiserver/testing/fake_api_server.h"

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <exception>

#include "base/mutex.h"

namespace migd::k8s::testing {
namespace {

using Json = nlohmann::json;

Json StatusBody(int code, const std::string& reason, const std::string& message) {
  return Json{{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
              {"status", "Failure"}, {"message", message}, {"reason", reason},
              {"code", code}};
}

std::string ReasonOf(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 409:
      return "Conflict";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    default:
      return "InternalError";
  }
}

// The RBAC verb and resource a request needs: a GET of a collection is
// "list", of an object "get"; PATCH is "patch".
std::string VerbOf(const httplib::Request& req) {
  const std::string& p = req.path;
  const bool nodes = p.rfind("/api/v1/nodes", 0) == 0;
  const std::string resource = nodes ? "nodes" : "pods";
  const bool collection = p == "/api/v1/pods" || p == "/api/v1/nodes" ||
                          (p.size() > 5 && p.compare(p.size() - 5, 5, "/pods") == 0);
  if (req.method == "GET") return (collection ? "list " : "get ") + resource;
  std::string verb = req.method;
  for (char& c : verb) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return verb + " " + resource;
}

void Reply(httplib::Response& res, int code, const Json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void Error(httplib::Response& res, int code, const std::string& message) {
  Reply(res, code, StatusBody(code, ReasonOf(code), message));
}

}  // namespace

Json MakePod(const PodSpec& spec) {
  Json pod;
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod["metadata"] = {{"name", spec.name},
                     {"namespace", spec.ns},
                     {"uid", spec.uid},
                     {"annotations", Json::object()}};
  for (const auto& [k, v] : spec.annotations) pod["metadata"]["annotations"][k] = v;
  pod["spec"]["nodeName"] = spec.node;
  pod["spec"]["schedulerName"] = "hami-scheduler";
  auto container = [&spec](const std::string& name, const char* image) {
    Json c{{"name", name}, {"image", image}};
    auto it = spec.limits.find(name);
    if (it != spec.limits.end()) {
      for (const auto& [resource, quantity] : it->second) {
        c["resources"]["limits"][resource] = quantity;
        c["resources"]["requests"][resource] = quantity;
      }
    }
    return c;
  };
  for (const std::string& c : spec.containers) {
    pod["spec"]["containers"].push_back(container(c, "cuda:12"));
  }
  for (const std::string& c : spec.init_containers) {
    pod["spec"]["initContainers"].push_back(container(c, "busybox"));
  }
  pod["status"]["phase"] = spec.phase;
  return pod;
}

struct FakeApiServer::Impl {
  mutable Mutex mu;
  uint64_t rv ABSL_GUARDED_BY(mu) = 100;
  std::map<std::pair<std::string, std::string>, Json> pods ABSL_GUARDED_BY(mu);
  std::map<std::string, Json> nodes ABSL_GUARDED_BY(mu);
  std::string token ABSL_GUARDED_BY(mu);
  int fail_count ABSL_GUARDED_BY(mu) = 0;
  int fail_code ABSL_GUARDED_BY(mu) = 0;
  size_t padding ABSL_GUARDED_BY(mu) = 0;
  std::map<std::string, int> requests ABSL_GUARDED_BY(mu);
  std::set<std::string> verbs ABSL_GUARDED_BY(mu);
  int conflicts ABSL_GUARDED_BY(mu) = 0;
  std::function<void(const std::string&, const std::string&)> before_patch ABSL_GUARDED_BY(mu);
  std::function<void(const std::string&)> before_node_patch ABSL_GUARDED_BY(mu);

  std::string NextRv() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return std::to_string(++rv); }

  // Common checks; false if a reply was written.
  bool Admit(const httplib::Request& req, httplib::Response& res) {
    MutexLock lock(&mu);
    ++requests[req.method];
    verbs.insert(VerbOf(req));
    if (!token.empty() && req.get_header_value("Authorization") != "Bearer " + token) {
      Error(res, 401, "Unauthorized");
      return false;
    }
    if (fail_count > 0) {
      --fail_count;
      Error(res, fail_code, "injected failure");
      return false;
    }
    return true;
  }

  Json ListLocked(const std::string& ns, const std::string& selector)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::string node;
    if (!selector.empty()) {
      const std::string prefix = "spec.nodeName=";
      if (selector.rfind(prefix, 0) == 0) node = selector.substr(prefix.size());
    }
    Json list{{"apiVersion", "v1"},
              {"kind", "PodList"},
              {"metadata", {{"resourceVersion", std::to_string(rv)}}},
              {"items", Json::array()}};
    for (const auto& [key, pod] : pods) {
      if (!ns.empty() && key.first != ns) continue;
      if (!selector.empty() && pod["spec"].value("nodeName", "") != node) continue;
      list["items"].push_back(pod);
    }
    if (padding > 0) list["padding"] = std::string(padding, 'x');
    return list;
  }

  // Merge patch with the optimistic-concurrency check. Returns the HTTP code.
  int PatchLocked(Json& obj, const httplib::Request& req, httplib::Response& res,
                  const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (req.get_header_value("Content-Type").rfind("application/merge-patch+json", 0) != 0) {
      Error(res, 415, "the body of the request was in an unknown format");
      return 415;
    }
    Json patch;
    try {
      patch = Json::parse(req.body);
    } catch (const std::exception& e) {
      Error(res, 400, std::string("invalid JSON patch: ") + e.what());
      return 400;
    }
    if (patch.contains("metadata") && patch["metadata"].is_object() &&
        patch["metadata"].contains("resourceVersion") &&
        patch["metadata"]["resourceVersion"].is_string() &&
        patch["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]) {
      ++conflicts;
      Error(res, 409,
            "Operation cannot be fulfilled on " + what +
                ": the object has been modified; please apply your changes to the latest "
                "version and try again");
      return 409;
    }
    const Json name = obj["metadata"]["name"];
    const Json uid = obj["metadata"].value("uid", Json());
    obj.merge_patch(patch);
    // Immutable fields stay.
    obj["metadata"]["name"] = name;
    if (!uid.is_null()) obj["metadata"]["uid"] = uid;
    obj["metadata"]["resourceVersion"] = NextRv();
    Reply(res, 200, obj);
    return 200;
  }

  // PATCH /api/v1/namespaces/{ns}/pods/{name}, after the test's hook.
  void PatchPod(const httplib::Request& req, httplib::Response& res) ABSL_LOCKS_EXCLUDED(mu) {
    const std::string ns = req.matches[1], name = req.matches[2];
    std::function<void(const std::string&, const std::string&)> hook;
    {
      MutexLock lock(&mu);
      hook = std::move(before_patch);
      before_patch = nullptr;
    }
    if (hook) hook(ns, name);
    MutexLock lock(&mu);
    auto it = pods.find({ns, name});
    if (it == pods.end()) {
      Error(res, 404, "pods \"" + name + "\" not found");
      return;
    }
    PatchLocked(it->second, req, res, "pods \"" + name + "\"");
  }

  // PATCH /api/v1/nodes/{name}, after the test's hook.
  void PatchNode(const httplib::Request& req, httplib::Response& res) ABSL_LOCKS_EXCLUDED(mu) {
    const std::string name = req.matches[1];
    std::function<void(const std::string&)> hook;
    {
      MutexLock lock(&mu);
      hook = std::move(before_node_patch);
      before_node_patch = nullptr;
    }
    if (hook) hook(name);
    MutexLock lock(&mu);
    auto it = nodes.find(name);
    if (it == nodes.end()) {
      Error(res, 404, "nodes \"" + name + "\" not found");
      return;
    }
    PatchLocked(it->second, req, res, "nodes \"" + name + "\"");
  }
};

FakeApiServer::FakeApiServer() : impl_(std::make_unique<Impl>()) {}

FakeApiServer::~FakeApiServer() { Stop(); }

bool FakeApiServer::StartTls(const FakeTlsOptions& tls) {
  auto ssl = std::make_unique<httplib::SSLServer>(
      tls.cert_file.c_str(), tls.key_file.c_str(),
      tls.client_ca_file.empty() ? nullptr : tls.client_ca_file.c_str());
  if (!ssl->is_valid()) return false;
  server_ = std::move(ssl);
  tls_ = true;
  return Start();
}

bool FakeApiServer::Start() {
  if (!server_) server_ = std::make_unique<httplib::Server>();
  Impl* impl = impl_.get();
  auto list = [impl](const httplib::Request& req, httplib::Response& res) {
    if (!impl->Admit(req, res)) return;
    const std::string ns = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
    MutexLock lock(&impl->mu);
    Reply(res, 200, impl->ListLocked(ns, req.get_param_value("fieldSelector")));
  };
  server_->Get(R"(/api/v1/pods)", list);
  server_->Get(R"(/api/v1/namespaces/([^/]+)/pods)", list);
  server_->Get(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))",
               [impl](const httplib::Request& req, httplib::Response& res) {
                 if (!impl->Admit(req, res)) return;
                 MutexLock lock(&impl->mu);
                 auto it = impl->pods.find({req.matches[1], req.matches[2]});
                 if (it == impl->pods.end()) {
                   Error(res, 404, "pods \"" + std::string(req.matches[2]) + "\" not found");
                   return;
                 }
                 Reply(res, 200, it->second);
               });
  server_->Patch(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))",
                 [impl](const httplib::Request& req, httplib::Response& res) {
                   if (impl->Admit(req, res)) impl->PatchPod(req, res);
                 });
  server_->Get(R"(/api/v1/nodes/([^/]+))",
               [impl](const httplib::Request& req, httplib::Response& res) {
                 if (!impl->Admit(req, res)) return;
                 MutexLock lock(&impl->mu);
                 auto it = impl->nodes.find(req.matches[1]);
                 if (it == impl->nodes.end()) {
                   Error(res, 404, "nodes \"" + std::string(req.matches[1]) + "\" not found");
                   return;
                 }
                 Reply(res, 200, it->second);
               });
  server_->Patch(R"(/api/v1/nodes/([^/]+))",
                 [impl](const httplib::Request& req, httplib::Response& res) {
                   if (impl->Admit(req, res)) impl->PatchNode(req, res);
                 });
  for (const auto& install : extra_routes_) install(*server_);
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) return false;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // listen_after_bind sets is_running once it accepts; wait for it so that
  // the first request is not refused.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return server_->is_running();
}

void FakeApiServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string FakeApiServer::url() const {
  return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

void FakeApiServer::RequireToken(const std::string& token) {
  MutexLock lock(&impl_->mu);
  impl_->token = token;
}

void FakeApiServer::AddPod(const nlohmann::json& pod) {
  MutexLock lock(&impl_->mu);
  Json p = pod;
  p["metadata"]["resourceVersion"] = impl_->NextRv();
  p["metadata"]["creationTimestamp"] = "2026-11-29T10:00:00Z";
  // (Key first: the right side of `=` is evaluated before the left.)
  const std::pair<std::string, std::string> key{p["metadata"]["namespace"], p["metadata"]["name"]};
  impl_->pods[key] = std::move(p);
}

void FakeApiServer::AddNode(const std::string& name,
                            const std::map<std::string, std::string>& annotations) {
  MutexLock lock(&impl_->mu);
  Json n{{"apiVersion", "v1"}, {"kind", "Node"}};
  n["metadata"] = {{"name", name},
                   {"uid", "node-uid-" + name},
                   {"annotations", Json::object()},
                   {"resourceVersion", impl_->NextRv()}};
  for (const auto& [k, v] : annotations) n["metadata"]["annotations"][k] = v;
  n["status"]["capacity"] = Json::object();
  impl_->nodes[name] = std::move(n);
}

bool FakeApiServer::DeletePod(const std::string& ns, const std::string& name) {
  MutexLock lock(&impl_->mu);
  ++impl_->rv;
  return impl_->pods.erase({ns, name}) > 0;
}

bool FakeApiServer::UpdatePod(const std::string& ns, const std::string& name,
                              const std::function<void(nlohmann::json&)>& fn) {
  MutexLock lock(&impl_->mu);
  auto it = impl_->pods.find({ns, name});
  if (it == impl_->pods.end()) return false;
  fn(it->second);
  it->second["metadata"]["resourceVersion"] = impl_->NextRv();
  return true;
}

bool FakeApiServer::UpdateNode(const std::string& name,
                               const std::function<void(nlohmann::json&)>& fn) {
  MutexLock lock(&impl_->mu);
  auto it = impl_->nodes.find(name);
  if (it == impl_->nodes.end()) return false;
  fn(it->second);
  it->second["metadata"]["resourceVersion"] = impl_->NextRv();
  return true;
}

std::optional<nlohmann::json> FakeApiServer::GetPod(const std::string& ns,
                                                    const std::string& name) const {
  MutexLock lock(&impl_->mu);
  auto it = impl_->pods.find({ns, name});
  if (it == impl_->pods.end()) return std::nullopt;
  return it->second;
}

std::optional<nlohmann::json> FakeApiServer::GetNode(const std::string& name) const {
  MutexLock lock(&impl_->mu);
  auto it = impl_->nodes.find(name);
  if (it == impl_->nodes.end()) return std::nullopt;
  return it->second;
}

namespace {
std::optional<std::string> AnnotationOf(const Json& obj, const std::string& key) {
  const Json& a = obj["metadata"]["annotations"];
  if (!a.is_object() || !a.contains(key) || !a[key].is_string()) return std::nullopt;
  return a[key].get<std::string>();
}
}  // namespace

std::optional<std::string> FakeApiServer::PodAnnotation(const std::string& ns,
                                                        const std::string& name,
                                                        const std::string& key) const {
  std::optional<Json> p = GetPod(ns, name);
  if (!p) return std::nullopt;
  return AnnotationOf(*p, key);
}

std::optional<std::string> FakeApiServer::NodeAnnotation(const std::string& name,
                                                         const std::string& key) const {
  std::optional<Json> n = GetNode(name);
  if (!n) return std::nullopt;
  return AnnotationOf(*n, key);
}

void FakeApiServer::FailNext(int count, int code) {
  MutexLock lock(&impl_->mu);
  impl_->fail_count = count;
  impl_->fail_code = code;
}

void FakeApiServer::SetBeforePodPatch(
    std::function<void(const std::string& ns, const std::string& name)> fn) {
  MutexLock lock(&impl_->mu);
  impl_->before_patch = std::move(fn);
}

void FakeApiServer::SetBeforeNodePatch(std::function<void(const std::string& name)> fn) {
  MutexLock lock(&impl_->mu);
  impl_->before_node_patch = std::move(fn);
}

void FakeApiServer::SetListPadding(size_t bytes) {
  MutexLock lock(&impl_->mu);
  impl_->padding = bytes;
}

int FakeApiServer::requests(const std::string& method) const {
  MutexLock lock(&impl_->mu);
  auto it = impl_->requests.find(method);
  return it == impl_->requests.end() ? 0 : it->second;
}

std::set<std::string> FakeApiServer::verbs() const {
  MutexLock lock(&impl_->mu);
  return impl_->verbs;
}

void FakeApiServer::AddRoutes(std::function<void(httplib::Server&)> install) {
  extra_routes_.push_back(std::move(install));
}

int FakeApiServer::conflicts() const {
  MutexLock lock(&impl_->mu);
  return impl_->conflicts;
}

}  // namespace migd::k8s::testing
