#include "k8s/dra/dra_frontend.h"

#include <utility>

#include "base/status_macros.h"
#include "k8s/dra/engine_snapshot.h"

namespace migd::k8s::dra {

DraFrontend::DraFrontend(DraFrontendOptions options, KubeClient* kube)
    : options_(std::move(options)), api_(kube) {
  SlicePublisherOptions so;
  so.driver = options_.driver;
  so.node_name = options_.node_name;
  so.layout = options_.layout;
  so.resync_period = options_.resync_period;
  // The snapshot is taken only once Start() set the Manager (the loop starts
  // there; Kick() before it only sets a flag).
  publisher_ = std::make_unique<SlicePublisher>(
      &api_, [this] { return SnapshotOf(*manager_); }, so);
}

DraFrontend::~DraFrontend() { Stop(); }

Status DraFrontend::Start(engine::Manager* manager, engine::CdiObserver* cdi, Clock& clock,
                          DeviceHealthSource* health) {
  manager_ = manager;
  preparer_ = std::make_unique<ClaimPreparer>(
      &api_, manager, cdi, ClaimPreparerOptions{options_.driver, options_.node_name});
  HealthFeed feed;
  if (health != nullptr) {
    health_ = std::make_unique<HealthReporter>(health, manager, options_.node_name, clock);
    feed = health_->Feed();
  }
  DraPluginOptions po;
  po.driver = options_.driver;
  po.registry_dir = options_.kubelet_dir + "/plugins_registry";
  po.plugin_dir = options_.kubelet_dir + "/plugins/" + options_.driver;
  SlicePublisher* publisher = publisher_.get();
  MIGD_ASSIGN_OR_RETURN(plugin_, DraPluginServer::Start(po, preparer_.get(), std::move(feed),
                                                        [publisher] { publisher->Kick(); }));
  publisher_->Start();
  return OkStatus();
}

void DraFrontend::Stop() {
  if (plugin_) plugin_->Stop();
  if (publisher_) publisher_->Stop();
  plugin_.reset();
}

}  // namespace migd::k8s::dra
