// File: k8s/dra/dra_frontend.h
//
// DraFrontend: the pieces of DRA mode wired together, for the daemon:
//   Create()  (before the engine exists) the ResourceApi and the
//             SlicePublisher, which the daemon adds to the engine's listener
//             fan-out so that every instance event republishes;
//   Start()   (after recovery) the ClaimPreparer over the Manager and the
//             CdiObserver, the DraPluginServer on kubelet's directories
//             (registration kicks the publisher: kubelet deletes its node's
//             slices when it starts), then the publisher's loop;
//   Stop()    plugin first (kubelet's calls use the Manager), then the
//             publisher. Idempotent; the destructor calls it.
// Health: a DeviceHealthSource passed to Start() (the daemon's is
// engine_health_source.h) offers kubelet's dra-health service; without one
// none is offered.
//
// Thread-safety: Create/Start/Stop from one thread; the pieces are
// thread-safe.
#ifndef MIGD_K8S_DRA_DRA_FRONTEND_H_
#define MIGD_K8S_DRA_DRA_FRONTEND_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "engine/cdi_observer.h"
#include "engine/events.h"
#include "engine/manager.h"
#include "k8s/apiserver/kube_client.h"
#include "k8s/dra/claim_preparer.h"
#include "k8s/dra/health.h"
#include "k8s/dra/health_reporter.h"
#include "k8s/dra/plugin_server.h"
#include "k8s/dra/resource_api.h"
#include "k8s/dra/slice_publisher.h"

namespace migd::k8s::dra {

struct DraFrontendOptions {
  std::string driver;
  std::string node_name;
  // kubelet's directory: plugins_registry/ and plugins/<driver>/ below it.
  std::string kubelet_dir = "/var/lib/kubelet";
  std::optional<CounterLayout> layout;  // nullopt: from the server version
  std::chrono::milliseconds resync_period{30000};
};

class DraFrontend {
 public:
  // `kube` is not owned and must outlive the frontend.
  DraFrontend(DraFrontendOptions options, KubeClient* kube);
  ~DraFrontend();
  DraFrontend(const DraFrontend&) = delete;
  DraFrontend& operator=(const DraFrontend&) = delete;

  // For engine::ManagerOptions::listener (through a fan-out).
  engine::EngineListener* listener() { return publisher_.get(); }

  // `manager` and `cdi` (and `health`, may be null) must outlive the
  // frontend. Errors: the plugin server's (sockets).
  Status Start(engine::Manager* manager, engine::CdiObserver* cdi, Clock& clock,
               DeviceHealthSource* health = nullptr);
  void Stop();

  const DraPluginServer* plugin() const { return plugin_.get(); }
  PublisherStats publisher_stats() const { return publisher_->stats(); }

 private:
  const DraFrontendOptions options_;
  ResourceApi api_;
  engine::Manager* manager_ = nullptr;  // set by Start
  std::unique_ptr<SlicePublisher> publisher_;
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<HealthReporter> health_;
  std::unique_ptr<DraPluginServer> plugin_;
};

}  // namespace migd::k8s::dra

#endif  // MIGD_K8S_DRA_DRA_FRONTEND_H_
