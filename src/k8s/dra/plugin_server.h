// File: k8s/dra/plugin_server.h
//
// DraPluginServer: migd as a kubelet DRA plugin. Two unix sockets:
//
//   <registry_dir>/<driver>-reg.sock   pluginregistration.Registration
//       (kubelet's plugin watcher finds the socket, calls GetInfo with a 1 s
//       deadline and then NotifyRegistrationStatus). GetInfo answers from
//       memory: type "DRAPlugin", name = the driver name (kubelet matches it
//       to the claims' results[].driver), endpoint = the DRA socket's
//       absolute path, supported_versions = "v1.DRAPlugin",
//       "v1beta1.DRAPlugin" and, with a health reporter,
//       "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth". Kubelet takes
//       the first DRAPlugin entry it knows and ignores the others
//       (kubernetes pkg/kubelet/cm/dra/plugin validateSupportedServices:
//       1.34+ knows v1 and v1beta1, 1.32-1.33 v1beta1 only).
//   <plugin_dir>/dra.sock              k8s.io.kubelet.pkg.apis.dra.v1 and
//       .v1beta1 DRAPlugin (one handler), and with a health reporter
//       v1alpha1 and v1 DRAResourceHealth.
// Defaults are kubelet's: /var/lib/kubelet/plugins_registry and
// /var/lib/kubelet/plugins/<driver> (k8s.io/dynamic-resource-allocation
// kubeletplugin KubeletRegistryDir, KubeletPluginsDir).
//
// Lifecycle: Start() serves the DRA socket first, then the registration
// socket (kubelet may connect as soon as the latter exists). A stale socket
// file at either path is removed first; anything else there is an error. A
// watcher thread checks both files every watch_period: when one is gone or
// replaced (its directory wiped or recreated), that server is restarted on a
// fresh socket, which kubelet's watcher sees as a new plugin. A kubelet
// restart needs nothing from us: kubelet walks plugins_registry at start and
// registers the sockets it finds; every successful NotifyRegistrationStatus
// runs `on_registered` (the daemon republishes the slices kubelet deleted at
// its start). Stop() shuts both servers down (in-flight calls get 2 s) and
// removes the sockets that are still ours.
//
// NodePrepareResources / NodeUnprepareResources: each claim of the request is
// handed to the ClaimHandler (sequentially); every claim gets an entry in
// the response map keyed by its UID, with the devices or the error string.
// A claim without uid is answered with an error entry under its name.
//
// NodeWatchResources: the reporter's complete device list at once, then on
// every change the health source announces, and every health_heartbeat (so
// kubelet never times a device out to Unknown; its default timeout is 30 s,
// pkg/kubelet/cm/dra/healthinfo.go). Ends when the server stops or kubelet
// cancels.
//
// Thread-safety: all public methods may be called from any thread.
#ifndef MIGD_K8S_DRA_PLUGIN_SERVER_H_
#define MIGD_K8S_DRA_PLUGIN_SERVER_H_

#include <absl/base/thread_annotations.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "k8s/dra/claim_handler.h"
#include "k8s/dra/health.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace migd::k8s::dra {

inline constexpr char kDefaultRegistryDir[] = "/var/lib/kubelet/plugins_registry";
inline constexpr char kDefaultPluginsDir[] = "/var/lib/kubelet/plugins";

struct DraPluginOptions {
  std::string driver;  // required: the DRA driver name
  std::string registry_dir = kDefaultRegistryDir;
  // "" = <kDefaultPluginsDir>/<driver>.
  std::string plugin_dir;
  // "" = <driver>-reg.sock.
  std::string registration_socket_name;
  std::string dra_socket_name = "dra.sock";
  std::chrono::milliseconds watch_period{1000};
  std::chrono::milliseconds health_heartbeat{10000};
};

class DraPluginServer {
 public:
  // `handler` (required) and `health.source` (may be null) are not owned
  // and must outlive the server. `on_registered` may be empty.
  // Errors: kInvalidArgument (options, socket path too long),
  // kFailedPrecondition (a directory not creatable, a non-socket at a socket
  // path), kUnavailable (bind failed).
  static StatusOr<std::unique_ptr<DraPluginServer>> Start(DraPluginOptions options,
                                                          ClaimHandler* handler, HealthFeed health,
                                                          std::function<void()> on_registered);
  ~DraPluginServer();
  DraPluginServer(const DraPluginServer&) = delete;
  DraPluginServer& operator=(const DraPluginServer&) = delete;

  void Stop();

  std::string registration_socket() const;
  std::string dra_socket() const;
  // The supported_versions GetInfo sends.
  std::vector<std::string> supported_versions() const;
  // NotifyRegistrationStatus calls with plugin_registered = true / false.
  int registrations() const;
  int rejections() const;
  // Times each socket was served (the first included).
  int registration_serves() const;
  int dra_serves() const;

 private:
  class Registration;
  class Dra;
  struct Served {
    std::unique_ptr<grpc::Server> server;
    dev_t dev = 0;
    ino_t ino = 0;
  };

  DraPluginServer(DraPluginOptions options, ClaimHandler* handler, HealthFeed health,
                  std::function<void()> on_registered);
  bool has_health() const { return health_.source != nullptr; }
  Status ServeDra() ABSL_EXCLUSIVE_LOCKS_REQUIRED(serve_mu_);
  Status ServeRegistration() ABSL_EXCLUSIVE_LOCKS_REQUIRED(serve_mu_);
  void Shutdown(Served& s, const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(serve_mu_);
  bool StillOurs(const Served& s, const std::string& path) const;
  void WatchLoop();
  // The health streams' wake-up (a change or Stop).
  void HealthChanged();
  // One NodeWatchResources stream: `write` sends a complete list (false:
  // the stream is gone); `cancelled` polls the call.
  void StreamHealth(const std::function<bool(const std::vector<DeviceHealthReport>&)>& write,
                    const std::function<bool()>& cancelled);

  const DraPluginOptions options_;
  ClaimHandler* const handler_;
  const HealthFeed health_;
  const std::function<void()> on_registered_;
  std::unique_ptr<Registration> registration_service_;
  std::unique_ptr<Dra> dra_service_;
  uint64_t health_listener_ = 0;

  Mutex serve_mu_;
  Served registration_ ABSL_GUARDED_BY(serve_mu_);
  Served dra_ ABSL_GUARDED_BY(serve_mu_);

  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t health_generation_ ABSL_GUARDED_BY(mu_) = 0;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  int rejections_ ABSL_GUARDED_BY(mu_) = 0;
  int registration_serves_ ABSL_GUARDED_BY(mu_) = 0;
  int dra_serves_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread watcher_;
};

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_PLUGIN_SERVER_H_
