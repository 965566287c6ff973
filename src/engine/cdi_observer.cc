#include "engine/cdi_observer.h"

#include <spdlog/spdlog.h>

#include <set>

#include "base/logging.h"
#include "base/status_macros.h"

namespace migd::engine {

Status CdiObserver::OnPublish(const PublishedInstance& instance) {
  cdi::MigInstance mig{.gpu_minor = instance.gpu_minor,
                       .gi_id = instance.gi_id,
                       .ci_id = instance.ci_id,
                       .mig_uuid = instance.mig_uuid};
  std::optional<cdi::BuiltSpec> cached;
  {
    MutexLock lock(&mu_);
    auto it = specs_.find(instance.mig_uuid);
    if (it != specs_.end() && it->second.instance.gpu_minor == mig.gpu_minor &&
        it->second.instance.gi_id == mig.gi_id && it->second.instance.ci_id == mig.ci_id) {
      cached = it->second.built;
    }
  }
  StatusOr<cdi::BuiltSpec> built =
      cached ? publisher_->PublishBuilt(std::move(*cached)) : publisher_->Publish(mig);
  if (!built.ok()) return built.status();
  MutexLock lock(&mu_);
  specs_[instance.mig_uuid] = Entry{mig, std::move(*built)};
  return OkStatus();
}

Status CdiObserver::OnUnpublish(const PublishedInstance& instance) {
  {
    MutexLock lock(&mu_);
    specs_.erase(instance.mig_uuid);
  }
  return publisher_->Unpublish(instance.mig_uuid);
}

Status CdiObserver::OnRecovered(const std::vector<MigUuid>& tracked) {
  MIGD_ASSIGN_OR_RETURN(cdi::SweepReport report, publisher_->Sweep(tracked));
  if (!report.removed.empty() || !report.missing.empty()) {
    spdlog::info(
        "CDI startup sweep{}",
        Fields().Add("removed", report.removed.size()).Add("missing", report.missing.size()));
  }
  return OkStatus();
}

Status CdiObserver::OnReconcile() { return publisher_->RetryPendingRemovals(); }

std::optional<cdi::BuiltSpec> CdiObserver::SpecOf(const MigUuid& mig_uuid) const {
  MutexLock lock(&mu_);
  auto it = specs_.find(mig_uuid);
  if (it == specs_.end()) return std::nullopt;
  return it->second.built;
}

}  // namespace migd::engine
