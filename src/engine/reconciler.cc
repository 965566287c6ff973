// Manager's reconciler: rediscovery of unmanaged GPUs (recovery.cc), Error
// retries, record-removal retries, idle TTL, per-GPU idle cap, warm pool,
// drift detection.
#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/manager.h"

namespace migd::engine {

StatusOr<ReconcileReport> Manager::ReconcileOnce() {
  std::lock_guard<std::mutex> rlock(reconcile_mu_);
  ReconcileReport report;
  Status first;

  // 0. GPUs recovery could not manage (recovery.cc): probed, taken over once
  // they answer MIG-enabled and verify. Never an error of the pass.
  Rediscover(report);

  // 1. Retry destroys of Error instances (fail closed until NVML agrees).
  std::map<uint32_t, std::vector<store::RecordKey>> errors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, inst] : instances_) {
      if (inst.state == InstanceState::kError) errors[inst.gpu.value()].push_back(k);
    }
  }
  for (const auto& [g, keys] : errors) {
    auto locks = LockGpus({g});
    for (const auto& k : keys) {
      Status s = DestroyInstance(k);
      if (s.ok()) {
        ++report.errors_cleaned;
      } else {
        ++report.errors_remaining;
      }
    }
  }

  // 2. Queued record removals.
  Status rs = store_.RetryPendingRemovals();
  if (!rs.ok()) spdlog::warn("record removal retry failed{}", Fields().Add("error", rs));
  report.pending_record_removals = store_.pending_removals();
  if (Status os = observer_.OnReconcile(); !os.ok()) {
    spdlog::warn("observer retry failed{}", Fields().Add("error", os));
  }

  // 3. Idle TTL (the warm pool's minimum is kept).
  const ManagerPolicy policy = this->policy();
  if (policy.idle_ttl) {
    std::vector<store::RecordKey> keys;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Clock::TimePoint now = clock_.Now();
      std::map<std::string, uint32_t> idle_by_profile;
      std::vector<Instance*> idle;
      for (auto& [k, inst] : instances_) {
        if (inst.state == InstanceState::kIdle && !inst.busy) {
          ++idle_by_profile[inst.profile];
          idle.push_back(&inst);
        }
      }
      std::sort(idle.begin(), idle.end(), [](const Instance* a, const Instance* b) {
        return a->last_used < b->last_used;
      });
      for (Instance* inst : idle) {
        const Clock::TimePoint last = inst->last_used.value_or(Clock::TimePoint{});
        if (now - last < *policy.idle_ttl) continue;
        auto wp = policy.warm_pool.find(inst->profile);
        uint32_t& have = idle_by_profile[inst->profile];
        if (wp != policy.warm_pool.end() && have <= wp->second) continue;
        if (!TransitionLocked(*inst, InstanceState::kReclaiming, EventReason::kReclaimTtl).ok()) {
          continue;
        }
        inst->reclaim_reason = EventReason::kReclaimTtl;
        --have;
        keys.push_back(inst->key);
      }
    }
    ReclaimResult r;
    ReclaimKeys(keys, &r);
    report.ttl_reclaimed = r.destroyed.size();
    std::lock_guard<std::mutex> lock(mu_);
    counters_.ttl_reclaims += r.destroyed.size();
  }

  // 4. Per-GPU idle cap, least recently used first.
  if (policy.max_idle_per_gpu) {
    std::vector<store::RecordKey> keys;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::map<uint32_t, std::vector<Instance*>> idle;
      for (auto& [k, inst] : instances_) {
        if (inst.state == InstanceState::kIdle && !inst.busy) {
          idle[inst.gpu.value()].push_back(&inst);
        }
      }
      for (auto& [g, list] : idle) {
        if (list.size() <= *policy.max_idle_per_gpu) continue;
        std::sort(list.begin(), list.end(), [](const Instance* a, const Instance* b) {
          return std::tie(a->last_used, a->key) < std::tie(b->last_used, b->key);
        });
        const size_t excess = list.size() - *policy.max_idle_per_gpu;
        for (size_t i = 0; i < excess; ++i) {
          if (TransitionLocked(*list[i], InstanceState::kReclaiming, EventReason::kReclaimCap)
                  .ok()) {
            list[i]->reclaim_reason = EventReason::kReclaimCap;
            keys.push_back(list[i]->key);
          }
        }
      }
    }
    ReclaimResult r;
    ReclaimKeys(keys, &r);
    report.cap_reclaimed = r.destroyed.size();
    std::lock_guard<std::mutex> lock(mu_);
    counters_.cap_reclaims += r.destroyed.size();
  }

  // 5. Drift.
  Status ds = DetectDrift(report);
  if (!ds.ok() && first.ok()) first = ds;

  // 6. Warm pool.
  WarmPool(report);

  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.reconcile_runs;
    if (!first.ok()) ++counters_.reconcile_errors;
  }
  if (!first.ok()) return first;
  return report;
}

Status Manager::DetectDrift(ReconcileReport& report) {
  Status first;
  std::vector<store::RecordKey> vanished_idle;
  for (auto& [g, gpu] : gpus_) {
    if (!Managed(gpu)) continue;
    auto locks = LockGpus({g});
    StatusOr<std::vector<driver::GpuInstanceInfo>> live = driver_.ListGpuInstances(GpuIndex(g));
    if (!live.ok()) {
      if (first.ok()) first = live.status().WithContext("drift check of GPU " +
                                                        gpu.info.uuid.value());
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::set<uint32_t> tracked_gis;
    std::set<std::pair<GiProfileId, mig::Placement>> tracked_places;
    for (auto& [k, inst] : instances_) {
      if (inst.gpu.value() != g) continue;
      if (inst.gi_id) tracked_gis.insert(inst.gi_id->value());
      tracked_places.insert({k.profile_id, k.placement});
      if (!inst.committed || !inst.gi_id || !inst.ci_id) continue;
      if (inst.state != InstanceState::kActive && inst.state != InstanceState::kIdle) continue;
      bool found = false;
      for (const auto& gi : *live) {
        if (gi.id != *inst.gi_id) continue;
        for (const auto& ci : gi.compute_instances) {
          if (ci.id == *inst.ci_id && ci.mig_uuid == inst.mig_uuid) found = true;
        }
      }
      if (found) continue;
      ++report.drift_vanished;
      ++counters_.drift_vanished;
      spdlog::warn("drift: tracked instance vanished{}",
                   Fields()
                       .Add("gpu", k.gpu_uuid)
                       .Add("mig", inst.mig_uuid)
                       .Add("state", InstanceStateName(inst.state))
                       .Add("placement", k.placement));
      // An Idle one is forgotten (nothing to destroy); an Active one stays
      // tracked for its owner, and its slices stay blocked.
      if (inst.state == InstanceState::kIdle && !inst.busy) vanished_idle.push_back(k);
    }
    std::vector<driver::GpuInstanceInfo> foreign;
    for (const auto& gi : *live) {
      if (tracked_gis.count(gi.id.value()) != 0) continue;
      if (tracked_places.count({gi.profile_id, gi.placement}) != 0) continue;  // in creation
      foreign.push_back(gi);
    }
    for (const auto& gi : foreign) {
      const bool known = std::any_of(gpu.foreign.begin(), gpu.foreign.end(),
                                     [&](const auto& f) { return f.id == gi.id; });
      if (!known) {
        ++report.drift_foreign_appeared;
        ++counters_.drift_foreign_appeared;
        spdlog::warn("drift: foreign instance appeared, preserved{}",
                     Fields().Add("gpu", gpu.info.uuid).Add("gi", gi.id).Add("placement",
                                                                             gi.placement));
      }
    }
    for (const auto& f : gpu.foreign) {
      const bool still = std::any_of(foreign.begin(), foreign.end(),
                                     [&](const auto& gi) { return f.id == gi.id; });
      if (!still) ++counters_.drift_foreign_gone;
    }
    gpu.foreign = std::move(foreign);
  }
  for (const auto& k : vanished_idle) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = instances_.find(k);
      if (it == instances_.end() || it->second.state != InstanceState::kIdle) continue;
      // Idle -> Reclaiming -> Deleting -> (none): the instance is already gone.
      if (!TransitionLocked(it->second, InstanceState::kReclaiming, EventReason::kDrift).ok() ||
          !TransitionLocked(it->second, InstanceState::kDeleting, EventReason::kDrift).ok() ||
          !TransitionLocked(it->second, InstanceState::kNone, EventReason::kDrift).ok()) {
        continue;
      }
      instances_.erase(it);
    }
    Status s = store_.Remove(k);
    if (!s.ok()) spdlog::warn("record removal queued{}", Fields().Add("error", s));
  }
  return first;
}

void Manager::WarmPool(ReconcileReport& report) {
  const std::map<std::string, uint32_t> pool = policy().warm_pool;
  for (const auto& [profile, target] : pool) {
    for (uint32_t attempt = 0; attempt < target; ++attempt) {
      store::RecordKey key;
      uint32_t gpu_index = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        uint32_t have = 0;
        for (const auto& [k, inst] : instances_) {
          if (inst.state == InstanceState::kIdle && inst.profile == profile) ++have;
        }
        if (have >= target) break;
        planner::PlanInput in =
            BuildPlanInputLocked({InstanceSpec{profile, std::nullopt, std::nullopt}});
        // Idle instances are not available to the pool: it adds, never takes.
        for (auto& g : in.gpus) {
          for (auto& o : g.occupants) {
            if (o.state == planner::OccupantState::kIdle) o.state = planner::OccupantState::kActive;
          }
        }
        StatusOr<planner::Plan> plan = planner_.MakePlan(in);
        // Only in free space: never reclaim, never take from a request.
        if (!plan.ok() || plan->instances[0].stage != planner::Stage::kFree) break;
        const planner::InstancePlan& ip = plan->instances[0];
        if (ip.profile != profile) break;  // the name resolves to another profile's name
        gpu_index = ip.gpu.value();
        key = {gpus_.at(gpu_index).info.uuid, ip.profile_id, ip.placement};
        if (instances_.count(key) != 0) break;
        Instance ph;
        ph.key = key;
        ph.gpu = ip.gpu;
        ph.profile = ip.profile;
        ph.created_at = clock_.Now();
        if (!TransitionLocked(ph, InstanceState::kCreating, EventReason::kWarmPool).ok()) break;
        instances_.emplace(key, std::move(ph));
      }
      Status s;
      {
        auto locks = LockGpus({gpu_index});
        s = CreateInstance(key, store::Owner(), std::string(), /*as_idle=*/true);
      }
      if (!s.ok()) {
        spdlog::warn("warm pool create failed{}", Fields().Add("profile", profile).Add("error", s));
        break;
      }
      std::lock_guard<std::mutex> lock(mu_);
      auto it = instances_.find(key);
      if (it != instances_.end()) {
        // Creating -> Active -> Idle: created for nobody, released at once.
        Status a = TransitionLocked(it->second, InstanceState::kActive, EventReason::kWarmPool);
        Status b = TransitionLocked(it->second, InstanceState::kIdle, EventReason::kWarmPool);
        (void)a;
        (void)b;
      }
      ++report.warm_created;
      ++counters_.warm_creates;
    }
  }
}

void Manager::StartReconciler() {
  std::lock_guard<std::mutex> lock(thread_mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { ReconcilerLoop(); });
}

void Manager::StopReconciler() {
  {
    std::lock_guard<std::mutex> lock(thread_mu_);
    stop_ = true;
  }
  thread_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Manager::ReconcilerLoop() {
  std::unique_lock<std::mutex> lock(thread_mu_);
  while (!stop_) {
    thread_cv_.wait_for(lock, options_.reconcile_interval, [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    StatusOr<ReconcileReport> r = ReconcileOnce();
    if (!r.ok()) spdlog::error("reconcile failed{}", Fields().Add("error", r.status()));
    lock.lock();
  }
}

}  // namespace migd::engine
