// File: k8s/testing/fake_kubelet.h
//
// FakeKubelet: the kubelet side of the device plugin API v1beta1 over real
// unix sockets in a (temp) directory, behaving as kubelet does
// (kubelet's device manager, pkg/kubelet/cm/devicemanager):
//   - serves Registration on <dir>/kubelet.sock; Register checks the
//     version and the resource name with kubelet's own rules
//     (k8s/resource_name.h) and answers as kubelet does (UNKNOWN with
//     kubelet's error text, e.g. `the ResourceName "gpu" is invalid`), then
//     DIALS BACK <dir>/<endpoint> synchronously (blocking dial, 10 s; the
//     endpoint is joined to the directory unchecked, as kubelet does) and
//     calls GetDevicePluginOptions; if either fails, Register fails with
//     UNKNOWN "failed to dial device plugin: …" / "failed to get device
//     plugin options: …". On success it records the request and opens
//     ListAndWatch, keeping the latest full list (a new registration of the
//     same resource replaces the previous stream, as kubelet replaces the
//     endpoint);
//   - Allocate sends exactly one ContainerAllocateRequest per call;
//     GetPreferredAllocation one container request; PreStartContainer the
//     ids of one container; all to the latest registered endpoint;
//   - Restart() behaves like a kubelet restart: the old server and its
//     streams go away, the socket files in the directory are deleted
//     (CleanupPluginDirectory; optional so a test can isolate the
//     "kubelet.sock recreated" signal), and a new server listens on a fresh
//     kubelet.sock.
// The Wait* helpers poll conditions with generous deadlines (no timing
// assertions).
//
// Thread-safety: all methods may be called from any thread.
#ifndef MIGD_K8S_TESTING_FAKE_KUBELET_H_
#define MIGD_K8S_TESTING_FAKE_KUBELET_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.grpc.pb.h"

namespace migd::k8s::testing {

class FakeKubelet {
 public:
  static constexpr std::chrono::seconds kDefaultWait{30};

  // Serves <plugin_dir>/kubelet.sock. `dial_timeout` bounds the dial-back
  // and GetDevicePluginOptions (kubelet: 10 s; tests of a failing dial-back
  // may shorten it). kUnavailable when it cannot bind.
  static StatusOr<std::unique_ptr<FakeKubelet>> Start(
      const std::string& plugin_dir,
      std::chrono::milliseconds dial_timeout = std::chrono::seconds(10));
  ~FakeKubelet();
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  // A kubelet restart (above). Registrations recorded so far are kept.
  Status Restart(bool cleanup_plugin_sockets = true);
  // Stops serving and removes kubelet.sock (kubelet down).
  void Stop();

  std::string kubelet_socket() const { return plugin_dir_ + "/kubelet.sock"; }

  // Makes the next Register calls fail with `status` (before the dial-back),
  // or succeed again with nullopt.
  void SetRegisterFailure(std::optional<grpc::Status> status);

  // Successful registrations, in order (kept across Restart()).
  std::vector<v1beta1::RegisterRequest> registrations() const;
  // Register calls received, failed ones included.
  int register_calls() const;
  // What the plugin's GetDevicePluginOptions said at the last registration.
  std::optional<v1beta1::DevicePluginOptions> dialed_options() const;
  // The latest ListAndWatch list and how many lists arrived on all streams.
  std::vector<v1beta1::Device> devices() const;
  int list_updates() const;
  // True from the first list of the latest registration's ListAndWatch
  // stream until that stream ends. devices() is cleared at each
  // registration.
  bool stream_open() const;

  bool WaitForRegistration(int n, std::chrono::milliseconds timeout = kDefaultWait) const;
  bool WaitForDevices(const std::function<bool(const std::vector<v1beta1::Device>&)>& predicate,
                      std::chrono::milliseconds timeout = kDefaultWait) const;
  bool WaitForListUpdates(int n, std::chrono::milliseconds timeout = kDefaultWait) const;
  bool WaitForStreamClosed(std::chrono::milliseconds timeout = kDefaultWait) const;

  // Calls on the latest registered endpoint. FAILED_PRECONDITION when no
  // plugin registered.
  grpc::Status Allocate(const std::vector<std::string>& device_ids,
                        v1beta1::ContainerAllocateResponse* response);
  // Sends `request` as is (e.g. zero or several containers) for error tests.
  grpc::Status AllocateRaw(const v1beta1::AllocateRequest& request,
                           v1beta1::AllocateResponse* response);
  grpc::Status GetPreferredAllocation(const std::vector<std::string>& available,
                                      const std::vector<std::string>& must_include, int size,
                                      std::vector<std::string>* device_ids);
  grpc::Status PreStartContainer(const std::vector<std::string>& device_ids);

 private:
  class Registration;
  struct Endpoint {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
    std::unique_ptr<grpc::ClientContext> stream_context;
    std::thread stream_thread;
  };

  FakeKubelet(std::string plugin_dir, std::chrono::milliseconds dial_timeout);
  Status Serve() ABSL_EXCLUSIVE_LOCKS_REQUIRED(server_mu_);
  void StopServer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(server_mu_);
  // Register's body, on a gRPC handler thread.
  grpc::Status HandleRegister(const v1beta1::RegisterRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_, register_mu_);
  // kubelet's checks of the request (version, resource name).
  static grpc::Status Validate(const v1beta1::RegisterRequest& request);
  // The dial-back and GetDevicePluginOptions.
  StatusOr<std::unique_ptr<Endpoint>> Dial(const std::string& endpoint_name,
                                           v1beta1::DevicePluginOptions* options);
  // Opens ListAndWatch on `ep` for the registration `generation`.
  void OpenStream(Endpoint* ep, uint64_t generation);
  void StopEndpoint(std::unique_ptr<Endpoint> endpoint);
  std::shared_ptr<grpc::Channel> CurrentChannel() const;
  // Waits (holding mu_ while `condition` runs) until it holds or `timeout`.
  bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string plugin_dir_;
  const std::chrono::milliseconds dial_timeout_;
  Mutex server_mu_;  // serialises Serve/StopServer/Restart/Stop
  std::unique_ptr<Registration> service_ ABSL_GUARDED_BY(server_mu_);
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(server_mu_);

  mutable Mutex mu_;
  mutable CondVar cv_;
  std::optional<grpc::Status> register_failure_ ABSL_GUARDED_BY(mu_);
  std::vector<v1beta1::RegisterRequest> registrations_ ABSL_GUARDED_BY(mu_);
  int register_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<v1beta1::DevicePluginOptions> dialed_options_ ABSL_GUARDED_BY(mu_);
  std::vector<v1beta1::Device> devices_ ABSL_GUARDED_BY(mu_);
  int list_updates_ ABSL_GUARDED_BY(mu_) = 0;
  bool stream_open_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t stream_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<Endpoint> endpoint_ ABSL_GUARDED_BY(mu_);
  // Serialises registrations (kubelet handles them one at a time per
  // resource) without holding mu_ during the dial-back.
  Mutex register_mu_;
};

}  // namespace migd::k8s::testing

#endif  // MIGD_K8S_TESTING_FAKE_KUBELET_H_
