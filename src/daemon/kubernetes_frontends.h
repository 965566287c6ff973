// File: daemon/kubernetes_frontends.h
//
// KubernetesFrontends: the Kubernetes side of migd (docs/kubernetes.md), in
// the order startup needs it.
//
// Before recovery (StartBeforeRecovery):
//   - the API-server client, in-cluster or from a kubeconfig, when
//     kubernetes.enabled or recovery.ownerSource: hami needs one  -> exit 1
//   - kubernetes.enabled: the kubelet device plugin serves and registers
//     first, behind a DeferredBackend (no devices, Allocate refused with
//     kUnavailable) so kubelet sees the plugin again before any slow work
//                                                                  -> exit 4
//   - recovery's owner source (records, podresources, hami), wrapped in a
//     FailClosedOwnerSource (k8s_wiring.h)
// After recovery (StartAfterRecovery, kubernetes.enabled): the HamiBackend
// over the Manager goes behind the plugin, and the PodWatcher publishes the
// node's hami.io/node-nvidia-register annotation and releases the instances
// of ended pods.
//
// Thread-safety: Start*/Stop from the daemon's main thread; the pieces they
// start run their own threads.
#ifndef MIGD_DAEMON_KUBERNETES_FRONTENDS_H_
#define MIGD_DAEMON_KUBERNETES_FRONTENDS_H_

#include <memory>
#include <string>

#include "daemon/config.h"
#include "daemon/k8s_wiring.h"
#include "daemon/startup_failure.h"
#include "engine/cdi_observer.h"
#include "engine/manager.h"
#include "engine/owner_source.h"
#include "k8s/apiserver/hami_backend.h"
#include "k8s/apiserver/kube_client.h"
#include "k8s/apiserver/pod_watcher.h"
#include "k8s/deviceplugin/device_plugin_server.h"
#include "k8s/podresources/client.h"
#include "k8s/podresources/kube_pod_lister.h"

namespace migd::daemon {

class KubernetesFrontends {
 public:
  KubernetesFrontends() = default;
  ~KubernetesFrontends() { Stop(); }
  KubernetesFrontends(const KubernetesFrontends&) = delete;
  KubernetesFrontends& operator=(const KubernetesFrontends&) = delete;

  // `source` names the config in messages ("config <source>: ...").
  MaybeFailure StartBeforeRecovery(const Config& config, const std::string& source);
  // Recovery's owner source; valid after StartBeforeRecovery succeeded and
  // for this object's lifetime.
  engine::OwnerSource& owner_source() { return *owners_; }
  // `manager` and `cdi` must outlive Stop().
  void StartAfterRecovery(const Config& config, engine::Manager* manager, engine::CdiObserver* cdi);
  // Stops kubelet's calls and the pod watcher (both use the Manager).
  // Idempotent; the owner source stays valid.
  void Stop();

 private:
  MaybeFailure ConnectApiServer(const Config& config, const std::string& source);
  MaybeFailure ServeDevicePlugin(const Config& config);
  void ChooseOwnerSource(const Config& config);

  std::unique_ptr<k8s::KubeClient> kube_;
  std::unique_ptr<k8s::KubeHamiPodLister> hami_pods_;
  std::unique_ptr<k8s::PodResourcesClient> pod_resources_;
  std::unique_ptr<engine::OwnerSource> owners_;
  DeferredBackend deferred_backend_;  // outlives the plugin that calls it
  std::unique_ptr<k8s::DevicePluginServer> device_plugin_;
  std::unique_ptr<k8s::HamiBackend> hami_backend_;
  std::unique_ptr<k8s::PodWatcher> pod_watcher_;
};

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_KUBERNETES_FRONTENDS_H_
