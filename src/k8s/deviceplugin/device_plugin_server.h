// File: k8s/deviceplugin/device_plugin_server.h
//
// DevicePluginServer: migd as a kubelet device plugin, API v1beta1
// (kubelet's deviceplugin/v1beta1 api.proto and its device manager). The server owns the kubelet
// protocol; what the ids mean and how a container gets its MIG instances is
// the AllocationBackend's business (k8s/allocation_backend.h).
//
// Lifecycle:
//   - Start() creates the plugin directory if missing, removes a stale file
//     at <plugin_dir>/<socket_name>, serves DevicePlugin on that socket on
//     gRPC's own threads, and only then starts the watcher thread, whose first
//     act is Register with kubelet (version "v1beta1", endpoint = the socket
//     file name, resource_name, options identical to GetDevicePluginOptions).
//     Start does not wait for Register: kubelet may be down, and kubelet dials
//     back inside Register, so the caller must be free to do its slow work
//     (recovery, reconciliation) while registration proceeds. Start fails only
//     on bad options or when the socket cannot be served.
//   - Register failures are retried with bounded exponential backoff
//     (register_retry_initial .. register_retry_max).
//   - Re-registration: the watcher observes the plugin directory (inotify,
//     plus a stat() check every watch_period because inotify misses events
//     when the directory itself is replaced). When kubelet.sock is created
//     anew (kubelet restarted; identity = device, inode and ctime) or our
//     socket is removed or replaced (kubelet's CleanupPluginDirectory), the
//     server is restarted on a fresh socket and Register is called again at
//     once, before anything else. A restart gives in-flight calls on the old
//     socket 2 s, then cancels them (their kubelet is gone; Allocate then
//     behaves as on cancellation below).
//   - Stop() ends ListAndWatch streams, shuts the gRPC server down, removes
//     our socket file if it is still the one we bound, and waits for
//     abandoned backend calls (see Allocate). Idempotent; the destructor
//     calls it.
//
// RPCs:
//   - GetDevicePluginOptions: the configured options (the same as sent in
//     RegisterRequest.options).
//   - ListAndWatch: the complete backend Devices() list at once, then again
//     whenever the backend calls its devices-changed callback, and whenever a
//     periodic re-read (list_refresh_period) finds a different list, e.g. a
//     health change the backend did not announce. The stream ends when the
//     server stops or restarts or kubelet cancels it.
//   - Allocate: every ContainerAllocateRequest (kubelet sends exactly one) is
//     passed to AllocationBackend::AllocateContainer; the response holds one
//     ContainerAllocateResponse per request with cdi_devices, envs, devices
//     (DeviceSpec from device_nodes) and annotations. A backend error fails
//     the call with the backend's code and message. Empty requests are
//     INVALID_ARGUMENT.
//     Deadline: kubelet sets none, so the whole call is bounded by
//     allocate_timeout. When it passes, Allocate returns DEADLINE_EXCEEDED
//     and the backend call keeps running to completion on its own thread (a
//     MIG create cannot be interrupted safely); its result is discarded and
//     logged. Whatever it realised stays with the backend. With the HAMi
//     backend a late success has already patched the pod (identity written,
//     the container's entry erased, bind-phase success), so kubelet's retry
//     of that container fails with FAILED_PRECONDITION ("no pod ... is being
//     bound") and the pod must be recreated; a late failure marked the pod
//     failed. The same applies when kubelet cancels the call. Hence the
//     generous default (60 s) against seconds-scale MIG creates.
//   - GetPreferredAllocation: AllocationBackend::PreferredAllocation per
//     container request; UNIMPLEMENTED when the option is off.
//   - PreStartContainer: no-op success when pre_start_required is set;
//     UNIMPLEMENTED otherwise (kubelet only calls it when enabled).
//
// Example (daemon wiring; the backend must outlive the server):
//   MIGD_ASSIGN_OR_RETURN(auto plugin, k8s::DevicePluginServer::Start(
//       {.resource_name = "nvidia.com/gpu"}, &hami_backend));
//   ... slow recovery work ...
//   on SIGTERM: plugin->Stop();
//
// Thread-safety: all public methods may be called from any thread.
#ifndef MIGD_K8S_DEVICEPLUGIN_DEVICE_PLUGIN_SERVER_H_
#define MIGD_K8S_DEVICEPLUGIN_DEVICE_PLUGIN_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "base/status.h"
#include "k8s/allocation_backend.h"

namespace grpc {
class ClientContext;
class Server;
}  // namespace grpc

namespace migd::k8s {

struct DevicePluginOptions {
  // kubelet's device-plugin directory; kubelet.sock lives here and our
  // socket is created here.
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  // Our socket's file name (RegisterRequest.endpoint). No '/'.
  std::string socket_name = "migd-mig.sock";
  // kubelet's registration socket inside plugin_dir.
  std::string kubelet_socket_name = "kubelet.sock";
  // Extended resource, domain/name. HAMi's scheduler counts nvidia.com/gpu
  // (hami.md §1, MIG strategy `none`).
  std::string resource_name = "nvidia.com/gpu";
  bool pre_start_required = false;
  bool get_preferred_allocation_available = true;
  // Bound of one Allocate call (kubelet sets no deadline).
  std::chrono::milliseconds allocate_timeout{60000};
  // Deadline of one Register call (kubelet's own dial-back takes up to 10 s).
  std::chrono::milliseconds register_timeout{15000};
  std::chrono::milliseconds register_retry_initial{250};
  std::chrono::milliseconds register_retry_max{30000};
  // stat() fallback period of the directory watch.
  std::chrono::milliseconds watch_period{1000};
  // ListAndWatch re-reads Devices() this often and sends if it changed.
  std::chrono::milliseconds list_refresh_period{10000};
};

class DevicePluginServer {
 public:
  // Validates options, serves the socket and starts registration (above).
  // `backend` is not owned and must outlive the server; its devices-changed
  // callback is set here. Errors: kInvalidArgument (options),
  // kFailedPrecondition (directory not creatable, path not a socket),
  // kUnavailable (bind failed).
  static StatusOr<std::unique_ptr<DevicePluginServer>> Start(DevicePluginOptions options,
                                                             AllocationBackend* backend);
  ~DevicePluginServer();
  DevicePluginServer(const DevicePluginServer&) = delete;
  DevicePluginServer& operator=(const DevicePluginServer&) = delete;

  void Stop();

  const DevicePluginOptions& options() const { return options_; }
  std::string socket_path() const;
  // Successful Register calls so far (for status and tests).
  int registrations() const;
  // Times the server was (re)started on a fresh socket, the first included.
  int serves() const;
  // The result of the latest Register attempt (OK before the first one).
  Status last_register_status() const;

 private:
  class Service;
  struct Notifier;
  struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
    int64_t ctime_ns = 0;
    bool exists = false;
    friend bool operator==(const FileId&, const FileId&) = default;
  };

  DevicePluginServer(DevicePluginOptions options, AllocationBackend* backend);
  std::string kubelet_socket_path() const;
  static FileId Identify(const std::string& path);
  // Removes a stale socket and serves a fresh one. REQUIRES: no server runs.
  Status Serve() ABSL_LOCKS_EXCLUDED(serve_mu_);
  // Ends streams and shuts the current server down, removes our socket if
  // it is still ours.
  void StopServing() ABSL_LOCKS_EXCLUDED(serve_mu_);
  Status Register() ABSL_LOCKS_EXCLUDED(mu_);
  void WatchLoop();
  // The watcher's state between rounds.
  struct WatchState;
  // One round of the watcher: detect a kubelet restart or the loss of our
  // socket, restart serving and register as due.
  void WatchRound(WatchState* w);
  // Waits for an inotify event, a wake-up, the stat() period or the next
  // retry, whichever comes first.
  void WatchWait(WatchState* w);

  const DevicePluginOptions options_;
  AllocationBackend* const backend_;
  const std::shared_ptr<Notifier> notifier_;

  // Serialises Serve/StopServing/Stop (watcher thread vs. Stop).
  Mutex serve_mu_;
  std::unique_ptr<Service> service_ ABSL_GUARDED_BY(serve_mu_);
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(serve_mu_);
  FileId our_socket_ ABSL_GUARDED_BY(serve_mu_);

  mutable Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  int serves_ ABSL_GUARDED_BY(mu_) = 0;
  Status last_register_status_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* register_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  int inflight_backend_calls_ ABSL_GUARDED_BY(mu_) = 0;
  CondVar inflight_cv_;

  int wake_fd_ = -1;     // eventfd: Stop wakes the watcher
  int inotify_fd_ = -1;  // -1 when inotify is unavailable (stat only)
  std::thread watcher_;
  std::once_flag stop_once_;
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_DEVICEPLUGIN_DEVICE_PLUGIN_SERVER_H_
