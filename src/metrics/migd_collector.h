// File: metrics/migd_collector.h
//
// MigdMetrics: every migd_* family of docs/metrics.md, in one Registry.
//
//   * as an engine::EngineListener it counts allocations (result, path),
//     allocation latency (histogram by path), reclaims (reason), instance
//     transitions and Xid events (gpu, xid) as the Manager reports them;
//   * at scrape time it reads what others own: Manager::List / Gpus /
//     counters (instances by state, unhealthy GPUs and instances, free
//     slices and fragmentation through
//     engine::ComputeCapacity, reconcile runs and errors, drift events),
//     the NVML call counters and the number of NVML sessions opened (through
//     callbacks, so that tests inject them and FakeGpuDriver needs none), the
//     CDI publisher's operation counts and pending removals, the planner's
//     value service (solves, table version, solve times, table sizes, the
//     learned arrivals and load); plus build_info and HAMi's per-instance
//     info series.
//
// Wiring (the listener must exist before the Manager, which is created after
// it):
//   metrics::Registry registry;
//   MIGD_ASSIGN_OR_RETURN(auto m, metrics::MigdMetrics::Create(&registry, opts));
//   fanout.Add(m.get());                      // ManagerOptions::listener
//   ... create the Manager ...
//   m->AttachManager(manager.get());
//   ... serve registry (MetricsHttpServer) ...
//   m->AttachManager(nullptr);                // before the Manager is destroyed
//
// Thread-safety: all methods are thread-safe. The listener methods only update
// registry children (a map lookup under the family's mutex, then an atomic
// add or the histogram's own lock) and never call the Manager. AttachManager waits for
// a scrape in progress, so after AttachManager(nullptr) returns no scrape
// uses the old Manager.
#ifndef MIGD_METRICS_MIGD_COLLECTOR_H_
#define MIGD_METRICS_MIGD_COLLECTOR_H_

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "cdi/publisher.h"
#include "driver/nvml/nvml_library.h"
#include "engine/events.h"
#include "engine/manager.h"
#include "metrics/registry.h"
#include "planner/value_service.h"

namespace migd::metrics {

struct MigdMetricsOptions {
  // migd_build_info labels.
  std::string version = "unknown";
  std::string revision = "unknown";
  // "nvml" or "simulated" (migd_build_info's `driver` label).
  std::string driver = "nvml";
  // HAMi's `node` label. Empty: $NODE_NAME, else the host name.
  std::string node_name;
  // NVML call counters, e.g. [&] { return nvml_driver.CallCounts(); }.
  // Empty: migd_nvml_calls_total has no samples.
  std::function<std::vector<driver::NvmlCallCount>()> nvml_call_counts;
  // Successful nvmlInit calls of the process, e.g.
  // [&] { return session.generation(); }. Empty: the family has no sample.
  std::function<uint64_t()> nvml_sessions_opened;
  // The CDI publisher (operation counts, pending removals); null: the CDI
  // families have no samples. Not owned; must outlive this object.
  const cdi::Publisher* publisher = nullptr;
  // The planner's value service (planner.policy: value); null: the
  // migd_planner_value_* families have no samples.
  std::shared_ptr<const planner::ValueService> values;
};

// `options` with the defaults filled in (node_name).
MigdMetricsOptions WithDefaults(MigdMetricsOptions options);

// Buckets of migd_allocation_duration_seconds: 10us .. 60s in 1-2.5-5 steps.
std::vector<double> AllocationDurationBuckets();

class MigdMetrics final : public engine::EngineListener {
 public:
  // Registers the families in `registry` (not owned; must outlive this
  // object). kAlreadyExists if they are already registered there;
  // kInvalidArgument for a null registry.
  static StatusOr<std::unique_ptr<MigdMetrics>> Create(Registry* registry,
                                                       MigdMetricsOptions options);
  ~MigdMetrics() override;

  // Sets (or, with null, clears) the Manager read at scrape time. Without
  // one the engine-owned families have no samples. Not owned.
  void AttachManager(const engine::Manager* manager);

  // engine::EngineListener.
  void OnInstanceEvent(const engine::InstanceEvent& event) override;
  void OnAllocation(const engine::AllocationOutcome& outcome) override;
  void OnReclaim(engine::EventReason reason, const engine::InstanceView& instance) override;
  void OnGpuEvent(const driver::GpuEvent& event, std::string_view action) override;

 private:
  MigdMetrics(Registry* registry, MigdMetricsOptions options);
  Status Register();
  void Collect(CollectSink& sink) const;
  // Build info, NVML, CDI and planner families (no Manager needed).
  void CollectProcess(CollectSink& sink) const;

  Registry* const registry_;
  const MigdMetricsOptions options_;
  CounterFamily* allocations_ = nullptr;
  HistogramFamily* allocation_duration_ = nullptr;
  CounterFamily* reclaims_ = nullptr;
  CounterFamily* transitions_ = nullptr;
  CounterFamily* xid_events_ = nullptr;
  // Held by a scrape while it reads the Manager, so that AttachManager waits
  // for it (the registry runs one scrape at a time).
  mutable Mutex manager_mu_;
  const engine::Manager* manager_ ABSL_GUARDED_BY(manager_mu_) = nullptr;
};

}  // namespace migd::metrics

#endif  // MIGD_METRICS_MIGD_COLLECTOR_H_
