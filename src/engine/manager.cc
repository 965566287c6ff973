#include "engine/manager.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "base/status_macros.h"
#include "engine/allocator.h"
#include "engine/engine_health.h"
#include "engine/executor.h"
#include "engine/gpu_table.h"
#include "engine/journal.h"
#include "engine/policy.h"
#include "engine/reconciler.h"
#include "engine/recovery.h"
#include "engine/rediscovery.h"
#include "engine/registry.h"

namespace migd::engine {
namespace {

ManagerPolicy InitialPolicy(const ManagerOptions& o) {
  ManagerPolicy p;
  p.idle_ttl = o.idle_ttl;
  p.max_idle_per_gpu = o.max_idle_per_gpu;
  p.warm_pool = o.warm_pool;
  p.profile_allowlist = o.profile_allowlist;
  return p;
}

AllocationPath PathOf(const Allocation& a) {
  AllocationPath path = AllocationPath::kReuse;
  for (planner::Stage st : a.stages) {
    if (st == planner::Stage::kReclaim) {
      path = AllocationPath::kReclaimCreate;
    } else if (st == planner::Stage::kFree && path == AllocationPath::kReuse) {
      path = AllocationPath::kCreate;
    }
  }
  return path;
}

}  // namespace

Manager::Manager(ManagerOptions options, driver::GpuDriver& driver, store::RecordStore& store,
                 std::unique_ptr<store::GpuMarkStore> gpu_marks, Clock& clock,
                 InstanceObserver* observer)
    : options_(std::move(options)),
      observer_(observer != nullptr ? *observer : noop_observer_),
      gpu_marks_(std::move(gpu_marks)),
      gpus_(std::make_unique<GpuTable>()),
      registry_(std::make_unique<Registry>(clock, options_.listener)),
      policy_(std::make_unique<Policy>(InitialPolicy(options_))),
      journal_(std::make_unique<RecordJournal>(store, options_.boot_id)),
      executor_(std::make_unique<Executor>(driver, *journal_, *registry_, *gpus_, observer_, clock,
                                           options_.listener)),
      allocator_(std::make_unique<Allocator>(
          *registry_, *gpus_, *policy_, *executor_, *journal_, clock,
          options_.demand_half_life_seconds,
          planner::PlannerOptions{
              .values = options_.values,
              .reuse_margin = options_.reuse_margin,
              .reuse_margin_several_gpus = options_.reuse_margin_several_gpus})),
      rediscovery_(std::make_unique<Rediscovery>(options_, driver, *journal_, *registry_, *gpus_,
                                                 observer_, clock)),
      reconciler_(std::make_unique<Reconciler>(*registry_, *gpus_, *policy_, *executor_,
                                               *allocator_, *rediscovery_, driver, *journal_,
                                               observer_, clock, options_.reconcile_interval)),
      // A MIG change: a drift check of the GPU by the reconciler's next
      // pass, at most one pending per GPU (no NVML call on the monitor's
      // thread, nothing on the allocation path).
      health_(std::make_unique<EngineHealth>(
          *registry_, *gpus_, *journal_, gpu_marks_.get(), clock, options_.listener,
          [this](GpuIndex gpu) { reconciler_->RequestDriftCheck(gpu); })),
      clock_(clock) {}

Manager::~Manager() { reconciler_->Stop(); }

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
  for (const auto& [margin, name] :
       {std::pair(options.reuse_margin, "ManagerOptions.reuse_margin"),
        std::pair(options.reuse_margin_several_gpus, "ManagerOptions.reuse_margin_several_gpus")}) {
    if (!margin.has_value()) continue;
    if (Status s = planner::CheckReuseMargin(*margin); !s.ok()) return s.WithContext(name);
  }
  MIGD_ASSIGN_OR_RETURN(std::unique_ptr<store::GpuMarkStore> gpu_marks,
                        store::GpuMarkStore::Open(store.dir(), options.boot_id, clock));
  MIGD_ASSIGN_OR_RETURN(store::GpuMarkLoad marks, gpu_marks->LoadAll());
  std::unique_ptr<Manager> m(
      new Manager(std::move(options), driver, store, std::move(gpu_marks), clock, observer));
  Recovery recovery(m->options_, driver, *m->journal_, *m->registry_, *m->gpus_, *m->executor_,
                    m->observer_, clock);
  std::map<uint32_t, std::string> outcomes;
  MIGD_ASSIGN_OR_RETURN(m->recovery_, recovery.Run(owners, &outcomes));
  // Before anything is served: no allocation may land on a GPU marked in
  // this boot, nor on one whose mark cannot be read.
  m->health_->Restore(marks);
  m->rediscovery_->SetOutcomes(std::move(outcomes));
  // Warm-pool and allowlist names can only be checked against the GPUs.
  MIGD_RETURN_IF_ERROR(m->SetPolicy(m->policy()));
  return StatusOr<std::unique_ptr<Manager>>(std::move(m));
}

StatusOr<Allocation> Manager::Allocate(const AllocateRequest& request) {
  const Clock::MonoPoint start = clock_.MonotonicNow();
  StatusOr<Allocation> result = allocator_->Allocate(request);
  if (options_.listener == nullptr) return result;
  AllocationOutcome o;
  o.request_id = request.request_id;
  o.code = result.status().code();
  o.instances = static_cast<uint32_t>(request.instances.size());
  o.duration = std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.MonotonicNow() - start);
  if (result.ok()) {
    o.replayed = result->replayed;
    if (!result->replayed) o.path = PathOf(*result);
  }
  options_.listener->OnAllocation(o);
  return result;
}

Status Manager::Release(const std::string& request_id) { return allocator_->Release(request_id); }

Status Manager::ReleaseInstance(const MigUuid& mig_uuid) {
  return allocator_->ReleaseInstance(mig_uuid);
}

StatusOr<ReclaimResult> Manager::Reclaim(const ReclaimFilter& filter) {
  std::vector<store::RecordKey> keys;
  {
    MutexLock lock(registry_->mu());
    for (auto& [k, inst] : registry_->instances()) {
      if (inst.state != InstanceState::kIdle || inst.busy) continue;
      if (filter.gpu && inst.gpu != *filter.gpu) continue;
      if (filter.profile && inst.profile != *filter.profile) continue;
      inst.reclaim_reason = EventReason::kReclaimOperator;
      MIGD_RETURN_IF_ERROR(
          registry_->Transition(inst, InstanceState::kReclaiming, EventReason::kReclaimOperator));
      keys.push_back(k);
    }
  }
  ReclaimResult result;
  executor_->Reclaim(keys, &result);
  return result;
}

ManagerSnapshot Manager::List() const {
  MutexLock lock(registry_->mu());
  return registry_->Snapshot(*gpus_);
}

std::vector<GpuView> Manager::Gpus() const {
  std::vector<GpuView> views = gpus_->Views();  // takes the GPU table's lock only
  MutexLock lock(registry_->mu());
  for (GpuView& v : views) {
    auto it = registry_->unhealthy_gpus().find(v.info.index.value());
    if (it == registry_->unhealthy_gpus().end()) continue;
    v.unhealthy = true;
    v.health_reason = it->second;
  }
  return views;
}

StatusOr<planner::Plan> Manager::Plan(const std::vector<InstanceSpec>& instances) const {
  return allocator_->Plan(instances);
}

StatusOr<ReconcileReport> Manager::ReconcileOnce() { return reconciler_->RunOnce(); }

HealthSink& Manager::health_sink() { return *health_; }

StatusOr<HealthClearResult> Manager::ClearGpuHealth(GpuIndex gpu) {
  if (!gpus_->Listed(gpu.value())) {
    return NotFoundError("GPU " + std::to_string(gpu.value()) +
                         " is not on this node (migctl status lists the GPUs)");
  }
  return health_->ClearGpu(gpu);
}

DriftCheckCounters Manager::drift_checks() const { return reconciler_->drift_checks(); }

void Manager::WaitForDriftPasses(uint64_t n) const { reconciler_->WaitForDriftPasses(n); }

void Manager::StartReconciler() { reconciler_->Start(); }

void Manager::StopReconciler() { reconciler_->Stop(); }

ManagerCounters Manager::counters() const {
  MutexLock lock(registry_->mu());
  return registry_->counters();
}

Status Manager::SetPolicy(const ManagerPolicy& policy) { return policy_->Set(policy, *gpus_); }

ManagerPolicy Manager::policy() const { return policy_->Get(); }

const mig::GpuModel* Manager::ModelOf(GpuIndex gpu) const { return gpus_->Model(gpu.value()); }

planner::DemandWeights Manager::DemandWeights() const { return allocator_->DemandWeights(); }

}  // namespace migd::engine
