#include "engine/allocator.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/plan_input.h"
#include "engine/replay.h"

namespace migd::engine {
namespace {

Status ValidateRequest(const AllocateRequest& request) {
  if (request.request_id.empty()) return InvalidArgumentError("request id is required");
  if (request.instances.empty()) return InvalidArgumentError("no instance requested");
  const store::Owner& owner = request.owner;
  if (owner.empty()) return InvalidArgumentError("owner is required");
  if (owner.kind == store::Owner::Kind::kPod &&
      (owner.pod_uid.value().empty() || owner.pod_name.empty() || owner.pod_namespace.empty())) {
    return InvalidArgumentError("pod owner needs namespace, name and uid");
  }
  if (owner.kind == store::Owner::Kind::kOpaque && owner.opaque_id.empty()) {
    return InvalidArgumentError("opaque owner needs an id");
  }
  return OkStatus();
}

bool Reservable(const TrackedInstance* inst) {
  return inst != nullptr && inst->state == InstanceState::kIdle && !inst->busy &&
         !inst->unhealthy;
}

}  // namespace

Allocator::Allocator(Registry& registry, const GpuTable& gpus, const Policy& policy,
                     Executor& executor, RecordJournal& journal, Clock& clock,
                     int64_t demand_half_life_seconds,
                     planner::PlannerOptions planner_options)
    : registry_(registry),
      gpus_(gpus),
      policy_(policy),
      executor_(executor),
      journal_(journal),
      clock_(clock),
      planner_(std::move(planner_options)),
      demand_(demand_half_life_seconds) {}

int64_t Allocator::NowTick() const {
  return std::chrono::duration_cast<std::chrono::seconds>(clock_.MonotonicNow().time_since_epoch())
      .count();
}

planner::DemandWeights Allocator::DemandWeights() const {
  MutexLock lock(registry_.mu());
  return demand_.Weights();
}

StatusOr<planner::Plan> Allocator::Plan(const std::vector<InstanceSpec>& specs) const {
  if (specs.empty()) return InvalidArgumentError("no instance requested");
  MutexLock lock(registry_.mu());
  MIGD_RETURN_IF_ERROR(policy_.CheckAllowlist(specs, gpus_));
  return planner_.MakePlan(
      BuildPlanInput(registry_.instances(), registry_.foreign(), gpus_, specs, demand_.Weights(),
                     registry_.unhealthy_gpus()));
}

std::optional<Allocator::WarmSlot> Allocator::ReserveWarm(const std::string& profile,
                                                          uint32_t target) {
  MutexLock lock(registry_.mu());
  uint32_t have = 0;
  for (const auto& [k, inst] : registry_.instances()) {
    if (inst.state == InstanceState::kIdle && inst.profile == profile) ++have;
  }
  if (have >= target) return std::nullopt;
  planner::PlanInput in =
      BuildPlanInput(registry_.instances(), registry_.foreign(), gpus_,
                     {InstanceSpec{profile, std::nullopt, std::nullopt}}, demand_.Weights(),
                     registry_.unhealthy_gpus());
  for (auto& g : in.gpus) {
    for (auto& o : g.occupants) {
      if (o.state == planner::OccupantState::kIdle) o.state = planner::OccupantState::kActive;
    }
  }
  StatusOr<planner::Plan> plan = planner_.MakePlan(in);
  // Only in free space: never reclaim, never take from a request.
  if (!plan.ok() || plan->instances[0].stage != planner::Stage::kFree) return std::nullopt;
  const planner::InstancePlan& ip = plan->instances[0];
  if (ip.profile != profile) return std::nullopt;  // the name resolves to another profile's name
  const store::RecordKey key{gpus_.ManagedInfo(ip.gpu.value())->uuid, ip.profile_id, ip.placement};
  if (registry_.Find(key) != nullptr) return std::nullopt;
  TrackedInstance ph;
  static_cast<store::RecordKey&>(ph.id) = key;
  ph.gpu = ip.gpu;
  ph.profile = ip.profile;
  ph.created_at = clock_.Now();
  if (!registry_.Transition(ph, InstanceState::kCreating, EventReason::kWarmPool).ok()) {
    return std::nullopt;
  }
  registry_.instances().emplace(key, std::move(ph));
  return WarmSlot{ip.gpu, key};
}

StatusOr<Allocation> Allocator::Allocate(const AllocateRequest& request) {
  MIGD_RETURN_IF_ERROR(ValidateRequest(request));
  Reservation r;
  {
    MutexLock lock(registry_.mu());
    if (std::optional<StatusOr<Allocation>> replay = ReplayLocked(request)) return *replay;
    MIGD_ASSIGN_OR_RETURN(r, ReserveLocked(request));
  }
  Progress progress;
  const Status failure = Execute(request, r, progress);
  return Finish(request, r, failure);
}

std::optional<StatusOr<Allocation>> Allocator::ReplayLocked(const AllocateRequest& request) {
  auto prev = registry_.allocations().find(request.request_id);
  if (prev == registry_.allocations().end()) return std::nullopt;
  // The same instances, too: profile (by canonical name), GPU and placement
  // wherever the request pins them.
  const std::vector<store::RecordKey>& keys = prev->second.keys;
  std::vector<const TrackedInstance*> insts;
  for (const store::RecordKey& k : keys) insts.push_back(registry_.Find(k));
  auto fits = [&](size_t si, size_t ki) {
    const InstanceSpec& spec = request.instances[si];
    const TrackedInstance* inst = insts[ki];
    if (inst == nullptr) return false;
    const mig::GpuModel* model = gpus_.Model(inst->gpu.value());
    const mig::GiProfile* p = model == nullptr ? nullptr : model->FindProfileByName(spec.profile);
    return p != nullptr && p->name == inst->profile && (!spec.gpu || *spec.gpu == inst->gpu) &&
           (!spec.placement || *spec.placement == inst->key().placement);
  };
  std::optional<std::vector<size_t>> match;
  if (prev->second.owner == request.owner) {
    match = MatchReplay(request.instances.size(), keys.size(), fits);
  }
  if (!match) {
    return StatusOr<Allocation>(AlreadyExistsError(
        "request id " + request.request_id +
        " was already used by another allocation (different owner or instances); use a new "
        "request id"));
  }
  Allocation a;
  a.request_id = request.request_id;
  a.owner = request.owner;
  a.replayed = true;
  a.instances.resize(keys.size());
  for (size_t ki = 0; ki < keys.size(); ++ki) a.instances[(*match)[ki]] = ViewOf(*insts[ki]);
  return StatusOr<Allocation>(std::move(a));
}

Status Allocator::ValidatePlanLocked(const planner::Plan& plan) {
  std::set<store::RecordKey> creates;
  for (const planner::InstancePlan& ip : plan.instances) {
    for (const auto& r : ip.reclaim) {
      if (!Reservable(registry_.FindByUuid(r.key))) {
        return InternalError("plan reclaims unknown instance " + r.key);
      }
    }
    if (ip.stage == planner::Stage::kReuse) {
      if (!Reservable(registry_.FindByUuid(ip.reuse_key))) {
        return InternalError("plan reuses unknown instance " + ip.reuse_key);
      }
      continue;
    }
    const store::RecordKey key{gpus_.ManagedInfo(ip.gpu.value())->uuid, ip.profile_id,
                               ip.placement};
    if (registry_.Find(key) != nullptr || !creates.insert(key).second) {
      return AbortedError("placement " + key.ToString() + " is busy; retry");
    }
  }
  return OkStatus();
}

StatusOr<Allocator::Reservation> Allocator::ReserveLocked(const AllocateRequest& request) {
  if (registry_.in_flight().count(request.request_id) != 0) {
    return AbortedError("request " + request.request_id + " is in flight; retry");
  }
  if (Status as = policy_.CheckAllowlist(request.instances, gpus_); !as.ok()) {
    ++registry_.counters().allocation_failures;
    return as;
  }
  for (const InstanceSpec& spec : request.instances) {
    auto sick = spec.gpu ? registry_.unhealthy_gpus().find(spec.gpu->value())
                         : registry_.unhealthy_gpus().end();
    if (sick == registry_.unhealthy_gpus().end()) continue;
    ++registry_.counters().allocation_failures;
    return FailedPreconditionError("GPU " + std::to_string(sick->first) + " is unhealthy (" +
                                   sick->second +
                                   "): it takes no new allocation; request another GPU");
  }
  const int64_t tick = NowTick();
  for (const InstanceSpec& spec : request.instances) demand_.Observe(spec.profile, tick);
  const planner::PlanInput input =
      BuildPlanInput(registry_.instances(), registry_.foreign(), gpus_, request.instances,
                     demand_.Weights(), registry_.unhealthy_gpus());
  StatusOr<planner::Plan> p = planner_.MakePlan(input);
  // An arrival for the value policy, placed or refused for want of space (a
  // malformed request is not demand). Cheap: a solve it starts runs on the
  // service's executor, not under this lock.
  if (p.ok() || p.status().code() == StatusCode::kResourceExhausted) {
    planner_.ObserveArrival(input, p.ok());
  }
  if (!p.ok()) {
    ++registry_.counters().allocation_failures;
    return p.status();
  }
  MIGD_RETURN_IF_ERROR(ValidatePlanLocked(*p));
  if (p->search == planner::Search::kGreedy) {
    registry_.counters().margin_reuses += p->stats.margin_reuses;
  }
  Reservation r;
  r.plan = std::move(*p);
  r.keys.resize(r.plan.instances.size());
  for (size_t i = 0; i < r.plan.instances.size(); ++i) {
    const planner::InstancePlan& ip = r.plan.instances[i];
    for (const auto& rc : ip.reclaim) {
      TrackedInstance* inst = registry_.FindByUuid(rc.key);
      inst->reclaim_reason = EventReason::kReclaimPressure;
      MIGD_RETURN_IF_ERROR(
          registry_.Transition(*inst, InstanceState::kReclaiming, EventReason::kReclaimPressure));
      r.reclaims.push_back(inst->key());
    }
    if (ip.stage == planner::Stage::kReuse) {
      TrackedInstance* inst = registry_.FindByUuid(ip.reuse_key);
      r.reused.push_back({inst->key(), inst->last_used});
      inst->owner = request.owner;
      inst->request_id = request.request_id;
      MIGD_RETURN_IF_ERROR(
          registry_.Transition(*inst, InstanceState::kActive, EventReason::kAllocate));
      r.keys[i] = inst->key();
      continue;
    }
    TrackedInstance ph;
    static_cast<store::RecordKey&>(ph.id) = {gpus_.ManagedInfo(ip.gpu.value())->uuid, ip.profile_id,
                                             ip.placement};
    ph.gpu = ip.gpu;
    ph.profile = ip.profile;
    ph.created_at = clock_.Now();
    ph.owner = request.owner;
    ph.request_id = request.request_id;
    MIGD_RETURN_IF_ERROR(
        registry_.Transition(ph, InstanceState::kCreating, EventReason::kAllocate));
    r.created.push_back(ph.key());
    r.keys[i] = ph.key();
    registry_.instances().emplace(ph.key(), std::move(ph));
  }
  registry_.in_flight().insert(request.request_id);
  return r;
}

Status Allocator::Execute(const AllocateRequest& request, const Reservation& r,
                          Progress& progress) {
  std::set<uint32_t> gpu_set;
  for (const auto& ip : r.plan.instances) {
    gpu_set.insert(ip.gpu.value());
    for (const auto& rc : ip.reclaim) gpu_set.insert(rc.gpu.value());
  }
  GpuLocks locks = gpus_.Lock(gpu_set);
  Status failure;
  // Reclaims first; every reserved one is destroyed even after a failure
  // (Reclaiming has no way back to Idle, and destroying Idle is harmless).
  for (const auto& k : r.reclaims) {
    Status s = executor_.Destroy(k);
    if (!s.ok() && failure.ok()) failure = s;
  }
  for (size_t i = 0; i < r.plan.instances.size() && failure.ok(); ++i) {
    if (r.plan.instances[i].stage == planner::Stage::kReuse) {
      failure = Reuse(r.keys[i], progress);
      continue;
    }
    failure = executor_.Create(r.keys[i], request.owner, request.request_id, /*as_idle=*/false);
    if (failure.ok()) progress.created_done.insert(r.keys[i]);
  }
  if (!failure.ok()) Rollback(request, r, progress);
  return failure;
}

Status Allocator::Reuse(const store::RecordKey& key, Progress& progress) {
  TrackedInstance copy;
  {
    MutexLock lock(registry_.mu());
    TrackedInstance* inst = registry_.Find(key);
    if (inst == nullptr) return InternalError("reused instance " + key.ToString() + " vanished");
    inst->last_used = clock_.Now();
    copy = *inst;
  }
  MIGD_RETURN_IF_ERROR(
      journal_.Write(copy, InstanceState::kActive, store::RecordPhase::kCommitted));
  progress.reuse_written.insert(key);
  {
    MutexLock lock(registry_.mu());
    if (TrackedInstance* inst = registry_.Find(key); inst != nullptr) inst->published = true;
  }
  return executor_.Publish(copy);
}

void Allocator::Rollback(const AllocateRequest& request, const Reservation& r,
                         const Progress& progress) {
  for (const auto& k : r.created) {
    if (progress.created_done.count(k) != 0) {
      Status ds = executor_.Destroy(k);
      (void)ds;  // logged inside; the instance is in Error if it failed
      continue;
    }
    // Not started (Create cleaned up anything it started). A placeholder at
    // this key may already be another request's: a failed create of ours
    // freed the key, and a concurrent Allocate reserved it again (it waits
    // for this GPU's lock). Only ours goes.
    MutexLock lock(registry_.mu());
    TrackedInstance* inst = registry_.Find(k);
    if (inst != nullptr && inst->state == InstanceState::kCreating &&
        inst->request_id == request.request_id && !inst->has_gi &&
        registry_.Transition(*inst, InstanceState::kNone, EventReason::kRollback).ok()) {
      registry_.Erase(k);
    }
  }
  for (const Reused& ru : r.reused) {
    TrackedInstance copy;
    {
      MutexLock lock(registry_.mu());
      TrackedInstance* inst = registry_.Find(ru.key);
      if (inst == nullptr) continue;
      inst->ClearOwner();
      inst->last_used = ru.last_used;
      Status ts = registry_.Transition(*inst, InstanceState::kIdle, EventReason::kRollback);
      (void)ts;
      copy = *inst;
    }
    if (progress.reuse_written.count(ru.key) == 0) continue;
    Status ps = journal_.Write(copy, InstanceState::kIdle, store::RecordPhase::kCommitted);
    if (!ps.ok()) {
      spdlog::error("cannot return reused instance to Idle on disk{}",
                    Fields().Add("mig", copy.id.mig_uuid).Add("error", ps));
    }
  }
}

StatusOr<Allocation> Allocator::Finish(const AllocateRequest& request, const Reservation& r,
                                       const Status& failure) {
  MutexLock lock(registry_.mu());
  registry_.in_flight().erase(request.request_id);
  ManagerCounters& counters = registry_.counters();
  if (!failure.ok()) {
    ++counters.allocation_failures;
    ++counters.rollbacks;
    spdlog::error("allocation failed, rolled back{}",
                  Fields().Add("request", request.request_id).Add("error", failure));
    return failure;
  }
  for (const auto& k : r.created) {
    if (TrackedInstance* inst = registry_.Find(k); inst != nullptr) {
      Status ts = registry_.Transition(*inst, InstanceState::kActive, EventReason::kAllocate);
      (void)ts;
    }
  }
  counters.reuses += r.reused.size();
  ++counters.allocations;
  Allocation a;
  a.request_id = request.request_id;
  a.owner = request.owner;
  for (size_t i = 0; i < r.keys.size(); ++i) {
    const TrackedInstance* inst = registry_.Find(r.keys[i]);
    a.instances.push_back(inst == nullptr ? InstanceView() : ViewOf(*inst));
    a.stages.push_back(r.plan.instances[i].stage);
  }
  registry_.allocations()[request.request_id] = {request.owner, r.keys};
  spdlog::info("allocated{}", Fields()
                                  .Add("request", request.request_id)
                                  .Add("instances", r.keys.size())
                                  .Add("reused", r.reused.size())
                                  .Add("reclaimed", r.reclaims.size()));
  return a;
}

Status Allocator::Release(const std::string& request_id) {
  std::vector<TrackedInstance> copies;
  {
    MutexLock lock(registry_.mu());
    auto it = registry_.allocations().find(request_id);
    if (it == registry_.allocations().end()) return NotFoundError("no allocation " + request_id);
    for (const auto& k : it->second.keys) {
      const TrackedInstance* inst = registry_.Find(k);
      if (inst == nullptr || inst->state != InstanceState::kActive || inst->busy) {
        return AbortedError("allocation " + request_id + " is busy; retry");
      }
    }
    for (const auto& k : it->second.keys) {
      TrackedInstance* inst = registry_.Find(k);
      inst->busy = true;
      copies.push_back(*inst);
    }
  }
  Status first;
  std::vector<store::RecordKey> unhealthy_released;
  const Clock::TimePoint now = clock_.Now();
  for (TrackedInstance& c : copies) {
    c.last_used = now;
    c.ClearOwner();
    Status s = journal_.Write(c, InstanceState::kIdle, store::RecordPhase::kCommitted);
    MutexLock lock(registry_.mu());
    TrackedInstance* inst = registry_.Find(c.key());
    if (inst == nullptr) continue;
    inst->busy = false;
    if (!s.ok()) {
      if (first.ok()) first = s;
      continue;
    }
    inst->ClearOwner();
    inst->last_used = now;
    MIGD_RETURN_IF_ERROR(registry_.Transition(*inst, InstanceState::kIdle, EventReason::kRelease));
    ++registry_.counters().releases;
    // An unhealthy instance is destroyed instead of kept Idle.
    if (inst->unhealthy) unhealthy_released.push_back(c.key());
    registry_.RemoveFromAllocation(request_id, c.key());
  }
  if (!unhealthy_released.empty()) {
    std::vector<store::RecordKey> keys;
    {
      MutexLock lock(registry_.mu());
      for (const store::RecordKey& k : unhealthy_released) {
        TrackedInstance* inst = registry_.Find(k);
        if (inst == nullptr || inst->state != InstanceState::kIdle) continue;
        if (registry_.Transition(*inst, InstanceState::kReclaiming, EventReason::kUnhealthy).ok()) {
          inst->reclaim_reason = EventReason::kUnhealthy;
          keys.push_back(k);
        }
      }
    }
    ReclaimResult r;
    executor_.Reclaim(keys, &r);
  }
  if (first.ok()) {
    spdlog::info("released{}", Fields().Add("request", request_id).Add("instances", copies.size()));
  }
  return first;
}

Status Allocator::ReleaseInstance(const MigUuid& mig_uuid) {
  std::string request_id;
  {
    MutexLock lock(registry_.mu());
    TrackedInstance* inst = registry_.FindByUuid(mig_uuid.value());
    if (inst == nullptr) return NotFoundError("no instance " + mig_uuid.value());
    if (inst->state == InstanceState::kIdle) return OkStatus();
    if (inst->state != InstanceState::kActive || inst->busy) {
      return FailedPreconditionError("instance " + mig_uuid.value() + " is " +
                                     std::string(InstanceStateName(inst->state)));
    }
    request_id = inst->request_id;
    auto& allocations = registry_.allocations();
    auto it = allocations.find(request_id);
    if (it == allocations.end() || it->second.keys.size() != 1) {
      // Split the instance out of its allocation.
      if (it != allocations.end()) registry_.RemoveFromAllocation(request_id, inst->key());
      request_id = "instance:" + mig_uuid.value();
      allocations[request_id] = {inst->owner, {inst->key()}};
    }
  }
  return Release(request_id);
}

}  // namespace migd::engine
