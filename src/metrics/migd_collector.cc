#include "metrics/migd_collector.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include "base/status_macros.h"
#include "engine/capacity.h"
#include "engine/instance_state.h"

namespace migd::metrics {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// "ok", "resource_exhausted", ...
std::string ResultLabel(StatusCode code) { return Lower(StatusCodeName(code)); }

std::string StateLabel(engine::InstanceState state) {
  return Lower(engine::InstanceStateName(state));
}

// Label of migd_allocations_total / migd_allocation_duration_seconds.
std::string PathLabel(const engine::AllocationOutcome& outcome) {
  if (outcome.replayed) return "replay";
  return std::string(engine::AllocationPathName(outcome.path));
}

// migd_reclaims_total's reason label; empty for a non-reclaim reason.
std::string_view ReclaimLabel(engine::EventReason reason) {
  switch (reason) {
    case engine::EventReason::kReclaimPressure:
      return "pressure";
    case engine::EventReason::kReclaimTtl:
      return "ttl";
    case engine::EventReason::kReclaimCap:
      return "cap";
    case engine::EventReason::kReclaimOperator:
      return "operator";
    default:
      return {};
  }
}

constexpr std::string_view kInstances = "migd_instances";
constexpr std::string_view kForeign = "migd_foreign_instances";
constexpr std::string_view kFreeSlices = "migd_gpu_free_slices";
constexpr std::string_view kMemorySlices = "migd_gpu_memory_slices";
constexpr std::string_view kFragmentation = "migd_gpu_fragmentation";
constexpr std::string_view kNvmlCalls = "migd_nvml_calls_total";
constexpr std::string_view kNvmlSessions = "migd_nvml_sessions_opened_total";
constexpr std::string_view kCdiOps = "migd_cdi_operations_total";
constexpr std::string_view kCdiPending = "migd_cdi_pending_removals";
constexpr std::string_view kReconcileRuns = "migd_reconcile_runs_total";
constexpr std::string_view kReconcileErrors = "migd_reconcile_errors_total";
constexpr std::string_view kDrift = "migd_drift_events_total";
constexpr std::string_view kEngineOps = "migd_engine_operations_total";
constexpr std::string_view kGpuUnhealthy = "migd_gpu_unhealthy";
constexpr std::string_view kUnhealthyInstances = "migd_unhealthy_instances";
constexpr std::string_view kValueSolves = "migd_planner_value_solves_total";
constexpr std::string_view kValueFailures = "migd_planner_value_solve_failures_total";
constexpr std::string_view kValueDriftSolves = "migd_planner_value_drift_solves_total";
constexpr std::string_view kValueVersion = "migd_planner_value_table_version";
constexpr std::string_view kValueLastSolve = "migd_planner_value_last_solve_seconds";
constexpr std::string_view kValueMaxSolve = "migd_planner_value_max_solve_seconds";
constexpr std::string_view kValueSolveTime = "migd_planner_value_solve_seconds_total";
constexpr std::string_view kValueMaxBytes = "migd_planner_value_max_table_bytes";
constexpr std::string_view kValueMaxStates = "migd_planner_value_max_table_states";
constexpr std::string_view kValueArrivals = "migd_planner_value_arrivals_total";
constexpr std::string_view kMarginReuses = "migd_planner_margin_reuses_total";
constexpr std::string_view kValueLoad = "migd_planner_value_offered_load";
constexpr std::string_view kBuildInfo = "migd_build_info";
constexpr std::string_view kHamiNodeInfo = "hami_node_gpu_mig_instance_info";
constexpr std::string_view kHamiDeviceInfo = "hami_mig_device_info";

// The families MigdMetrics fills at scrape time (Collect).
std::vector<CollectedFamily> CollectedFamilies() {
  return {
      {std::string(kInstances),
       "Tracked MIG instances by GPU index, profile and state.",
       MetricType::kGauge,
       {"gpu", "profile", "state"}},
      {std::string(kForeign),
       "GPU instances migd did not create and does not manage (preserved, never touched).",
       MetricType::kGauge,
       {"gpu"}},
      {std::string(kFreeSlices),
       "Memory slices of the GPU not covered by any instance (tracked or foreign).",
       MetricType::kGauge,
       {"gpu"}},
      {std::string(kMemorySlices),
       "Memory slices of the GPU (0 when MIG is not enabled).",
       MetricType::kGauge,
       {"gpu"}},
      {std::string(kFragmentation),
       "1 - slices(largest profile creatable now) / slices(largest profile that fits the free "
       "slice count); 0 = unfragmented.",
       MetricType::kGauge,
       {"gpu"}},
      {std::string(kNvmlCalls),
       "NVML calls by exported function and NVML result.",
       MetricType::kCounter,
       {"function", "result"}},
      {std::string(kNvmlSessions),
       "Successful NVML initialisations (stays 1).",
       MetricType::kCounter,
       {}},
      {std::string(kCdiOps),
       "CDI spec file operations by kind (write, verify, remove) and result.",
       MetricType::kCounter,
       {"kind", "result"}},
      {std::string(kCdiPending),
       "CDI spec removals that failed and wait for a retry.",
       MetricType::kGauge,
       {}},
      {std::string(kReconcileRuns), "Reconciler passes.", MetricType::kCounter, {}},
      {std::string(kReconcileErrors),
       "Reconciler passes that ended with an error.",
       MetricType::kCounter,
       {}},
      {std::string(kDrift),
       "Hardware changes found by the reconciler (instance_vanished, foreign_appeared, "
       "foreign_gone).",
       MetricType::kCounter,
       {"kind"}},
      {std::string(kEngineOps),
       "Engine operations on instances (create, reuse, release, destroy, destroy_failed, "
       "rollback, error_cleaned, warm_create).",
       MetricType::kCounter,
       {"operation"}},
      {std::string(kGpuUnhealthy),
       "1 when the health monitor marked the GPU unhealthy (no new allocation), else 0.",
       MetricType::kGauge,
       {"gpu"}},
      {std::string(kUnhealthyInstances),
       "Tracked instances marked unhealthy (never reused; destroyed on release).",
       MetricType::kGauge,
       {"gpu"}},
      {std::string(kMarginReuses),
       "Idle instances handed out that the cost order would have passed over for a create "
       "(planner.reuseMargin).",
       MetricType::kCounter,
       {}},
      {std::string(kValueSolves),
       "Value tables the planner's value service solved and published.",
       MetricType::kCounter,
       {}},
      {std::string(kValueFailures),
       "Value table solves refused (no demand for the GPU model's profiles, too many states); "
       "the cost order serves.",
       MetricType::kCounter,
       {}},
      {std::string(kValueDriftSolves),
       "Value table solves started because the learned demand drifted past "
       "planner.driftThreshold.",
       MetricType::kCounter,
       {}},
      {std::string(kValueVersion),
       "Version of the last value table published (0: none yet, the cost order decides).",
       MetricType::kGauge,
       {}},
      {std::string(kValueLastSolve),
       "Duration of the last value table solve.",
       MetricType::kGauge,
       {}},
      {std::string(kValueMaxSolve),
       "Longest value table solve of the process.",
       MetricType::kGauge,
       {}},
      {std::string(kValueSolveTime),
       "Time spent solving value tables (published ones).",
       MetricType::kCounter,
       {}},
      {std::string(kValueMaxBytes),
       "Memory of the largest value table solved.",
       MetricType::kGauge,
       {}},
      {std::string(kValueMaxStates),
       "States (legal layouts) of the largest value table solved.",
       MetricType::kGauge,
       {}},
      {std::string(kValueArrivals),
       "Requests the value service learned the demand from (Allocate calls that reached the "
       "planner).",
       MetricType::kCounter,
       {}},
      {std::string(kValueLoad),
       "Offered load per GPU the value service estimates from the requests (rho).",
       MetricType::kGauge,
       {}},
      {std::string(kBuildInfo),
       "Build of this migd (always 1).",
       MetricType::kGauge,
       {"version", "revision", "driver"}},
      {std::string(kHamiNodeInfo),
       "HAMi-compatible: one series (=1) per Active MIG instance, labels as HAMi's scheduler.",
       MetricType::kGauge,
       {"node", "device_uuid", "device_index", "mig_uuid", "profile", "gpu_instance_id",
        "compute_instance_id", "placement_start", "placement_size"}},
      {std::string(kHamiDeviceInfo),
       "HAMi-compatible: one series (=1) per Active MIG instance owned by a pod, labels as "
       "HAMi's vGPUmonitor.",
       MetricType::kGauge,
       {"namespace", "pod", "container", "vdevice_index", "device_uuid", "mig_uuid", "profile",
        "gpu_instance_id", "compute_instance_id"}},
  };
}

// Instances: every (gpu, profile) seen gets all states, zeros included, so
// a state that empties reads 0 instead of disappearing.
void AddInstances(CollectSink& sink, const engine::ManagerSnapshot& snapshot) {
  std::map<std::pair<uint32_t, std::string>, std::map<engine::InstanceState, uint32_t>> counts;
  for (const engine::InstanceView& v : snapshot.instances) {
    ++counts[{v.gpu.value(), v.profile}][v.state];
  }
  for (const auto& [key, by_state] : counts) {
    for (engine::InstanceState s : engine::kAllInstanceStates) {
      if (s == engine::InstanceState::kNone) continue;
      auto it = by_state.find(s);
      sink.Add(kInstances, {std::to_string(key.first), key.second, StateLabel(s)},
               it == by_state.end() ? 0 : it->second);
    }
  }
}

void AddGpus(CollectSink& sink, const engine::ManagerSnapshot& snapshot,
             const std::vector<engine::GpuView>& gpus) {
  std::map<uint32_t, uint32_t> foreign;
  for (const engine::ForeignInstance& f : snapshot.foreign) ++foreign[f.gpu.value()];
  for (const engine::GpuView& g : gpus) {
    const std::string gpu = std::to_string(g.info.index.value());
    if (g.model == nullptr) {
      sink.Add(kMemorySlices, {gpu}, 0);
      continue;
    }
    sink.Add(kForeign, {gpu}, foreign[g.info.index.value()]);
    const engine::GpuCapacity cap = engine::ComputeCapacity(g, snapshot);
    sink.Add(kMemorySlices, {gpu}, cap.memory_slices);
    sink.Add(kFreeSlices, {gpu}, cap.free_slices);
    sink.Add(kFragmentation, {gpu}, cap.fragmentation);
  }
}

// Every GPU gets both health series, zeros included.
void AddHealth(CollectSink& sink, const engine::ManagerSnapshot& snapshot,
               const std::vector<engine::GpuView>& gpus) {
  std::map<uint32_t, uint32_t> unhealthy;
  for (const engine::InstanceView& v : snapshot.instances) {
    if (v.unhealthy) ++unhealthy[v.gpu.value()];
  }
  for (const engine::GpuView& g : gpus) {
    const std::string gpu = std::to_string(g.info.index.value());
    sink.Add(kGpuUnhealthy, {gpu}, g.unhealthy ? 1 : 0);
    sink.Add(kUnhealthyInstances, {gpu}, unhealthy[g.info.index.value()]);
  }
}

void AddCounters(CollectSink& sink, const engine::ManagerCounters& c) {
  sink.Add(kReconcileRuns, {}, static_cast<double>(c.reconcile_runs));
  sink.Add(kReconcileErrors, {}, static_cast<double>(c.reconcile_errors));
  sink.Add(kDrift, {"instance_vanished"}, static_cast<double>(c.drift_vanished));
  sink.Add(kDrift, {"foreign_appeared"}, static_cast<double>(c.drift_foreign_appeared));
  sink.Add(kDrift, {"foreign_gone"}, static_cast<double>(c.drift_foreign_gone));
  const std::pair<const char*, uint64_t> ops[] = {
      {"create", c.creates},
      {"reuse", c.reuses},
      {"release", c.releases},
      {"destroy", c.destroys},
      {"destroy_failed", c.destroy_failures},
      {"rollback", c.rollbacks},
      {"error_cleaned", c.errors_cleaned},
      {"warm_create", c.warm_creates},
  };
  for (const auto& [op, n] : ops) sink.Add(kEngineOps, {op}, static_cast<double>(n));
  sink.Add(kMarginReuses, {}, static_cast<double>(c.margin_reuses));
}

// The value service's counters and estimate (one lock each, no solve).
void AddValueService(CollectSink& sink, const planner::ValueService& values) {
  const planner::ValueServiceCounters c = values.counters();
  const planner::DemandEstimate e = values.estimate();
  auto seconds = [](int64_t ns) { return static_cast<double>(ns) * 1e-9; };
  sink.Add(kValueSolves, {}, static_cast<double>(c.solves));
  sink.Add(kValueFailures, {}, static_cast<double>(c.solve_failures));
  sink.Add(kValueDriftSolves, {}, static_cast<double>(c.drift_solves));
  sink.Add(kValueVersion, {}, static_cast<double>(c.version));
  sink.Add(kValueLastSolve, {}, seconds(c.last_solve_ns));
  sink.Add(kValueMaxSolve, {}, seconds(c.max_solve_ns));
  sink.Add(kValueSolveTime, {}, seconds(c.total_solve_ns));
  sink.Add(kValueMaxBytes, {}, static_cast<double>(c.max_bytes));
  sink.Add(kValueMaxStates, {}, static_cast<double>(c.max_states));
  sink.Add(kValueArrivals, {}, static_cast<double>(e.arrivals));
  sink.Add(kValueLoad, {}, e.load);
}

// HAMi series, labelled from the instance's identity. vdevice_index: the
// instance's position among the Active instances of its allocation (request
// id), in List order (GPU index, then placement) — HAMi numbers a
// container's devices in its own order.
void AddHamiSeries(CollectSink& sink, const engine::ManagerSnapshot& snapshot,
                   const std::string& node) {
  std::map<std::string, int> vdevice;
  for (const engine::InstanceView& v : snapshot.instances) {
    if (v.state != engine::InstanceState::kActive) continue;
    const store::InstanceIdentity& id = v;
    const std::string gi = std::to_string(id.gi_id.value());
    const std::string ci = std::to_string(id.ci_id.value());
    sink.Add(
        kHamiNodeInfo,
        {node, id.gpu_uuid.value(), std::to_string(v.gpu.value()), id.mig_uuid.value(), v.profile,
         gi, ci, std::to_string(id.placement.start), std::to_string(id.placement.size)},
        1);
    if (v.owner.kind == store::Owner::Kind::kPod) {
      const int index = vdevice[v.request_id]++;
      sink.Add(kHamiDeviceInfo,
               {v.owner.pod_namespace, v.owner.pod_name, v.owner.container, std::to_string(index),
                id.gpu_uuid.value(), id.mig_uuid.value(), v.profile, gi, ci},
               1);
    }
  }
}

}  // namespace

std::vector<double> AllocationDurationBuckets() {
  // 1-2.5-5 steps: readable `le` values. Reuse takes microseconds, a create
  // tens to hundreds of milliseconds, a create after reclaims seconds.
  return {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
          5e-2, 0.1,    0.25, 0.5,  1,      2.5,  5,    10,     30,   60};
}

MigdMetricsOptions WithDefaults(MigdMetricsOptions o) {
  if (o.node_name.empty()) {
    if (const char* env = std::getenv("NODE_NAME"); env != nullptr && *env != '\0') {
      o.node_name = env;
    } else {
      char host[256] = {};
      if (::gethostname(host, sizeof(host) - 1) == 0) o.node_name = host;
    }
  }
  return o;
}

MigdMetrics::MigdMetrics(Registry* registry, MigdMetricsOptions options)
    : registry_(registry), options_(WithDefaults(std::move(options))) {}

MigdMetrics::~MigdMetrics() = default;

StatusOr<std::unique_ptr<MigdMetrics>> MigdMetrics::Create(Registry* registry,
                                                           MigdMetricsOptions options) {
  if (registry == nullptr) return InvalidArgumentError("MigdMetrics needs a registry");
  std::unique_ptr<MigdMetrics> m(new MigdMetrics(registry, std::move(options)));
  MIGD_RETURN_IF_ERROR(m->Register());
  return m;
}

Status MigdMetrics::Register() {
  MIGD_ASSIGN_OR_RETURN(
      allocations_,
      registry_->AddCounter("migd_allocations_total",
                            "Allocate calls by result (ok or the lower-case gRPC status code "
                            "name) and path (reuse, create, reclaim_create, none, replay).",
                            {"result", "path"}));
  MIGD_ASSIGN_OR_RETURN(
      allocation_duration_,
      registry_->AddHistogram("migd_allocation_duration_seconds",
                              "Time spent inside Manager::Allocate (planning, NVML, records, "
                              "CDI), by path.",
                              {"path"}, AllocationDurationBuckets()));
  MIGD_ASSIGN_OR_RETURN(reclaims_,
                        registry_->AddCounter("migd_reclaims_total",
                                              "Idle instances destroyed, by why they were chosen "
                                              "(pressure, ttl, cap, operator).",
                                              {"reason"}));
  MIGD_ASSIGN_OR_RETURN(
      transitions_,
      registry_->AddCounter("migd_instance_transitions_total",
                            "Instance state changes (lower-case states; none = not an "
                            "instance) by reason.",
                            {"from", "to", "reason"}));
  MIGD_ASSIGN_OR_RETURN(xid_events_,
                        registry_->AddCounter("migd_xid_events_total",
                                              "Xid events the health monitor received (ignored "
                                              "ones included), by GPU index and Xid.",
                                              {"gpu", "xid"}));
  // Series that should read 0 before their first event, so that rate() and
  // alerts see them from the start.
  for (const char* path : {"reuse", "create", "reclaim_create", "replay"}) {
    allocations_->WithLabels({"ok", path});
    allocation_duration_->WithLabels({path});
  }
  for (const char* reason : {"pressure", "ttl", "cap", "operator"}) {
    reclaims_->WithLabels({reason});
  }

  return registry_->AddCollector(CollectedFamilies(), [this](CollectSink& sink) { Collect(sink); });
}

void MigdMetrics::AttachManager(const engine::Manager* manager) {
  MutexLock lock(&manager_mu_);
  manager_ = manager;
}

void MigdMetrics::OnInstanceEvent(const engine::InstanceEvent& event) {
  // Called under the Manager's registry lock: one map lookup and an atomic add.
  transitions_
      ->WithLabels({StateLabel(event.from), StateLabel(event.to),
                    std::string(engine::EventReasonName(event.reason))})
      .Inc();
}

void MigdMetrics::OnAllocation(const engine::AllocationOutcome& outcome) {
  const std::string path = PathLabel(outcome);
  allocations_->WithLabels({ResultLabel(outcome.code), path}).Inc();
  allocation_duration_->WithLabels({path}).Observe(
      std::chrono::duration<double>(outcome.duration).count());
}

void MigdMetrics::OnReclaim(engine::EventReason reason, const engine::InstanceView&) {
  std::string_view label = ReclaimLabel(reason);
  if (label.empty()) return;  // not a reclaim reason: nothing to count
  reclaims_->WithLabels({std::string(label)}).Inc();
}

void MigdMetrics::OnGpuEvent(const driver::GpuEvent& event, std::string_view) {
  if (event.kind != driver::GpuEventKind::kXid) return;
  xid_events_->WithLabels({std::to_string(event.gpu.value()), std::to_string(event.xid)}).Inc();
}

void MigdMetrics::Collect(CollectSink& sink) const {
  CollectProcess(sink);
  MutexLock lock(&manager_mu_);
  if (manager_ == nullptr) return;
  const engine::ManagerSnapshot snapshot = manager_->List();
  AddInstances(sink, snapshot);
  const std::vector<engine::GpuView> gpus = manager_->Gpus();
  AddGpus(sink, snapshot, gpus);
  AddHealth(sink, snapshot, gpus);
  AddCounters(sink, manager_->counters());
  AddHamiSeries(sink, snapshot, options_.node_name);
}

void MigdMetrics::CollectProcess(CollectSink& sink) const {
  sink.Add(kBuildInfo, {options_.version, options_.revision, options_.driver}, 1);
  if (options_.nvml_call_counts) {
    for (const driver::NvmlCallCount& c : options_.nvml_call_counts()) {
      sink.Add(kNvmlCalls, {c.function, c.result}, static_cast<double>(c.count));
    }
  }
  if (options_.nvml_sessions_opened) {
    sink.Add(kNvmlSessions, {}, static_cast<double>(options_.nvml_sessions_opened()));
  }
  if (options_.publisher != nullptr) {
    for (const cdi::OperationCount& c : options_.publisher->OperationCounts()) {
      sink.Add(kCdiOps, {c.kind, c.result}, static_cast<double>(c.count));
    }
    sink.Add(kCdiPending, {}, static_cast<double>(options_.publisher->PendingRemovalCount()));
  }
  if (options_.values != nullptr) AddValueService(sink, *options_.values);
}

}  // namespace migd::metrics
