// File: daemon/kubernetes_frontends.h
//
// KubernetesFrontends: the Kubernetes side of migd (docs/kubernetes.md), in
// the order startup needs it.
//
// Before recovery (StartBeforeRecovery):
//   - the API-server client, in-cluster or from a kubeconfig, when
//     kubernetes.enabled, dra.enabled or recovery.ownerSource: hami needs
//     one                                                          -> exit 1
//   - dra.enabled: the DRA frontend's ResourceSlice publisher joins the
//     engine's listener fan-out, so every instance event (recovery's too)
//     republishes
//   - kubernetes.enabled: the kubelet device plugin serves and registers
//     first, behind a DeferredBackend (no devices, Allocate refused with
//     kUnavailable) so kubelet sees the plugin again before any slow work
//                                                                  -> exit 4
//   - recovery's owner source (records, podresources, hami), wrapped in a
//     FailClosedOwnerSource (k8s_wiring.h)
// After recovery (StartAfterRecovery): dra.enabled starts the DRA kubelet
// plugin over the Manager (-> exit 4 when its sockets cannot be served);
// kubernetes.enabled puts the HamiBackend over the Manager behind the
// device plugin, and the PodWatcher publishes the node's
// hami.io/node-nvidia-register annotation and releases the instances of
// ended pods.
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
#include "base/clock.h"
#include "engine/cdi_observer.h"
#include "engine/events.h"
#include "engine/manager.h"
#include "engine/owner_source.h"
#include "k8s/apiserver/hami_backend.h"
#include "k8s/apiserver/kube_client.h"
#include "k8s/apiserver/pod_watcher.h"
#include "k8s/deviceplugin/device_plugin_server.h"
#include "k8s/dra/dra_frontend.h"
#include "k8s/dra/engine_health_source.h"
#include "k8s/podresources/client.h"
#include "k8s/podresources/kube_pod_lister.h"

namespace migd::daemon {

class KubernetesFrontends {
 public:
  KubernetesFrontends() = default;
  ~KubernetesFrontends() { Stop(); }
  KubernetesFrontends(const KubernetesFrontends&) = delete;
  KubernetesFrontends& operator=(const KubernetesFrontends&) = delete;

  // `source` names the config in messages ("config <source>: ..."). The
  // DRA publisher is added to `fanout`, which must outlive this object.
  MaybeFailure StartBeforeRecovery(const Config& config, const std::string& source,
                                   engine::ListenerFanout* fanout);
  // Recovery's owner source; valid after StartBeforeRecovery succeeded and
  // for this object's lifetime.
  engine::OwnerSource& owner_source() { return *owners_; }
  // `manager`, `cdi` and `clock` must outlive Stop().
  MaybeFailure StartAfterRecovery(const Config& config, engine::Manager* manager,
                                  engine::CdiObserver* cdi, Clock& clock);
  // Stops kubelet's calls (device plugin and DRA plugin) and the pod watcher
  // (all use the Manager). Idempotent; the owner source and the DRA
  // publisher (an engine listener) stay until the destructor.
  void Stop();

 private:
  MaybeFailure ConnectApiServer(const Config& config, const std::string& source);
  MaybeFailure ServeDevicePlugin(const Config& config);
  void ChooseOwnerSource(const Config& config);
  MaybeFailure StartDra(const Config& config, engine::Manager* manager, engine::CdiObserver* cdi,
                        Clock& clock);

  std::unique_ptr<k8s::KubeClient> kube_;
  std::unique_ptr<k8s::KubeHamiPodLister> hami_pods_;
  std::unique_ptr<k8s::PodResourcesClient> pod_resources_;
  std::unique_ptr<engine::OwnerSource> owners_;
  DeferredBackend deferred_backend_;  // outlives the plugin that calls it
  HealthForwarder health_forwarder_;  // in the fan-out: outlives the Manager's calls
  // The DRA plugin's resource-health stream reads the engine's marks
  // (in the fan-out when DRA is on; offered when health.enabled).
  k8s::dra::EngineHealthSource dra_health_;
  std::unique_ptr<k8s::DevicePluginServer> device_plugin_;
  std::unique_ptr<k8s::HamiBackend> hami_backend_;
  std::unique_ptr<k8s::PodWatcher> pod_watcher_;
  std::unique_ptr<k8s::dra::DraFrontend> dra_;
};

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_KUBERNETES_FRONTENDS_H_
