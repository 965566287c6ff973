// File: k8s/dra/testing/fake_dra_kubelet.h
//
// FakeDraKubelet: the kubelet side of DRA for tests, written from the public
// protos (dra v1/v1beta1, dra-health v1alpha1/v1, pluginregistration v1) and
// kubelet's behaviour (kubernetes pkg/kubelet/pluginmanager and
// pkg/kubelet/cm/dra/plugin):
//   - Discover() walks the registry directory like the plugin watcher: every
//     socket whose name does not start with '.' and that is not registered
//     yet is dialled; GetInfo with a 1 s deadline; type must be "DRAPlugin";
//     an empty endpoint means the registration socket; the DRA service is the
//     first entry of supported_versions kubelet knows (v1.DRAPlugin and
//     v1beta1.DRAPlugin by default, as 1.34+; v1beta1 only models 1.32/1.33);
//     none -> NotifyRegistrationStatus(false, error); a second registration
//     of the same endpoint for a driver is refused; otherwise
//     NotifyRegistrationStatus(true);
//   - health (the ResourceHealthStatus gate): kAlways opens
//     /v1alpha1.DRAResourceHealth/NodeWatchResources on every plugin (1.34-
//     1.36); kAdvertised picks v1, else v1alpha1, from supported_versions and
//     none if neither is listed (kubelet master's pickHealthService); the
//     latest complete list per driver is kept;
//   - Prepare/Unprepare call the chosen service with kubelet's 45 s deadline;
//     v1beta1 answers are converted to v1 for the caller;
//   - Restart(): a kubelet restart: every connection and stream is dropped,
//     `on_start` runs (kubelet deletes its node's ResourceSlices before any
//     driver registers), then Discover() registers the sockets it finds.
// Wait* helpers poll with generous deadlines (no timing assertions).
//
// Thread-safety: all methods may be called from any thread.
#ifndef MIGD_K8S_DRA_TESTING_FAKE_DRA_KUBELET_H_
#define MIGD_K8S_DRA_TESTING_FAKE_DRA_KUBELET_H_

#include <absl/base/thread_annotations.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "k8s.io/kubelet/pkg/apis/dra-health/v1/api.pb.h"
#include "k8s.io/kubelet/pkg/apis/dra/v1/api.pb.h"

namespace migd::k8s::dra::testing {

enum class HealthMode { kOff, kAlways, kAdvertised };

struct FakeDraKubeletOptions {
  std::string registry_dir;
  std::vector<std::string> known_services = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};
  HealthMode health = HealthMode::kOff;
  std::function<void()> on_start;  // runs before every Discover of Start/Restart
  std::chrono::milliseconds get_info_timeout{1000};
  std::chrono::milliseconds call_timeout{45000};
};

struct RegisteredPlugin {
  std::string socket;
  std::string name;
  std::string endpoint;
  std::vector<std::string> supported_versions;
  std::string service;         // chosen DRA service
  std::string health_service;  // "" = no stream
};

struct ClaimRequest {
  std::string ns;
  std::string name;
  std::string uid;
};

class FakeDraKubelet {
 public:
  static constexpr std::chrono::seconds kDefaultWait{30};

  static StatusOr<std::unique_ptr<FakeDraKubelet>> Start(FakeDraKubeletOptions options);
  ~FakeDraKubelet();
  FakeDraKubelet(const FakeDraKubelet&) = delete;
  FakeDraKubelet& operator=(const FakeDraKubelet&) = delete;

  // Registers every new socket, and every socket replaced since its
  // registration (a new file at the path: the plugin restarted; the old
  // registration is dropped, as kubelet's watcher sees the new file); the
  // first error (others are still tried).
  Status Discover();
  Status Restart();

  std::vector<RegisteredPlugin> plugins() const;
  int registrations() const;                  // successful, across restarts
  std::vector<std::string> refusals() const;  // errors sent with plugin_registered=false

  grpc::Status Prepare(const std::string& driver, const std::vector<ClaimRequest>& claims,
                       ::k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourcesResponse* out);
  grpc::Status Unprepare(
      const std::string& driver, const std::vector<ClaimRequest>& claims,
      ::k8s::io::kubelet::pkg::apis::dra::v1::NodeUnprepareResourcesResponse* out);

  // The latest health list of `driver` (v1alpha1 lists converted to v1) and
  // how many lists arrived for it.
  std::vector<::v1::DeviceHealth> health(const std::string& driver) const;
  int health_updates(const std::string& driver) const;
  bool WaitForHealth(const std::string& driver,
                     const std::function<bool(const std::vector<::v1::DeviceHealth>&)>& pred,
                     std::chrono::milliseconds timeout = kDefaultWait) const;
  bool WaitForHealthUpdates(const std::string& driver, int n,
                            std::chrono::milliseconds timeout = kDefaultWait) const;

 private:
  struct Plugin;
  explicit FakeDraKubelet(FakeDraKubeletOptions options) : options_(std::move(options)) {}
  Status RegisterSocket(const std::string& socket);
  std::string ChooseServices(RegisteredPlugin& info) const;
  void StartHealth(Plugin& p);
  void DropAll();
  std::shared_ptr<Plugin> Find(const std::string& driver) const;

  const FakeDraKubeletOptions options_;
  Mutex register_mu_;  // one registration / restart at a time
  mutable Mutex mu_;
  mutable CondVar cv_;
  std::vector<std::shared_ptr<Plugin>> plugins_ ABSL_GUARDED_BY(mu_);
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> refusals_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<::v1::DeviceHealth>> health_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> health_updates_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::k8s::dra::testing

#endif  // MIGD_K8S_DRA_TESTING_FAKE_DRA_KUBELET_H_
