#include "engine/executor.h"

#include <spdlog/spdlog.h>

#include <map>
#include <utility>

#include "base/logging.h"
#include "base/status_macros.h"

namespace migd::engine {
namespace {

bool IsNotFoundOrOk(const Status& s) { return s.ok() || IsNotFound(s); }

const driver::GpuInstanceInfo* FindGi(const std::vector<driver::GpuInstanceInfo>& gis,
                                      NvmlGiId id) {
  for (const auto& gi : gis) {
    if (gi.id == id) return &gi;
  }
  return nullptr;
}

const driver::GpuInstanceInfo* FindGiAt(const std::vector<driver::GpuInstanceInfo>& gis,
                                        GiProfileId profile, const mig::Placement& p) {
  for (const auto& gi : gis) {
    if (gi.profile_id == profile && gi.placement == p) return &gi;
  }
  return nullptr;
}

std::string Cleanup(const Status& s) { return s.ok() ? "" : " (cleanup: " + s.ToString() + ")"; }

}  // namespace

Executor::Executor(driver::GpuDriver& driver, RecordJournal& journal, Registry& registry,
                   const GpuTable& gpus, InstanceObserver& observer, Clock& clock,
                   EngineListener* listener)
    : driver_(driver),
      journal_(journal),
      registry_(registry),
      gpus_(gpus),
      observer_(observer),
      clock_(clock),
      listener_(listener) {}

Status Executor::Publish(const TrackedInstance& instance) {
  return observer_.OnPublish(PublishedOf(instance, gpus_.MinorOf(instance.gpu.value())));
}

Status Executor::Create(const store::RecordKey& key, const store::Owner& owner,
                        const std::string& request_id, bool as_idle) {
  TrackedInstance copy;
  {
    MutexLock lock(registry_.mu());
    TrackedInstance* inst = registry_.Find(key);
    if (inst == nullptr || inst->state != InstanceState::kCreating) {
      return InternalError("no Creating placeholder for " + key.ToString());
    }
    copy = *inst;
  }
  // 1. The intent is durable before the GI exists.
  if (Status s = journal_.Write(copy, InstanceState::kCreating, store::RecordPhase::kIntent);
      !s.ok()) {
    MutexLock lock(registry_.mu());
    TrackedInstance* inst = registry_.Find(key);
    if (inst != nullptr &&
        registry_.Transition(*inst, InstanceState::kNone, EventReason::kRollback).ok()) {
      registry_.Erase(key);
    }
    return s;
  }
  // 2. GI at exactly the planned placement, 3. the default full CI.
  MIGD_ASSIGN_OR_RETURN(driver::GpuInstanceInfo gi, CreateGi(copy));
  copy.set_gi(gi.id);
  MIGD_ASSIGN_OR_RETURN(driver::ComputeInstanceInfo ci, CreateCi(copy, gi.id));
  copy.set_ci(ci.id);
  copy.id.mig_uuid = ci.mig_uuid;
  copy.owner = as_idle ? store::Owner() : owner;
  copy.request_id = as_idle ? std::string() : request_id;
  copy.last_used = clock_.Now();
  // 4. Commit, then publish.
  MIGD_RETURN_IF_ERROR(Commit(copy, as_idle));
  if (Status s = Publish(copy); !s.ok()) {
    Status ds = Destroy(key);
    return s.WithContext("publishing " + ci.mig_uuid.value());
  }
  spdlog::debug("instance created{}", Fields()
                                          .Add("gpu", key.gpu_uuid)
                                          .Add("gi", gi.id)
                                          .Add("ci", ci.id)
                                          .Add("mig", ci.mig_uuid)
                                          .Add("profile", copy.profile)
                                          .Add("placement", key.placement)
                                          .Add("request", request_id));
  return OkStatus();
}

StatusOr<driver::GpuInstanceInfo> Executor::CreateGi(const TrackedInstance& copy) {
  const store::RecordKey& key = copy.key();
  StatusOr<driver::GpuInstanceInfo> gi = driver_.CreateGi(copy.gpu, key.profile_id, key.placement);
  if (!gi.ok()) {
    // The GI may exist if only the reply was lost: Destroy looks at the
    // journaled placement when the GI id is unknown.
    Status ds = Destroy(key);
    return gi.status().WithContext("creating GI " + key.ToString() + Cleanup(ds));
  }
  // The placeholder is ours until Create returns (the caller holds the GPU
  // lock and nothing else removes a Creating instance); never invent one if
  // that ever stops being true.
  MutexLock lock(registry_.mu());
  TrackedInstance* inst = registry_.Find(key);
  if (inst == nullptr || inst->state != InstanceState::kCreating) {
    Status ds = DestroyHw(copy.gpu, key, gi->id, std::nullopt);
    return InternalError("Creating placeholder of " + key.ToString() +
                         " vanished during its create (cleanup: " + ds.ToString() + ")");
  }
  inst->set_gi(gi->id);
  return gi;
}

StatusOr<driver::ComputeInstanceInfo> Executor::CreateCi(const TrackedInstance& copy, NvmlGiId gi) {
  const store::RecordKey& key = copy.key();
  StatusOr<driver::ComputeInstanceInfo> ci = driver_.CreateCi(copy.gpu, gi);
  if (!ci.ok()) {
    Status ds = Destroy(key);
    return ci.status().WithContext("creating CI in GI " + std::to_string(gi.value()) + " " +
                                   key.ToString() + Cleanup(ds));
  }
  MutexLock lock(registry_.mu());
  TrackedInstance* inst = registry_.Find(key);
  if (inst == nullptr || inst->state != InstanceState::kCreating) {
    Status ds = DestroyHw(copy.gpu, key, gi, ci->id);
    return InternalError("Creating placeholder of " + key.ToString() +
                         " vanished during its create (cleanup: " + ds.ToString() + ")");
  }
  inst->set_ci(ci->id);
  inst->id.mig_uuid = ci->mig_uuid;
  return ci;
}

Status Executor::Commit(TrackedInstance& copy, bool as_idle) {
  const store::RecordKey& key = copy.key();
  Status s = journal_.Write(copy, as_idle ? InstanceState::kIdle : InstanceState::kActive,
                            store::RecordPhase::kCommitted);
  if (!s.ok()) {
    Status ds = Destroy(key);
    return s;
  }
  MutexLock lock(registry_.mu());
  TrackedInstance* inst = registry_.Find(key);
  if (inst == nullptr || inst->state != InstanceState::kCreating) {
    return InternalError("Creating placeholder of " + key.ToString() +
                         " vanished during its create");
  }
  inst->committed = true;
  inst->owner = copy.owner;
  inst->request_id = copy.request_id;
  inst->last_used = copy.last_used;
  inst->published = true;  // published next; an unpublish after a failed publish is harmless
  ++registry_.counters().creates;
  return OkStatus();
}

Status Executor::Destroy(const store::RecordKey& key) {
  TrackedInstance copy;
  InstanceState from;
  {
    MutexLock lock(registry_.mu());
    TrackedInstance* inst = registry_.Find(key);
    if (inst == nullptr) return OkStatus();
    from = inst->state;
    if (from == InstanceState::kReclaiming) {
      MIGD_RETURN_IF_ERROR(registry_.Transition(
          *inst, InstanceState::kDeleting, inst->reclaim_reason.value_or(EventReason::kDestroy)));
    } else if (from != InstanceState::kCreating && from != InstanceState::kError &&
               from != InstanceState::kDeleting) {
      return InternalError("refusing to destroy " + std::string(InstanceStateName(from)) +
                           " instance " + key.ToString());
    }
    copy = *inst;
  }
  const store::RecordPhase phase =
      copy.committed ? store::RecordPhase::kCommitted : store::RecordPhase::kIntent;
  Status s;
  // The record must say Deleting before the hardware changes, unless it
  // already describes a destroyable instance (an intent, an Error record).
  if (copy.committed && from != InstanceState::kError) {
    s = journal_.Write(copy, InstanceState::kDeleting, phase);
  }
  if (s.ok()) s = DestroyHw(copy.gpu, key, copy.gi(), copy.ci());
  if (!s.ok()) return DestroyFailed(copy, phase, s);
  if (Status rs = journal_.Remove(key); !rs.ok()) {
    spdlog::warn("record removal failed, queued for retry{}",
                 Fields().Add("key", key.ToString()).Add("error", rs.ToString()));
  }
  Destroyed(copy, from);
  return OkStatus();
}

void Executor::Destroyed(const TrackedInstance& copy, InstanceState from) {
  const store::RecordKey& key = copy.key();
  bool published = false;
  std::optional<EventReason> reclaimed;
  InstanceView gone;
  {
    MutexLock lock(registry_.mu());
    if (TrackedInstance* inst = registry_.Find(key); inst != nullptr) {
      published = inst->published;
      reclaimed = inst->reclaim_reason;
      const EventReason why = from == InstanceState::kError      ? EventReason::kErrorRetry
                              : from == InstanceState::kCreating ? EventReason::kRollback
                                                                 : EventReason::kDestroy;
      if (registry_.Transition(*inst, InstanceState::kNone, why).ok()) {
        gone = ViewOf(*inst);
        registry_.Erase(key);
      }
    }
    ++registry_.counters().destroys;
    if (from == InstanceState::kError) ++registry_.counters().errors_cleaned;
  }
  if (reclaimed && listener_ != nullptr) listener_->OnReclaim(*reclaimed, gone);
  spdlog::debug("instance destroyed{}", Fields()
                                            .Add("gpu", key.gpu_uuid)
                                            .Add("profile", copy.profile)
                                            .Add("placement", key.placement)
                                            .Add("mig", copy.id.mig_uuid));
  if (published) {
    Status os = observer_.OnUnpublish(PublishedOf(copy, gpus_.MinorOf(copy.gpu.value())));
    if (!os.ok()) spdlog::warn("observer unpublish failed{}", Fields().Add("error", os));
  }
}

Status Executor::DestroyFailed(const TrackedInstance& copy, store::RecordPhase phase,
                               const Status& why) {
  const store::RecordKey& key = copy.key();
  // Fail closed: keep it in Error, never reuse it; the reconciler retries.
  {
    MutexLock lock(registry_.mu());
    TrackedInstance* inst = registry_.Find(key);
    if (inst != nullptr && inst->state != InstanceState::kError) {
      MIGD_RETURN_IF_ERROR(
          registry_.Transition(*inst, InstanceState::kError, EventReason::kDestroyFailed));
    }
    ++registry_.counters().destroy_failures;
  }
  Status ps = journal_.Write(copy, InstanceState::kError, phase);
  spdlog::error("instance destroy failed, kept in Error{}",
                Fields()
                    .Add("gpu", key.gpu_uuid)
                    .Add("profile", copy.profile)
                    .Add("placement", key.placement)
                    .Add("mig", copy.id.mig_uuid)
                    .Add("error", why)
                    .Add("record", ps.ok() ? std::string("Error") : ps.ToString()));
  return why.WithContext("destroying " + key.ToString());
}

Status Executor::DestroyHw(GpuIndex gpu, const store::RecordKey& key, std::optional<NvmlGiId> gi,
                           std::optional<NvmlCiId> ci) {
  if (!gi) {
    // The GI id is unknown (a create whose reply was lost): find what is at
    // the journaled placement.
    MIGD_ASSIGN_OR_RETURN(auto live, driver_.ListGpuInstances(gpu));
    const driver::GpuInstanceInfo* found = FindGiAt(live, key.profile_id, key.placement);
    if (found == nullptr) return OkStatus();
    gi = found->id;
    ci.reset();
  }
  if (ci) {
    Status s = driver_.DestroyCi(gpu, *gi, *ci);
    if (!IsNotFoundOrOk(s)) return s;
  }
  Status s = driver_.DestroyGi(gpu, *gi);
  if (s.ok()) return OkStatus();
  if (IsNotFound(s)) {
    // Believe NOT_FOUND only if the GI is really gone: a GI that still
    // exists would otherwise lose its record and strand its slices as a
    // foreign instance. Still there: fail (Error, retried by the reconciler).
    MIGD_ASSIGN_OR_RETURN(auto live, driver_.ListGpuInstances(gpu));
    if (FindGi(live, *gi) == nullptr) return OkStatus();
    return s.WithContext("GI " + std::to_string(gi->value()) + " is still listed");
  }
  if (!IsFailedPrecondition(s)) return s;
  // IN_USE: CIs we do not know of (a CI create whose reply was lost).
  MIGD_ASSIGN_OR_RETURN(auto live, driver_.ListGpuInstances(gpu));
  const driver::GpuInstanceInfo* found = FindGi(live, *gi);
  if (found == nullptr) return OkStatus();
  if (found->compute_instances.empty()) return s;
  for (const auto& c : found->compute_instances) {
    Status cs = driver_.DestroyCi(gpu, *gi, c.id);
    if (!IsNotFoundOrOk(cs)) return cs;
  }
  s = driver_.DestroyGi(gpu, *gi);
  return IsNotFoundOrOk(s) ? OkStatus() : s;
}

void Executor::Reclaim(const std::vector<store::RecordKey>& keys, ReclaimResult* result) {
  std::map<uint32_t, std::vector<store::RecordKey>> by_gpu;
  {
    MutexLock lock(registry_.mu());
    for (const auto& k : keys) {
      if (const TrackedInstance* inst = registry_.Find(k); inst != nullptr) {
        by_gpu[inst->gpu.value()].push_back(k);
      }
    }
  }
  for (const auto& [g, ks] : by_gpu) {
    GpuLocks locks = gpus_.Lock({g});
    for (const auto& k : ks) {
      InstanceView v;
      {
        MutexLock lock(registry_.mu());
        if (const TrackedInstance* inst = registry_.Find(k); inst != nullptr) v = ViewOf(*inst);
      }
      Status s = Destroy(k);
      if (!s.ok()) {
        // Report the instance as it is now (Error), not as it was.
        MutexLock lock(registry_.mu());
        if (const TrackedInstance* inst = registry_.Find(k); inst != nullptr) v = ViewOf(*inst);
      }
      if (result != nullptr) (s.ok() ? result->destroyed : result->failed).push_back(v);
    }
  }
}

}  // namespace migd::engine
