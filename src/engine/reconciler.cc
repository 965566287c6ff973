#include "engine/reconciler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "base/logging.h"
#include "base/status_macros.h"

namespace migd::engine {

std::vector<TrackedInstance*> SelectExpired(std::vector<TrackedInstance*> idle,
                                            const ManagerPolicy& policy, Clock::TimePoint now) {
  std::vector<TrackedInstance*> out;
  if (!policy.idle_ttl) return out;
  std::map<std::string, uint32_t> idle_by_profile;
  for (const TrackedInstance* inst : idle) ++idle_by_profile[inst->profile];
  std::sort(idle.begin(), idle.end(), [](const TrackedInstance* a, const TrackedInstance* b) {
    return a->last_used < b->last_used;
  });
  for (TrackedInstance* inst : idle) {
    const Clock::TimePoint last = inst->last_used.value_or(Clock::TimePoint{});
    if (now - last < *policy.idle_ttl) continue;
    auto wp = policy.warm_pool.find(inst->profile);
    uint32_t& have = idle_by_profile[inst->profile];
    if (wp != policy.warm_pool.end() && have <= wp->second) continue;
    --have;
    out.push_back(inst);
  }
  return out;
}

std::vector<TrackedInstance*> SelectOverCap(std::vector<TrackedInstance*> idle, uint32_t cap) {
  std::map<uint32_t, std::vector<TrackedInstance*>> by_gpu;
  for (TrackedInstance* inst : idle) by_gpu[inst->gpu.value()].push_back(inst);
  std::vector<TrackedInstance*> out;
  for (auto& [g, list] : by_gpu) {
    if (list.size() <= cap) continue;
    std::sort(list.begin(), list.end(), [](const TrackedInstance* a, const TrackedInstance* b) {
      return std::tie(a->last_used, a->key()) < std::tie(b->last_used, b->key());
    });
    out.insert(out.end(), list.begin(), list.begin() + static_cast<long>(list.size() - cap));
  }
  return out;
}

Reconciler::Reconciler(Registry& registry, const GpuTable& gpus, const Policy& policy,
                       Executor& executor, Allocator& allocator, Rediscovery& rediscovery,
                       driver::GpuDriver& driver, RecordJournal& journal,
                       InstanceObserver& observer, Clock& clock, Clock::Duration interval)
    : registry_(registry),
      gpus_(gpus),
      policy_(policy),
      executor_(executor),
      allocator_(allocator),
      rediscovery_(rediscovery),
      driver_(driver),
      journal_(journal),
      observer_(observer),
      clock_(clock),
      interval_(interval) {}

Reconciler::~Reconciler() { Stop(); }

StatusOr<ReconcileReport> Reconciler::RunOnce() {
  MutexLock pass(&pass_mu_);
  bool serves_drift = false;
  {
    // Requests made from here on wait for the next pass: this pass may have
    // listed their GPU already.
    MutexLock lock(&thread_mu_);
    serves_drift = !pending_drift_.empty();
    pending_drift_.clear();
  }
  StatusOr<ReconcileReport> r = Pass();
  if (serves_drift) {
    MutexLock lock(&thread_mu_);
    ++drift_.passes;
    wake_.SignalAll();
  }
  return r;
}

void Reconciler::RequestDriftCheck(GpuIndex gpu) {
  {
    MutexLock lock(&thread_mu_);
    ++drift_.requested;
    if (!pending_drift_.insert(gpu.value()).second) {
      ++drift_.coalesced;
      return;
    }
  }
  wake_.SignalAll();
}

DriftCheckCounters Reconciler::drift_checks() const {
  MutexLock lock(&thread_mu_);
  DriftCheckCounters c = drift_;
  c.pending = pending_drift_.size();
  return c;
}

void Reconciler::WaitForDriftPasses(uint64_t n) const {
  MutexLock lock(&thread_mu_);
  wake_.Wait(&thread_mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(thread_mu_) {
    return drift_.passes >= n;
  });
}

StatusOr<ReconcileReport> Reconciler::Pass() {
  ReconcileReport report;
  // 0. Never an error of the pass.
  rediscovery_.Run(report);
  RetryErrors(report);
  RetryRemovals(report);
  const ManagerPolicy policy = policy_.Get();
  ReclaimUnhealthy(report);
  ReclaimExpired(policy, report);
  ReclaimOverCap(policy, report);
  const Status first = DetectDrift(report);
  FillWarmPool(policy_.Get(), report);
  {
    MutexLock lock(registry_.mu());
    ++registry_.counters().reconcile_runs;
    if (!first.ok()) ++registry_.counters().reconcile_errors;
  }
  if (!first.ok()) return first;
  return report;
}

void Reconciler::RetryErrors(ReconcileReport& report) {
  std::map<uint32_t, std::vector<store::RecordKey>> errors;
  {
    MutexLock lock(registry_.mu());
    for (const auto& [k, inst] : registry_.instances()) {
      if (inst.state == InstanceState::kError) errors[inst.gpu.value()].push_back(k);
    }
  }
  for (const auto& [g, keys] : errors) {
    GpuLocks locks = gpus_.Lock({g});
    for (const auto& k : keys) {
      (executor_.Destroy(k).ok() ? report.errors_cleaned : report.errors_remaining) += 1;
    }
  }
}

void Reconciler::RetryRemovals(ReconcileReport& report) {
  Status rs = journal_.store().RetryPendingRemovals();
  if (!rs.ok()) spdlog::warn("record removal retry failed{}", Fields().Add("error", rs));
  report.pending_record_removals = journal_.store().pending_removals();
  if (Status os = observer_.OnReconcile(); !os.ok()) {
    spdlog::warn("observer retry failed{}", Fields().Add("error", os));
  }
}

std::vector<store::RecordKey> Reconciler::MarkReclaiming(
    const std::vector<TrackedInstance*>& victims, EventReason reason) {
  std::vector<store::RecordKey> keys;
  for (TrackedInstance* inst : victims) {
    if (!registry_.Transition(*inst, InstanceState::kReclaiming, reason).ok()) continue;
    inst->reclaim_reason = reason;
    keys.push_back(inst->key());
  }
  return keys;
}

namespace {

// The instance's GI, CI and MIG UUID are all in `live`.
bool IsLive(const TrackedInstance& inst, const std::vector<driver::GpuInstanceInfo>& live) {
  for (const auto& gi : live) {
    if (gi.id != inst.id.gi_id) continue;
    for (const auto& ci : gi.compute_instances) {
      if (ci.id == inst.id.ci_id && ci.mig_uuid == inst.id.mig_uuid) return true;
    }
  }
  return false;
}

std::vector<TrackedInstance*> IdleOf(Registry::Instances& instances) {
  std::vector<TrackedInstance*> idle;
  for (auto& [k, inst] : instances) {
    if (inst.state == InstanceState::kIdle && !inst.busy) idle.push_back(&inst);
  }
  return idle;
}

}  // namespace

// Every unhealthy Idle instance is reclaimed (engine/engine_health.h).
void Reconciler::ReclaimUnhealthy(ReconcileReport& report) {
  std::vector<store::RecordKey> keys;
  {
    MutexLock lock(registry_.mu());
    std::vector<TrackedInstance*> sick;
    for (TrackedInstance* inst : IdleOf(registry_.instances())) {
      if (inst->unhealthy) sick.push_back(inst);
    }
    keys = MarkReclaiming(sick, EventReason::kUnhealthy);
  }
  ReclaimResult r;
  executor_.Reclaim(keys, &r);
  (void)report;
}

void Reconciler::ReclaimExpired(const ManagerPolicy& policy, ReconcileReport& report) {
  if (!policy.idle_ttl) return;
  std::vector<store::RecordKey> keys;
  {
    MutexLock lock(registry_.mu());
    keys = MarkReclaiming(SelectExpired(IdleOf(registry_.instances()), policy, clock_.Now()),
                          EventReason::kReclaimTtl);
  }
  ReclaimResult r;
  executor_.Reclaim(keys, &r);
  report.ttl_reclaimed = r.destroyed.size();
  MutexLock lock(registry_.mu());
  registry_.counters().ttl_reclaims += r.destroyed.size();
}

void Reconciler::ReclaimOverCap(const ManagerPolicy& policy, ReconcileReport& report) {
  if (!policy.max_idle_per_gpu) return;
  std::vector<store::RecordKey> keys;
  {
    MutexLock lock(registry_.mu());
    keys = MarkReclaiming(SelectOverCap(IdleOf(registry_.instances()), *policy.max_idle_per_gpu),
                          EventReason::kReclaimCap);
  }
  ReclaimResult r;
  executor_.Reclaim(keys, &r);
  report.cap_reclaimed = r.destroyed.size();
  MutexLock lock(registry_.mu());
  registry_.counters().cap_reclaims += r.destroyed.size();
}

Status Reconciler::DetectDrift(ReconcileReport& report) {
  Status first;
  std::vector<store::RecordKey> vanished_idle;
  for (uint32_t g : gpus_.ManagedIndices()) {
    GpuLocks locks = gpus_.Lock({g});
    StatusOr<std::vector<driver::GpuInstanceInfo>> live = driver_.ListGpuInstances(GpuIndex(g));
    if (!live.ok()) {
      if (first.ok()) {
        first =
            live.status().WithContext("drift check of GPU " + gpus_.ManagedInfo(g)->uuid.value());
      }
      continue;
    }
    MutexLock lock(registry_.mu());
    DriftOfGpu(g, *live, report, vanished_idle);
  }
  ForgetVanished(vanished_idle);
  return first;
}

void Reconciler::DriftOfGpu(uint32_t g, const std::vector<driver::GpuInstanceInfo>& live,
                            ReconcileReport& report, std::vector<store::RecordKey>& vanished_idle) {
  ManagerCounters& counters = registry_.counters();
  std::set<uint32_t> tracked_gis;
  std::set<std::pair<GiProfileId, mig::Placement>> tracked_places;
  for (auto& [k, inst] : registry_.instances()) {
    if (inst.gpu.value() != g) continue;
    if (inst.has_gi) tracked_gis.insert(inst.id.gi_id.value());
    tracked_places.insert({k.profile_id, k.placement});
    if (!inst.committed || !inst.has_gi || !inst.has_ci) continue;
    if (inst.state != InstanceState::kActive && inst.state != InstanceState::kIdle) continue;
    if (IsLive(inst, live)) continue;
    ++report.drift_vanished;
    ++counters.drift_vanished;
    spdlog::warn("drift: tracked instance vanished{}",
                 Fields()
                     .Add("gpu", k.gpu_uuid)
                     .Add("mig", inst.id.mig_uuid)
                     .Add("state", InstanceStateName(inst.state))
                     .Add("placement", k.placement));
    // An Idle one is forgotten (nothing to destroy); an Active one stays
    // tracked for its owner, and its slices stay blocked.
    if (inst.state == InstanceState::kIdle && !inst.busy) vanished_idle.push_back(k);
  }
  std::vector<driver::GpuInstanceInfo> foreign;
  for (const auto& gi : live) {
    if (tracked_gis.count(gi.id.value()) != 0) continue;
    if (tracked_places.count({gi.profile_id, gi.placement}) != 0) continue;  // in creation
    foreign.push_back(gi);
  }
  std::vector<driver::GpuInstanceInfo>& known = registry_.foreign()[g];
  auto has = [](const std::vector<driver::GpuInstanceInfo>& list, NvmlGiId id) {
    return std::any_of(list.begin(), list.end(), [&](const auto& f) { return f.id == id; });
  };
  for (const auto& gi : foreign) {
    if (has(known, gi.id)) continue;
    ++report.drift_foreign_appeared;
    ++counters.drift_foreign_appeared;
    spdlog::warn("drift: foreign instance appeared, preserved{}",
                 Fields()
                     .Add("gpu", gpus_.ManagedInfo(g)->uuid)
                     .Add("gi", gi.id)
                     .Add("placement", gi.placement));
  }
  for (const auto& f : known) {
    if (!has(foreign, f.id)) ++counters.drift_foreign_gone;
  }
  known = std::move(foreign);
}

void Reconciler::ForgetVanished(const std::vector<store::RecordKey>& keys) {
  for (const auto& k : keys) {
    {
      MutexLock lock(registry_.mu());
      TrackedInstance* inst = registry_.Find(k);
      if (inst == nullptr || inst->state != InstanceState::kIdle) continue;
      // Idle -> Reclaiming -> Deleting -> (none): the instance is already gone.
      if (!registry_.Transition(*inst, InstanceState::kReclaiming, EventReason::kDrift).ok() ||
          !registry_.Transition(*inst, InstanceState::kDeleting, EventReason::kDrift).ok() ||
          !registry_.Transition(*inst, InstanceState::kNone, EventReason::kDrift).ok()) {
        continue;
      }
      registry_.Erase(k);
    }
    Status s = journal_.Remove(k);
    if (!s.ok()) spdlog::warn("record removal queued{}", Fields().Add("error", s));
  }
}

void Reconciler::FillWarmPool(const ManagerPolicy& policy, ReconcileReport& report) {
  for (const auto& [profile, target] : policy.warm_pool) {
    for (uint32_t attempt = 0; attempt < target; ++attempt) {
      if (!WarmOne(profile, target, report)) break;
    }
  }
}

bool Reconciler::WarmOne(const std::string& profile, uint32_t target, ReconcileReport& report) {
  const std::optional<Allocator::WarmSlot> slot = allocator_.ReserveWarm(profile, target);
  if (!slot) return false;
  const store::RecordKey& key = slot->key;
  Status s;
  {
    GpuLocks locks = gpus_.Lock({slot->gpu.value()});
    s = executor_.Create(key, store::Owner(), std::string(), /*as_idle=*/true);
  }
  if (!s.ok()) {
    spdlog::warn("warm pool create failed{}", Fields().Add("profile", profile).Add("error", s));
    return false;
  }
  MutexLock lock(registry_.mu());
  if (TrackedInstance* inst = registry_.Find(key); inst != nullptr) {
    // Creating -> Active -> Idle: created for nobody, released at once.
    Status a = registry_.Transition(*inst, InstanceState::kActive, EventReason::kWarmPool);
    Status b = registry_.Transition(*inst, InstanceState::kIdle, EventReason::kWarmPool);
    (void)a;
    (void)b;
  }
  ++report.warm_created;
  ++registry_.counters().warm_creates;
  return true;
}

void Reconciler::Start() {
  MutexLock start(&start_mu_);
  if (thread_.joinable()) return;
  {
    MutexLock lock(&thread_mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void Reconciler::Stop() {
  MutexLock start(&start_mu_);
  {
    MutexLock lock(&thread_mu_);
    stop_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void Reconciler::Loop() {
  while (true) {
    {
      MutexLock lock(&thread_mu_);
      wake_.WaitFor(&thread_mu_, interval_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(thread_mu_) {
        return stop_ || !pending_drift_.empty();
      });
      if (stop_) return;
    }
    StatusOr<ReconcileReport> r = RunOnce();
    if (!r.ok()) spdlog::error("reconcile failed{}", Fields().Add("error", r.status()));
  }
}

}  // namespace migd::engine
