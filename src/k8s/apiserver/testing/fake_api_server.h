// File: k8s/apiserver/testing/fake_api_server.h
//
// FakeApiServer: an in-process Kubernetes API server over plain HTTP
// (cpp-httplib) on 127.0.0.1, for tests of KubeClient, HamiBackend and the
// end-to-end flow. It serves the real JSON shapes of Pod, PodList, Node and
// Status:
//   GET   /api/v1/pods[?fieldSelector=spec.nodeName=N]
//   GET   /api/v1/namespaces/{ns}/pods[?fieldSelector=...]
//   GET   /api/v1/namespaces/{ns}/pods/{name}
//   PATCH /api/v1/namespaces/{ns}/pods/{name}   (application/merge-patch+json)
//   GET   /api/v1/nodes/{name}
//   PATCH /api/v1/nodes/{name}                  (application/merge-patch+json)
// PATCH applies RFC 7386 (null deletes); a metadata.resourceVersion in the
// patch that differs from the object's -> 409 Conflict (reason Conflict),
// as the real API server does; every write bumps a global resourceVersion.
// Another content type -> 415. A required bearer token (optional) -> 401.
// Tests can inject failures (next N requests answer a code) and hooks that
// run before a PATCH is applied (to simulate a concurrent writer).
//
// Thread-safety: all methods are thread-safe.
#ifndef MIGD_K8S_APISERVER_TESTING_FAKE_API_SERVER_H_
#define MIGD_K8S_APISERVER_TESTING_FAKE_API_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace migd::k8s::testing {

struct PodSpec {
  std::string ns = "default";
  std::string name;
  std::string uid;
  std::string node;
  std::vector<std::string> containers = {"main"};
  std::vector<std::string> init_containers;
  std::map<std::string, std::string> annotations;
  std::string phase = "Pending";
  // resources.limits per container name, e.g. {"main", {{"nvidia.com/gpu", "1"}}}.
  std::map<std::string, std::map<std::string, std::string>> limits;
};

// A Pod object as the API server returns it.
nlohmann::json MakePod(const PodSpec& spec);

// HTTPS instead of plain HTTP (files in PEM). With `client_ca_file` the
// server demands a client certificate signed by that CA.
struct FakeTlsOptions {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
};

class FakeApiServer {
 public:
  FakeApiServer();
  ~FakeApiServer();  // Stop()
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  // Binds 127.0.0.1 on a free port and serves on a thread. Returns false if
  // binding failed (or the TLS files are unusable).
  bool Start();
  bool StartTls(const FakeTlsOptions& tls);
  void Stop();
  // "http://127.0.0.1:<port>" ("https://..." after StartTls).
  std::string url() const;
  int port() const { return port_; }

  // Requests must carry "Authorization: Bearer <token>" (empty = no check).
  void RequireToken(const std::string& token);

  // Objects. Adding sets metadata.resourceVersion (and creationTimestamp).
  void AddPod(const nlohmann::json& pod);
  void AddNode(const std::string& name, const std::map<std::string, std::string>& annotations = {});
  bool DeletePod(const std::string& ns, const std::string& name);
  // Applies `fn` to the stored pod (node) and bumps its resourceVersion (a
  // write by someone else). False if the object does not exist.
  bool UpdatePod(const std::string& ns, const std::string& name,
                 const std::function<void(nlohmann::json&)>& fn);
  bool UpdateNode(const std::string& name, const std::function<void(nlohmann::json&)>& fn);
  std::optional<nlohmann::json> GetPod(const std::string& ns, const std::string& name) const;
  std::optional<nlohmann::json> GetNode(const std::string& name) const;
  std::optional<std::string> PodAnnotation(const std::string& ns, const std::string& name,
                                           const std::string& key) const;
  std::optional<std::string> NodeAnnotation(const std::string& name, const std::string& key) const;

  // The next `count` requests answer `code` with a Status body.
  void FailNext(int count, int code);
  // Runs once, before the next pod PATCH is applied (under no lock).
  void SetBeforePodPatch(std::function<void(const std::string& ns, const std::string& name)> fn);
  // The same before the next node PATCH.
  void SetBeforeNodePatch(std::function<void(const std::string& name)> fn);
  // Extra padding bytes appended (as a JSON field) to every pod list.
  void SetListPadding(size_t bytes);

  // Counts of handled requests by "METHOD" and of 409 answers.
  int requests(const std::string& method) const;
  int conflicts() const;
  // The RBAC verbs the requests so far needed, as "<verb> <resource>":
  // "get pods", "list pods", "patch pods", "get nodes", "patch nodes".
  std::set<std::string> verbs() const;

  // Extra routes installed on the server at Start() (call before it), e.g.
  // the resource.k8s.io objects of k8s/dra/testing/fake_resource_api.h. They
  // do their own bookkeeping (not counted by requests()).
  void AddRoutes(std::function<void(httplib::Server&)> install);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<httplib::Server> server_;
  std::vector<std::function<void(httplib::Server&)>> extra_routes_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace migd::k8s::testing

#endif  // MIGD_K8S_APISERVER_TESTING_FAKE_API_SERVER_H_
