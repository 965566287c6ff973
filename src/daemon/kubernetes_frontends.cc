#include "daemon/kubernetes_frontends.h"

#include <spdlog/spdlog.h>

#include "base/clock.h"
#include "base/logging.h"
#include "daemon/daemon.h"
#include "k8s/dra/slices.h"
#include "k8s/podresources/owner_sources.h"

namespace migd::daemon {

MaybeFailure KubernetesFrontends::StartBeforeRecovery(const Config& config,
                                                      const std::string& source,
                                                      engine::ListenerFanout* fanout) {
  const bool hami_owners = config.recovery.owner_source == "hami";
  if (config.kubernetes.enabled || hami_owners || config.dra.enabled) {
    if (MaybeFailure f = ConnectApiServer(config, source)) return f;
  }
  if (config.kubernetes.enabled) {
    if (MaybeFailure f = ServeDevicePlugin(config)) return f;
    fanout->Add(&health_forwarder_);
  }
  if (config.dra.enabled) {
    const DraConfig& d = config.dra;
    dra_ = std::make_unique<k8s::dra::DraFrontend>(
        k8s::dra::DraFrontendOptions{d.driver_name, config.kubernetes.node_name,
                                     config.kubernetes.kubelet_dir,
                                     k8s::dra::CounterLayoutFromName(d.counter_set_layout),
                                     d.resync_interval},
        kube_.get());
    fanout->Add(dra_->listener());
    fanout->Add(&dra_health_);
  }
  ChooseOwnerSource(config);
  spdlog::info("recovery owner source{}", Fields().Add("source", owners_->name()));
  return std::nullopt;
}

MaybeFailure KubernetesFrontends::ConnectApiServer(const Config& config,
                                                   const std::string& source) {
  const ApiServerConfig& api = config.kubernetes.api_server;
  StatusOr<k8s::KubeConfig> kc =
      api.in_cluster ? k8s::InClusterConfig() : k8s::LoadKubeconfig(api.kubeconfig);
  if (!kc.ok()) {
    return Failure{
        kExitConfig,
        "config " + source + ": kubernetes.apiServer: " + kc.status().ToString() +
            (api.in_cluster ? " (inCluster: true needs migd to run in a pod with a service "
                              "account; else set inCluster: false and a kubeconfig)"
                            : "")};
  }
  StatusOr<std::unique_ptr<k8s::KubeClient>> client = k8s::KubeClient::Create(*kc);
  if (!client.ok()) {
    return Failure{kExitConfig,
                   "config " + source + ": kubernetes.apiServer: " + client.status().ToString()};
  }
  kube_ = std::move(*client);
  return std::nullopt;
}

MaybeFailure KubernetesFrontends::ServeDevicePlugin(const Config& config) {
  const KubernetesConfig& k = config.kubernetes;
  k8s::DevicePluginOptions dp;
  dp.plugin_dir = k.DevicePluginDir();
  dp.resource_name = k.resource_name;
  StatusOr<std::unique_ptr<k8s::DevicePluginServer>> plugin =
      k8s::DevicePluginServer::Start(dp, &deferred_backend_);
  if (!plugin.ok()) {
    return Failure{kExitInUse, "cannot serve the kubelet device plugin in " + dp.plugin_dir + ": " +
                                   plugin.status().ToString() +
                                   " (is kubernetes.devicePluginDir (or kubeletDir) right, and "
                                   "that directory mounted into migd?)"};
  }
  device_plugin_ = std::move(*plugin);
  spdlog::info("kubelet device plugin serving{}", Fields()
                                                      .Add("socket", device_plugin_->socket_path())
                                                      .Add("resource", k.resource_name)
                                                      .Add("node", k.node_name));
  return std::nullopt;
}

void KubernetesFrontends::ChooseOwnerSource(const Config& config) {
  const KubernetesConfig& k = config.kubernetes;
  const std::string& source = config.recovery.owner_source;
  if (source == "hami") {
    hami_pods_ = std::make_unique<k8s::KubeHamiPodLister>(*kube_, k.node_name);
    owners_ = std::make_unique<FailClosedOwnerSource>(
        std::make_unique<k8s::HamiOwnerSource>(*hami_pods_));
  } else if (source == "podresources") {
    pod_resources_ = std::make_unique<k8s::PodResourcesClient>(
        k8s::PodResourcesClientOptions{.socket_path = k8s::PodResourcesSocketPath(k.PodResourcesDir())});
    owners_ =
        std::make_unique<FailClosedOwnerSource>(std::make_unique<k8s::PodResourcesOwnerSource>(
            *pod_resources_,
            k8s::PodResourcesOwnerSourceOptions{.resource_name = k.resource_name}));
  } else {
    owners_ = std::make_unique<engine::RecordsOwnerSource>();
  }
}

MaybeFailure KubernetesFrontends::StartDra(const Config& config, engine::Manager* manager,
                                           engine::CdiObserver* cdi, Clock& clock) {
  const std::string& kubelet_dir = config.kubernetes.kubelet_dir;
  // kubelet's dra-health stream (NodeWatchResources) carries the health
  // monitor's marks; without the monitor migd offers no health service.
  k8s::dra::DeviceHealthSource* health = nullptr;
  if (config.health.enabled) {
    dra_health_.SetManager(manager);
    health = &dra_health_;
  }
  if (Status s = dra_->Start(manager, cdi, clock, health); !s.ok()) {
    return Failure{kExitInUse, "cannot serve the DRA plugin under " + kubelet_dir + ": " +
                                   s.ToString() +
                                   " (is kubernetes.kubeletDir right, and are its plugins and "
                                   "plugins_registry directories mounted into migd?)"};
  }
  spdlog::info("DRA driver serving{}", Fields()
                                           .Add("driver", config.dra.driver_name)
                                           .Add("registration", dra_->plugin()->registration_socket())
                                           .Add("health", health != nullptr)
                                           .Add("node", config.kubernetes.node_name));
  return std::nullopt;
}

MaybeFailure KubernetesFrontends::StartAfterRecovery(const Config& config,
                                                     engine::Manager* manager,
                                                     engine::CdiObserver* cdi, Clock& clock) {
  if (dra_) {
    if (MaybeFailure f = StartDra(config, manager, cdi, clock)) return f;
  }
  if (!config.kubernetes.enabled) return std::nullopt;
  k8s::HamiBackendOptions hopts;
  hopts.node_name = config.kubernetes.node_name;
  hopts.cdi = cdi;
  hopts.cdi_enabled = config.cdi.enabled;
  hopts.profile_allowlist = {config.mig_profile_allowlist.begin(),
                             config.mig_profile_allowlist.end()};
  hopts.resource_name = config.kubernetes.resource_name;
  hopts.node_lock_expiry = config.kubernetes.node_lock_expiry;
  hami_backend_ = std::make_unique<k8s::HamiBackend>(kube_.get(), manager, &Clock::Real(), hopts);
  // Publishes hami.io/node-nvidia-register once, then releases the
  // instances of ended pods and re-publishes periodically, and at once when
  // a GPU's health changes.
  pod_watcher_ = std::make_unique<k8s::PodWatcher>(hami_backend_.get(), k8s::PodWatcherOptions{});
  hami_backend_->SetRegistrationChangedCallback(
      [watcher = pod_watcher_.get()] { watcher->RequestRegistration(); });
  deferred_backend_.Set(hami_backend_.get());
  health_forwarder_.Set(hami_backend_.get());
  pod_watcher_->Start();
  return std::nullopt;
}

void KubernetesFrontends::Stop() {
  if (dra_) dra_->Stop();
  dra_health_.SetManager(nullptr);
  if (device_plugin_) device_plugin_->Stop();
  if (pod_watcher_) pod_watcher_->Stop();
  device_plugin_.reset();
  health_forwarder_.Set(nullptr);  // no health change reaches the watcher after this
  pod_watcher_.reset();
  hami_backend_.reset();
}

}  // namespace migd::daemon
