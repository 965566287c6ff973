#include "engine/manager.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/gpu_model_builder.h"
#include "mig/catalog.h"

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

int64_t ToTick(const std::optional<Clock::TimePoint>& t) {
  return t ? ToUnixSeconds(*t) : 0;
}

std::string OwnerLabel(const store::Owner& o) {
  switch (o.kind) {
    case store::Owner::Kind::kPod:
      return o.pod_namespace + "/" + o.pod_name + (o.container.empty() ? "" : "/" + o.container);
    case store::Owner::Kind::kOpaque:
      return o.opaque_id;
    case store::Owner::Kind::kNone:
      break;
  }
  return "-";
}

// The profile `name` resolves to on `model` (canonical name), or "".
std::string Canonical(const mig::GpuModel& model, const std::string& name) {
  const mig::GiProfile* p = model.FindProfileByName(name);
  return p == nullptr ? std::string() : p->name;
}

}  // namespace

Manager::Manager(ManagerOptions options, driver::GpuDriver& driver, store::RecordStore& store,
                 Clock& clock, InstanceObserver* observer)
    : options_(std::move(options)),
      driver_(driver),
      store_(store),
      clock_(clock),
      observer_(observer != nullptr ? *observer : noop_observer_),
      demand_(options_.demand_half_life_seconds) {
  policy_.idle_ttl = options_.idle_ttl;
  policy_.max_idle_per_gpu = options_.max_idle_per_gpu;
  policy_.warm_pool = options_.warm_pool;
  policy_.profile_allowlist = options_.profile_allowlist;
}

Manager::~Manager() { StopReconciler(); }

StatusOr<std::unique_ptr<Manager>> Manager::Create(ManagerOptions options,
                                                   driver::GpuDriver& driver,
                                                   store::RecordStore& store, Clock& clock,
                                                   OwnerSource& owners,
                                                   InstanceObserver* observer) {
  if (options.boot_id.empty()) {
    return InvalidArgumentError("ManagerOptions.boot_id is required (ReadBootId())");
  }
  if (options.reconcile_interval <= Clock::Duration::zero()) {
    return InvalidArgumentError("ManagerOptions.reconcile_interval must be positive");
  }
  std::unique_ptr<Manager> m(new Manager(std::move(options), driver, store, clock, observer));
  MIGD_RETURN_IF_ERROR(m->Recover(owners));
  // Warm-pool and allowlist names can only be checked against the GPUs.
  MIGD_RETURN_IF_ERROR(m->SetPolicy(m->policy()));
  return StatusOr<std::unique_ptr<Manager>>(std::move(m));
}

int64_t Manager::NowTick() const {
  return std::chrono::duration_cast<std::chrono::seconds>(
             clock_.MonotonicNow().time_since_epoch())
      .count();
}

Status Manager::TransitionLocked(Instance& inst, InstanceState to, EventReason reason) {
  if (!CanTransition(inst.state, to)) {
    return InternalError("refused transition " + std::string(InstanceStateName(inst.state)) +
                         " -> " + std::string(InstanceStateName(to)) + " of " +
                         inst.key.ToString());
  }
  const InstanceState from = inst.state;
  inst.state = to;
  EmitLocked(from, inst, reason);
  return OkStatus();
}

void Manager::EmitLocked(InstanceState from, const Instance& inst, EventReason reason) {
  spdlog::info("instance {} -> {}{}", InstanceStateName(from), InstanceStateName(inst.state),
               Fields()
                   .Add("reason", EventReasonName(reason))
                   .Add("gpu", inst.gpu.value())
                   .Add("gpu_uuid", inst.key.gpu_uuid)
                   .Add("mig", inst.mig_uuid.value().empty() ? "-" : inst.mig_uuid.value())
                   .Add("gi", inst.gi_id ? std::to_string(inst.gi_id->value()) : "-")
                   .Add("ci", inst.ci_id ? std::to_string(inst.ci_id->value()) : "-")
                   .Add("profile", inst.profile)
                   .Add("placement", inst.key.placement)
                   .Add("owner", OwnerLabel(inst.owner))
                   .Add("request", inst.request_id.empty() ? "-" : inst.request_id));
  if (options_.listener == nullptr) return;
  InstanceEvent e;
  e.sequence = ++event_seq_;
  e.time = clock_.Now();
  e.from = from;
  e.to = inst.state;
  e.reason = reason;
  e.instance = ViewLocked(inst);
  options_.listener->OnInstanceEvent(e);
}

Status Manager::CheckAllowlistLocked(const std::vector<InstanceSpec>& specs) const {
  if (policy_.profile_allowlist.empty()) return OkStatus();
  for (const InstanceSpec& spec : specs) {
    bool allowed = policy_.profile_allowlist.count(spec.profile) != 0;
    // Aliases: the request and the list may name the same profile differently.
    for (auto it = gpus_.begin(); !allowed && it != gpus_.end(); ++it) {
      if (!Managed(it->second)) continue;
      if (spec.gpu && it->first != spec.gpu->value()) continue;
      const std::string want = Canonical(*it->second.model, spec.profile);
      if (want.empty()) continue;
      for (const std::string& a : policy_.profile_allowlist) {
        if (Canonical(*it->second.model, a) == want) allowed = true;
      }
    }
    if (!allowed) {
      std::string list;
      for (const std::string& a : policy_.profile_allowlist) {
        list += (list.empty() ? "" : ", ") + a;
      }
      return PermissionDeniedError("profile " + spec.profile +
                                   " is not in migProfileAllowlist (" + list +
                                   "); ask the node's operator to add it to the config");
    }
  }
  return OkStatus();
}

Status Manager::SetPolicy(const ManagerPolicy& policy) {
  if (policy.idle_ttl && *policy.idle_ttl <= Clock::Duration::zero()) {
    return InvalidArgumentError("lifecycle.idleTTL must be positive (or unset)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Without a managed GPU there is nothing to check the names against (a GPU
  // rediscovered later is not checked either: unknown names plan nothing).
  const bool any_managed = std::any_of(gpus_.begin(), gpus_.end(),
                                       [this](const auto& e) { return Managed(e.second); });
  if (any_managed) {
    auto known = [&](const std::string& name) {
      for (const auto& [idx, gpu] : gpus_) {
        if (Managed(gpu) && gpu.model->FindProfileByName(name) != nullptr) return true;
      }
      return false;
    };
    for (const auto& [name, n] : policy.warm_pool) {
      if (!known(name)) {
        return InvalidArgumentError("lifecycle.warmPool: profile " + name +
                                    " is not offered by any MIG GPU of this node");
      }
    }
    for (const std::string& name : policy.profile_allowlist) {
      if (!known(name)) {
        return InvalidArgumentError("migProfileAllowlist: profile " + name +
                                    " is not offered by any MIG GPU of this node");
      }
    }
  }
  policy_ = policy;
  return OkStatus();
}

ManagerPolicy Manager::policy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return policy_;
}

std::vector<GpuView> Manager::Gpus() const {
  std::vector<GpuView> out;
  std::lock_guard<std::mutex> lock(mu_);  // rediscovery updates unmanaged entries
  for (const auto& [idx, gpu] : gpus_) {
    if (!gpu.listed) continue;  // skipped by ListGpus (NO_PERMISSION) so far
    GpuView v;
    v.info = gpu.info;
    v.model = Managed(gpu) ? gpu.model.get() : nullptr;
    out.push_back(std::move(v));
  }
  return out;
}

InstanceView Manager::ViewLocked(const Instance& inst) const {
  InstanceView v;
  v.state = inst.state;
  v.gpu = inst.gpu;
  v.gpu_uuid = inst.key.gpu_uuid;
  v.profile_id = inst.key.profile_id;
  v.profile = inst.profile;
  v.placement = inst.key.placement;
  v.gi_id = inst.gi_id.value_or(NvmlGiId(0));
  v.ci_id = inst.ci_id.value_or(NvmlCiId(0));
  v.mig_uuid = inst.mig_uuid;
  v.owner = inst.owner;
  v.request_id = inst.request_id;
  v.last_used = inst.last_used;
  return v;
}

PublishedInstance Manager::PublishedLocked(const Instance& inst) const {
  PublishedInstance p;
  p.gpu = inst.gpu;
  p.gpu_uuid = inst.key.gpu_uuid;
  auto it = gpus_.find(inst.gpu.value());
  if (it != gpus_.end()) p.gpu_minor = it->second.info.minor;
  p.profile_id = inst.key.profile_id;
  p.profile = inst.profile;
  p.placement = inst.key.placement;
  p.gi_id = inst.gi_id.value_or(NvmlGiId(0));
  p.ci_id = inst.ci_id.value_or(NvmlCiId(0));
  p.mig_uuid = inst.mig_uuid;
  return p;
}

Manager::Instance* Manager::FindByUuidLocked(const std::string& uuid) {
  if (uuid.empty()) return nullptr;
  for (auto& [key, inst] : instances_) {
    if (inst.mig_uuid.value() == uuid) return &inst;
  }
  return nullptr;
}

const mig::GpuModel* Manager::ModelOf(GpuIndex gpu) const {
  auto it = gpus_.find(gpu.value());
  return it == gpus_.end() || !Managed(it->second) ? nullptr : it->second.model.get();
}

planner::DemandWeights Manager::DemandWeights() const {
  std::lock_guard<std::mutex> lock(mu_);
  return demand_.Weights();
}

ManagerCounters Manager::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

Status Manager::PutRecord(const Instance& inst, InstanceState state, store::RecordPhase phase) {
  store::Record r;
  r.key = inst.key;
  r.phase = phase;
  r.state = ToRecordState(state);
  r.profile_name = inst.profile;
  r.gi_id = inst.gi_id;
  r.ci_id = inst.ci_id;
  if (!inst.mig_uuid.value().empty()) r.mig_uuid = inst.mig_uuid;
  if (state == InstanceState::kActive) {
    r.owner = inst.owner;
    r.request_id = inst.request_id;
  }
  r.boot_id = options_.boot_id;
  r.created_at = inst.created_at;
  r.last_used_at = inst.last_used;
  StatusOr<store::Record> written = store_.Put(std::move(r));
  if (!written.ok()) {
    return written.status().WithContext("writing record " + inst.key.ToString());
  }
  return OkStatus();
}

std::vector<std::unique_lock<std::mutex>> Manager::LockGpus(const std::set<uint32_t>& gpus) {
  std::vector<std::unique_lock<std::mutex>> locks;
  for (uint32_t g : gpus) {  // std::set iterates in index order
    auto it = gpus_.find(g);
    if (it != gpus_.end()) locks.emplace_back(*it->second.mutate_mu);
  }
  return locks;
}

planner::PlanInput Manager::BuildPlanInputLocked(const std::vector<InstanceSpec>& specs) const {
  planner::PlanInput in;
  in.demand = demand_.Weights();
  std::map<uint32_t, size_t> pos;
  for (const auto& [idx, gpu] : gpus_) {
    if (!Managed(gpu)) continue;
    pos[idx] = in.gpus.size();
    in.gpus.push_back({GpuIndex(idx), gpu.model.get(), {}});
  }
  // An allocation reserves its reclaims (Reclaiming/Deleting) together with
  // the Creating placeholder that replaces them; the placeholder stands for
  // both while they overlap.
  std::map<uint32_t, uint32_t> creating_mask;
  for (const auto& [key, inst] : instances_) {
    if (inst.state == InstanceState::kCreating) creating_mask[inst.gpu.value()] |= key.placement.Mask();
  }
  for (const auto& [key, inst] : instances_) {
    auto p = pos.find(inst.gpu.value());
    if (p == pos.end()) continue;
    if ((inst.state == InstanceState::kReclaiming || inst.state == InstanceState::kDeleting ||
         inst.state == InstanceState::kError) &&
        (creating_mask[inst.gpu.value()] & key.placement.Mask()) != 0) {
      continue;
    }
    planner::Occupant o;
    o.profile = inst.profile;
    o.placement = key.placement;
    switch (inst.state) {
      case InstanceState::kCreating:
      case InstanceState::kActive:
        o.state = planner::OccupantState::kActive;
        o.key = inst.mig_uuid.value().empty() ? "creating:" + key.ToString()
                                              : inst.mig_uuid.value();
        break;
      case InstanceState::kIdle:
        o.state = inst.busy ? planner::OccupantState::kActive : planner::OccupantState::kIdle;
        o.key = inst.mig_uuid.value();
        o.last_used = ToTick(inst.last_used);
        break;
      default:
        o.state = planner::OccupantState::kError;
        o.key = "busy:" + key.ToString();
        break;
    }
    in.gpus[p->second].occupants.push_back(std::move(o));
  }
  for (const auto& [idx, gpu] : gpus_) {
    if (!Managed(gpu)) continue;
    for (const auto& gi : gpu.foreign) {
      const mig::GiProfile* prof = gpu.model->FindProfileById(gi.profile_id);
      if (prof == nullptr) continue;
      planner::Occupant o;
      o.profile = prof->name;
      o.placement = gi.placement;
      o.state = planner::OccupantState::kForeign;
      o.key = "foreign:" + std::to_string(idx) + ":" + std::to_string(gi.id.value());
      in.gpus[pos[idx]].occupants.push_back(std::move(o));
    }
  }
  for (const InstanceSpec& s : specs) {
    in.request.push_back({s.profile, s.gpu, s.placement});
  }
  return in;
}

Status Manager::DestroyHw(GpuIndex gpu, const store::RecordKey& key, std::optional<NvmlGiId> gi,
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

Status Manager::DestroyInstance(const store::RecordKey& key) {
  Instance copy;
  InstanceState from;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = instances_.find(key);
    if (it == instances_.end()) return OkStatus();
    from = it->second.state;
    if (from == InstanceState::kReclaiming) {
      MIGD_RETURN_IF_ERROR(TransitionLocked(
          it->second, InstanceState::kDeleting,
          it->second.reclaim_reason.value_or(EventReason::kDestroy)));
    } else if (from != InstanceState::kCreating && from != InstanceState::kError &&
               from != InstanceState::kDeleting) {
      return InternalError("refusing to destroy " + std::string(InstanceStateName(from)) +
                           " instance " + key.ToString());
    }
    copy = it->second;
  }
  const store::RecordPhase phase =
      copy.committed ? store::RecordPhase::kCommitted : store::RecordPhase::kIntent;
  Status s;
  // The record must say Deleting before the hardware changes, unless it
  // already describes a destroyable instance (an intent, an Error record).
  if (copy.committed && from != InstanceState::kError) {
    s = PutRecord(copy, InstanceState::kDeleting, phase);
  }
  if (s.ok()) s = DestroyHw(copy.gpu, key, copy.gi_id, copy.ci_id);
  if (s.ok()) {
    Status rs = store_.Remove(key);
    if (!rs.ok()) {
      spdlog::warn("record removal failed, queued for retry{}",
                   Fields().Add("key", key.ToString()).Add("error", rs.ToString()));
    }
    bool published = false;
    std::optional<EventReason> reclaimed;
    InstanceView gone;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = instances_.find(key);
      if (it != instances_.end()) {
        published = it->second.published;
        reclaimed = it->second.reclaim_reason;
        const EventReason why = from == InstanceState::kError      ? EventReason::kErrorRetry
                                : from == InstanceState::kCreating ? EventReason::kRollback
                                                                   : EventReason::kDestroy;
        Status ts = TransitionLocked(it->second, InstanceState::kNone, why);
        if (!ts.ok()) return ts;
        gone = ViewLocked(it->second);
        instances_.erase(it);
      }
      ++counters_.destroys;
      if (from == InstanceState::kError) ++counters_.errors_cleaned;
    }
    if (reclaimed && options_.listener != nullptr) options_.listener->OnReclaim(*reclaimed, gone);
    spdlog::debug("instance destroyed{}", Fields()
                                             .Add("gpu", key.gpu_uuid)
                                             .Add("profile", copy.profile)
                                             .Add("placement", key.placement)
                                             .Add("mig", copy.mig_uuid));
    if (published) {
      Status os = observer_.OnUnpublish(PublishedLocked(copy));
      if (!os.ok()) spdlog::warn("observer unpublish failed{}", Fields().Add("error", os));
    }
    return OkStatus();
  }
  // Fail closed: keep it in Error, never reuse it; the reconciler retries.
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = instances_.find(key);
    if (it != instances_.end() && it->second.state != InstanceState::kError) {
      Status ts = TransitionLocked(it->second, InstanceState::kError, EventReason::kDestroyFailed);
      if (!ts.ok()) return ts;
    }
    ++counters_.destroy_failures;
  }
  Status ps = PutRecord(copy, InstanceState::kError, phase);
  spdlog::error("instance destroy failed, kept in Error{}",
                Fields()
                    .Add("gpu", key.gpu_uuid)
                    .Add("profile", copy.profile)
                    .Add("placement", key.placement)
                    .Add("mig", copy.mig_uuid)
                    .Add("error", s)
                    .Add("record", ps.ok() ? std::string("Error") : ps.ToString()));
  return s.WithContext("destroying " + key.ToString());
}

Status Manager::CreateInstance(const store::RecordKey& key, const store::Owner& owner,
                               const std::string& request_id, bool as_idle) {
  Instance copy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = instances_.find(key);
    if (it == instances_.end() || it->second.state != InstanceState::kCreating) {
      return InternalError("no Creating placeholder for " + key.ToString());
    }
    copy = it->second;
  }
  auto drop_placeholder = [&]() {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = instances_.find(key);
    if (it != instances_.end() &&
        TransitionLocked(it->second, InstanceState::kNone, EventReason::kRollback).ok()) {
      instances_.erase(it);
    }
  };
  // 1. The intent is durable before the GI exists.
  Status s = PutRecord(copy, InstanceState::kCreating, store::RecordPhase::kIntent);
  if (!s.ok()) {
    drop_placeholder();
    return s;
  }
  // 2. GI at exactly the planned placement.
  StatusOr<driver::GpuInstanceInfo> gi =
      driver_.CreateGi(copy.gpu, key.profile_id, key.placement);
  if (!gi.ok()) {
    // The GI may exist if only the reply was lost: DestroyInstance looks at
    // the journaled placement when the GI id is unknown.
    Status ds = DestroyInstance(key);
    if (ds.ok()) return gi.status().WithContext("creating GI " + key.ToString());
    return gi.status().WithContext("creating GI " + key.ToString() + " (cleanup: " +
                                   ds.ToString() + ")");
  }
  // The placeholder is ours until this function returns (the caller holds
  // the GPU lock and nothing else removes a Creating instance); never let
  // operator[] invent one if that ever stops being true.
  auto placeholder = [&]() -> Instance* {
    auto it = instances_.find(key);
    return it == instances_.end() || it->second.state != InstanceState::kCreating ? nullptr
                                                                                   : &it->second;
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    Instance* inst = placeholder();
    if (inst == nullptr) {
      Status ds = DestroyHw(copy.gpu, key, gi->id, std::nullopt);
      return InternalError("Creating placeholder of " + key.ToString() +
                           " vanished during its create (cleanup: " + ds.ToString() + ")");
    }
    inst->gi_id = gi->id;
  }
  copy.gi_id = gi->id;
  // 3. The default full CI.
  StatusOr<driver::ComputeInstanceInfo> ci = driver_.CreateCi(copy.gpu, gi->id);
  if (!ci.ok()) {
    Status ds = DestroyInstance(key);
    return ci.status().WithContext("creating CI in GI " + std::to_string(gi->id.value()) + " " +
                                   key.ToString() + (ds.ok() ? "" : " (cleanup: " +
                                                                       ds.ToString() + ")"));
  }
  copy.ci_id = ci->id;
  copy.mig_uuid = ci->mig_uuid;
  copy.owner = as_idle ? store::Owner() : owner;
  copy.request_id = as_idle ? std::string() : request_id;
  copy.last_used = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    Instance* inst = placeholder();
    if (inst == nullptr) {
      Status ds = DestroyHw(copy.gpu, key, gi->id, ci->id);
      return InternalError("Creating placeholder of " + key.ToString() +
                           " vanished during its create (cleanup: " + ds.ToString() + ")");
    }
    inst->ci_id = ci->id;
    inst->mig_uuid = ci->mig_uuid;
  }
  // 4. Commit.
  s = PutRecord(copy, as_idle ? InstanceState::kIdle : InstanceState::kActive,
                store::RecordPhase::kCommitted);
  if (!s.ok()) {
    Status ds = DestroyInstance(key);
    return s;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Instance* found = placeholder();
    if (found == nullptr) {
      return InternalError("Creating placeholder of " + key.ToString() +
                           " vanished during its create");
    }
    Instance& inst = *found;
    inst.committed = true;
    inst.owner = copy.owner;
    inst.request_id = copy.request_id;
    inst.last_used = copy.last_used;
    inst.published = true;  // OnPublish below; an unpublish after a failed publish is harmless
    ++counters_.creates;
  }
  s = observer_.OnPublish(PublishedLocked(copy));
  if (!s.ok()) {
    Status ds = DestroyInstance(key);
    return s.WithContext("publishing " + ci->mig_uuid.value());
  }
  spdlog::debug("instance created{}", Fields()
                                         .Add("gpu", key.gpu_uuid)
                                         .Add("gi", gi->id)
                                         .Add("ci", ci->id)
                                         .Add("mig", ci->mig_uuid)
                                         .Add("profile", copy.profile)
                                         .Add("placement", key.placement)
                                         .Add("request", request_id));
  return OkStatus();
}

StatusOr<Allocation> Manager::Allocate(const AllocateRequest& request) {
  const Clock::MonoPoint start = clock_.MonotonicNow();
  StatusOr<Allocation> result = AllocateImpl(request);
  if (options_.listener != nullptr) {
    AllocationOutcome o;
    o.request_id = request.request_id;
    o.code = result.status().code();
    o.instances = static_cast<uint32_t>(request.instances.size());
    o.duration = std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.MonotonicNow() - start);
    if (result.ok()) {
      o.replayed = result->replayed;
      if (!result->replayed) {
        o.path = AllocationPath::kReuse;
        for (planner::Stage st : result->stages) {
          if (st == planner::Stage::kReclaim) {
            o.path = AllocationPath::kReclaimCreate;
          } else if (st == planner::Stage::kFree && o.path == AllocationPath::kReuse) {
            o.path = AllocationPath::kCreate;
          }
        }
      }
    }
    options_.listener->OnAllocation(o);
  }
  return result;
}

StatusOr<Allocation> Manager::AllocateImpl(const AllocateRequest& request) {
  if (request.request_id.empty()) return InvalidArgumentError("request id is required");
  if (request.instances.empty()) return InvalidArgumentError("no instance requested");
  if (request.owner.empty()) return InvalidArgumentError("owner is required");
  if (request.owner.kind == store::Owner::Kind::kPod &&
      (request.owner.pod_uid.value().empty() || request.owner.pod_name.empty() ||
       request.owner.pod_namespace.empty())) {
    return InvalidArgumentError("pod owner needs namespace, name and uid");
  }
  if (request.owner.kind == store::Owner::Kind::kOpaque && request.owner.opaque_id.empty()) {
    return InvalidArgumentError("opaque owner needs an id");
  }
  struct Reused {
    store::RecordKey key;
    std::optional<Clock::TimePoint> last_used;
  };
  planner::Plan plan;
  std::vector<store::RecordKey> keys(request.instances.size());
  std::vector<Reused> reused;
  std::vector<store::RecordKey> created;
  std::vector<store::RecordKey> reclaims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto prev = allocations_.find(request.request_id);
    if (prev != allocations_.end()) {
      // The same instances, too: profile (by canonical name), GPU and
      // placement wherever the request pins them. After a restart the
      // allocation's instances come back in record order, so specs are
      // matched to instances regardless of position (a bipartite matching;
      // at most 64 each), and the replay answers in request order.
      const std::vector<store::RecordKey>& prev_keys = prev->second.keys;
      const size_t n = request.instances.size();
      std::vector<int> spec_of_key(prev_keys.size(), -1);
      bool same = prev->second.owner == request.owner && prev_keys.size() == n;
      if (same) {
        auto fits = [&](size_t si, size_t ki) {
          const InstanceSpec& spec = request.instances[si];
          const Instance& inst = instances_[prev_keys[ki]];
          const mig::GpuModel* model = ModelOf(inst.gpu);
          return model != nullptr && Canonical(*model, spec.profile) == inst.profile &&
                 (!spec.gpu || *spec.gpu == inst.gpu) &&
                 (!spec.placement || *spec.placement == inst.key.placement);
        };
        std::vector<char> seen;
        std::function<bool(size_t)> augment = [&](size_t si) {
          // Prefer the instance at the same position (the common case).
          for (size_t step = 0; step < n; ++step) {
            const size_t ki = (si + step) % n;
            if (seen[ki] || !fits(si, ki)) continue;
            seen[ki] = 1;
            if (spec_of_key[ki] < 0 || augment(static_cast<size_t>(spec_of_key[ki]))) {
              spec_of_key[ki] = static_cast<int>(si);
              return true;
            }
          }
          return false;
        };
        for (size_t si = 0; same && si < n; ++si) {
          seen.assign(n, 0);
          same = augment(si);
        }
      }
      if (!same) {
        return AlreadyExistsError("request id " + request.request_id +
                                  " was already used by another allocation (different owner "
                                  "or instances); use a new request id");
      }
      Allocation a;
      a.request_id = request.request_id;
      a.owner = request.owner;
      a.replayed = true;
      a.instances.resize(n);
      for (size_t ki = 0; ki < n; ++ki) {
        a.instances[static_cast<size_t>(spec_of_key[ki])] = ViewLocked(instances_[prev_keys[ki]]);
      }
      return a;
    }
    if (in_flight_.count(request.request_id) != 0) {
      return AbortedError("request " + request.request_id + " is in flight; retry");
    }
    if (Status as = CheckAllowlistLocked(request.instances); !as.ok()) {
      ++counters_.allocation_failures;
      return as;
    }
    const int64_t tick = NowTick();
    for (const InstanceSpec& spec : request.instances) demand_.Observe(spec.profile, tick);
    StatusOr<planner::Plan> p = planner_.MakePlan(BuildPlanInputLocked(request.instances));
    if (!p.ok()) {
      ++counters_.allocation_failures;
      return p.status();
    }
    plan = std::move(*p);
    // Validate, then reserve (atomic with the plan under mu_).
    for (const planner::InstancePlan& ip : plan.instances) {
      for (const auto& r : ip.reclaim) {
        Instance* inst = FindByUuidLocked(r.key);
        if (inst == nullptr || inst->state != InstanceState::kIdle || inst->busy) {
          return InternalError("plan reclaims unknown instance " + r.key);
        }
      }
      if (ip.stage == planner::Stage::kReuse) {
        Instance* inst = FindByUuidLocked(ip.reuse_key);
        if (inst == nullptr || inst->state != InstanceState::kIdle || inst->busy) {
          return InternalError("plan reuses unknown instance " + ip.reuse_key);
        }
      }
    }
    for (size_t i = 0; i < plan.instances.size(); ++i) {
      const planner::InstancePlan& ip = plan.instances[i];
      for (const auto& r : ip.reclaim) {
        Instance* inst = FindByUuidLocked(r.key);
        inst->reclaim_reason = EventReason::kReclaimPressure;
        MIGD_RETURN_IF_ERROR(
            TransitionLocked(*inst, InstanceState::kReclaiming, EventReason::kReclaimPressure));
        reclaims.push_back(inst->key);
      }
      if (ip.stage == planner::Stage::kReuse) {
        Instance* inst = FindByUuidLocked(ip.reuse_key);
        reused.push_back({inst->key, inst->last_used});
        inst->owner = request.owner;
        inst->request_id = request.request_id;
        MIGD_RETURN_IF_ERROR(TransitionLocked(*inst, InstanceState::kActive, EventReason::kAllocate));
        keys[i] = inst->key;
      } else {
        const Gpu& gpu = gpus_.at(ip.gpu.value());
        store::RecordKey key{gpu.info.uuid, ip.profile_id, ip.placement};
        if (instances_.count(key) != 0) {
          return AbortedError("placement " + key.ToString() + " is busy; retry");
        }
        Instance ph;
        ph.key = key;
        ph.gpu = ip.gpu;
        ph.profile = ip.profile;
        ph.created_at = clock_.Now();
        ph.owner = request.owner;
        ph.request_id = request.request_id;
        MIGD_RETURN_IF_ERROR(TransitionLocked(ph, InstanceState::kCreating, EventReason::kAllocate));
        instances_.emplace(key, std::move(ph));
        created.push_back(key);
        keys[i] = key;
      }
    }
    in_flight_.insert(request.request_id);
  }
  std::set<uint32_t> gpu_set;
  for (const auto& ip : plan.instances) {
    gpu_set.insert(ip.gpu.value());
    for (const auto& r : ip.reclaim) gpu_set.insert(r.gpu.value());
  }
  Status failure;
  std::set<store::RecordKey> created_done;  // CreateInstance returned OK
  std::set<store::RecordKey> reuse_written;
  {
    auto locks = LockGpus(gpu_set);
    // Reclaims first; every reserved one is destroyed even after a failure
    // (Reclaiming has no way back to Idle, and destroying Idle is harmless).
    for (const auto& k : reclaims) {
      Status s = DestroyInstance(k);
      if (!s.ok() && failure.ok()) failure = s;
    }
    for (size_t i = 0; i < plan.instances.size() && failure.ok(); ++i) {
      const planner::InstancePlan& ip = plan.instances[i];
      if (ip.stage == planner::Stage::kReuse) {
        Instance copy;
        {
          std::lock_guard<std::mutex> lock(mu_);
          Instance& inst = instances_[keys[i]];
          inst.last_used = clock_.Now();
          copy = inst;
        }
        Status s = PutRecord(copy, InstanceState::kActive, store::RecordPhase::kCommitted);
        if (s.ok()) {
          reuse_written.insert(keys[i]);
          PublishedInstance pub;
          {
            std::lock_guard<std::mutex> lock(mu_);
            pub = PublishedLocked(copy);
            instances_[keys[i]].published = true;
          }
          s = observer_.OnPublish(pub);
        }
        if (!s.ok()) failure = s;
      } else {
        Status s = CreateInstance(keys[i], request.owner, request.request_id, false);
        if (s.ok()) {
          created_done.insert(keys[i]);
        } else {
          failure = s;
        }
      }
    }
    if (!failure.ok()) {
      // Roll back: destroy what this request created, return reuses to Idle.
      for (const auto& k : created) {
        if (created_done.count(k) != 0) {
          Status ds = DestroyInstance(k);
          (void)ds;  // logged inside; the instance is in Error if it failed
        } else {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = instances_.find(k);
          // Not started (CreateInstance cleaned up anything it started).
          // A placeholder at this key may already be another request's: a
          // failed create of ours freed the key, and a concurrent Allocate
          // reserved it again (it waits for this GPU's lock). Only ours goes.
          if (it != instances_.end() && it->second.state == InstanceState::kCreating &&
              it->second.request_id == request.request_id && !it->second.gi_id &&
              TransitionLocked(it->second, InstanceState::kNone, EventReason::kRollback).ok()) {
            instances_.erase(it);
          }
        }
      }
      for (const Reused& r : reused) {
        Instance copy;
        {
          std::lock_guard<std::mutex> lock(mu_);
          Instance& inst = instances_[r.key];
          inst.owner = store::Owner();
          inst.request_id.clear();
          inst.last_used = r.last_used;
          Status ts = TransitionLocked(inst, InstanceState::kIdle, EventReason::kRollback);
          (void)ts;
          copy = inst;
        }
        if (reuse_written.count(r.key) != 0) {
          Status ps = PutRecord(copy, InstanceState::kIdle, store::RecordPhase::kCommitted);
          if (!ps.ok()) {
            spdlog::error("cannot return reused instance to Idle on disk{}",
                          Fields().Add("mig", copy.mig_uuid).Add("error", ps));
          }
        }
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.erase(request.request_id);
  if (!failure.ok()) {
    ++counters_.allocation_failures;
    ++counters_.rollbacks;
    spdlog::error("allocation failed, rolled back{}",
                  Fields().Add("request", request.request_id).Add("error", failure));
    return failure;
  }
  Allocation a;
  a.request_id = request.request_id;
  a.owner = request.owner;
  for (const auto& k : created) {
    Status ts = TransitionLocked(instances_[k], InstanceState::kActive, EventReason::kAllocate);
    (void)ts;
  }
  counters_.reuses += reused.size();
  ++counters_.allocations;
  for (size_t i = 0; i < keys.size(); ++i) {
    a.instances.push_back(ViewLocked(instances_[keys[i]]));
    a.stages.push_back(plan.instances[i].stage);
  }
  allocations_[request.request_id] = {request.owner, keys};
  spdlog::info("allocated{}", Fields()
                                  .Add("request", request.request_id)
                                  .Add("instances", keys.size())
                                  .Add("reused", reused.size())
                                  .Add("reclaimed", reclaims.size()));
  return a;
}

Status Manager::Release(const std::string& request_id) {
  std::vector<Instance> copies;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.find(request_id);
    if (it == allocations_.end()) return NotFoundError("no allocation " + request_id);
    for (const auto& k : it->second.keys) {
      Instance& inst = instances_[k];
      if (inst.state != InstanceState::kActive || inst.busy) {
        return AbortedError("allocation " + request_id + " is busy; retry");
      }
    }
    for (const auto& k : it->second.keys) {
      instances_[k].busy = true;
      copies.push_back(instances_[k]);
    }
  }
  Status first;
  const Clock::TimePoint now = clock_.Now();
  for (Instance& c : copies) {
    c.last_used = now;
    c.owner = store::Owner();
    c.request_id.clear();
    Status s = PutRecord(c, InstanceState::kIdle, store::RecordPhase::kCommitted);
    std::lock_guard<std::mutex> lock(mu_);
    Instance& inst = instances_[c.key];
    inst.busy = false;
    if (!s.ok()) {
      if (first.ok()) first = s;
      continue;
    }
    inst.owner = store::Owner();
    inst.request_id.clear();
    inst.last_used = now;
    MIGD_RETURN_IF_ERROR(TransitionLocked(inst, InstanceState::kIdle, EventReason::kRelease));
    ++counters_.releases;
    auto ait = allocations_.find(request_id);
    if (ait != allocations_.end()) {
      auto& ks = ait->second.keys;
      ks.erase(std::remove(ks.begin(), ks.end(), c.key), ks.end());
      if (ks.empty()) allocations_.erase(ait);
    }
  }
  if (first.ok()) {
    spdlog::info("released{}", Fields().Add("request", request_id).Add("instances", copies.size()));
  }
  return first;
}

Status Manager::ReleaseInstance(const MigUuid& mig_uuid) {
  std::string request_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Instance* inst = FindByUuidLocked(mig_uuid.value());
    if (inst == nullptr) return NotFoundError("no instance " + mig_uuid.value());
    if (inst->state == InstanceState::kIdle) return OkStatus();
    if (inst->state != InstanceState::kActive || inst->busy) {
      return FailedPreconditionError("instance " + mig_uuid.value() + " is " +
                                     std::string(InstanceStateName(inst->state)));
    }
    request_id = inst->request_id;
    auto it = allocations_.find(request_id);
    if (it == allocations_.end() || it->second.keys.size() != 1) {
      // Split the instance out of its allocation.
      if (it != allocations_.end()) {
        auto& ks = it->second.keys;
        ks.erase(std::remove(ks.begin(), ks.end(), inst->key), ks.end());
        if (ks.empty()) allocations_.erase(it);
      }
      request_id = "instance:" + mig_uuid.value();
      allocations_[request_id] = {inst->owner, {inst->key}};
    }
  }
  return Release(request_id);
}

void Manager::ReclaimKeys(const std::vector<store::RecordKey>& keys, ReclaimResult* result) {
  std::map<uint32_t, std::vector<store::RecordKey>> by_gpu;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& k : keys) {
      auto it = instances_.find(k);
      if (it != instances_.end()) by_gpu[it->second.gpu.value()].push_back(k);
    }
  }
  for (const auto& [g, ks] : by_gpu) {
    auto locks = LockGpus({g});
    for (const auto& k : ks) {
      InstanceView v;
      {
        std::lock_guard<std::mutex> lock(mu_);
        v = ViewLocked(instances_[k]);
      }
      Status s = DestroyInstance(k);
      if (!s.ok()) {
        // Report the instance as it is now (Error), not as it was.
        std::lock_guard<std::mutex> lock(mu_);
        auto it = instances_.find(k);
        if (it != instances_.end()) v = ViewLocked(it->second);
      }
      if (result != nullptr) (s.ok() ? result->destroyed : result->failed).push_back(v);
    }
  }
}

StatusOr<ReclaimResult> Manager::Reclaim(const ReclaimFilter& filter) {
  std::vector<store::RecordKey> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, inst] : instances_) {
      if (inst.state != InstanceState::kIdle || inst.busy) continue;
      if (filter.gpu && inst.gpu != *filter.gpu) continue;
      if (filter.profile && inst.profile != *filter.profile) continue;
      inst.reclaim_reason = EventReason::kReclaimOperator;
      MIGD_RETURN_IF_ERROR(
          TransitionLocked(inst, InstanceState::kReclaiming, EventReason::kReclaimOperator));
      keys.push_back(k);
    }
  }
  ReclaimResult result;
  ReclaimKeys(keys, &result);
  return result;
}

ManagerSnapshot Manager::List() const {
  ManagerSnapshot s;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, inst] : instances_) s.instances.push_back(ViewLocked(inst));
  std::sort(s.instances.begin(), s.instances.end(), [](const auto& a, const auto& b) {
    return std::tie(a.gpu, a.placement) < std::tie(b.gpu, b.placement);
  });
  for (const auto& [idx, gpu] : gpus_) {
    if (!Managed(gpu)) continue;
    for (const auto& gi : gpu.foreign) {
      ForeignInstance f;
      f.gpu = GpuIndex(idx);
      f.gpu_uuid = gpu.info.uuid;
      f.profile_id = gi.profile_id;
      const mig::GiProfile* p = gpu.model->FindProfileById(gi.profile_id);
      f.profile = p ? p->name : "";
      f.placement = gi.placement;
      f.gi_id = gi.id;
      f.compute_instances = gi.compute_instances;
      s.foreign.push_back(std::move(f));
    }
  }
  return s;
}

StatusOr<planner::Plan> Manager::Plan(const std::vector<InstanceSpec>& instances) const {
  if (instances.empty()) return InvalidArgumentError("no instance requested");
  std::lock_guard<std::mutex> lock(mu_);
  MIGD_RETURN_IF_ERROR(CheckAllowlistLocked(instances));
  return planner_.MakePlan(BuildPlanInputLocked(instances));
}

}  // namespace migd::engine
