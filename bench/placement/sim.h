// File: bench/placement/sim.h
//
// The discrete-event simulator of the placement benchmark: cluster state, the Policy interface
// every placement policy (the product planner's adapter and the baselines B1–B11) implements, the
// allocators the event loop drives (a Policy over a ClusterState, or a
// counting bound B12/B14), and the per-run metrics.
//
// Model: each GPU is one GpuTable state (all GIs) plus the list of its
// instances, each Active (owned by a request) or Idle (released, kept warm).
// A departure makes the request's instances Idle when the policy keeps idle
// instances (the product planner, template/geometry baselines) and destroys
// them otherwise. Decisions are ordered op lists (create, reuse, destroy
// Idle, create Idle) that the simulator validates and applies; destroying an
// Active instance (an eviction) is rejected as a policy bug.
//
// Example:
//   PlacementAllocator alloc(std::make_unique<FirstFitPolicy>(FirstFitPolicy::kLow));
//   RunResult r = RunSimulation(alloc, ctx, requests, options);
//
// Thread-safety: none; one allocator per thread.
#ifndef MIGD_BENCH_PLACEMENT_SIM_H_
#define MIGD_BENCH_PLACEMENT_SIM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/placement/table.h"
#include "bench/placement/workload.h"

namespace migd::bench {

struct Instance {
  int pair = 0;
  bool idle = false;
  int64_t owner = -1;    // request id while Active
  double last_used = 0;  // release time while Idle
};

struct GpuState {
  int state = 0;                    // table state of all GIs (Active + Idle)
  int active_state = 0;             // table state of the Active GIs only
  std::vector<Instance> instances;  // ascending pair index
  // The instance at `pair`, or nullptr.
  const Instance* Find(int pair) const;
};

struct ClusterState {
  const GpuTable* table = nullptr;
  std::vector<GpuState> gpus;
  double now = 0;
  int num_gpus() const { return static_cast<int>(gpus.size()); }
};

ClusterState EmptyCluster(const GpuTable& table, int gpus);

enum class OpKind {
  kCreate,      // create pair on gpu for request instance `instance`
  kReuse,       // hand the Idle instance at pair to request instance `instance`
  kDestroy,     // destroy the Idle instance at pair (a reclaim)
  kCreateIdle,  // create pair as an Idle (pre-created, template) instance
};

struct Op {
  OpKind kind = OpKind::kCreate;
  int gpu = 0;
  int pair = 0;
  int instance = -1;
};

struct Decision {
  std::vector<Op> ops;      // applied in order
  int clears = 0;           // whole-GPU clears (mig-parted style reconfiguration)
  int plugin_restarts = 0;  // device-plugin restarts (nos style)
  bool exhaustive = false;  // produced by an exhaustive search (product planner)
};

// The value policy's solves in one run (the product planner only).
struct SolveReport {
  int64_t solves = 0;
  int64_t failures = 0;
  int64_t total_ns = 0;
  int64_t max_ns = 0;
  size_t max_bytes = 0;
  size_t max_states = 0;
  int64_t value_decisions = 0;       // MakePlan calls ordered by the values
  int64_t cost_order_decisions = 0;  // ... by the cost order (before the first solve)
};

// What a policy may know about the run.
struct RunContext {
  const GpuTable* table = nullptr;
  int gpus = 1;
  std::vector<double> class_weights;  // w_p, Σ = 1: the known (or empirical) mix
  std::vector<double> class_rates;  // λ_p per mean lifetime (synthetic single-instance), or empty
  double time_unit = 1;             // the mean lifetime in simulation time units
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  // Called before each run.
  virtual Status Reset(const RunContext& ctx) = 0;
  // The decision for `req` on `state`, or nullopt when the request cannot be
  // placed now (rejected in loss mode, kept waiting in queue mode).
  virtual std::optional<Decision> Decide(const ClusterState& state, const Request& req) = 0;
  // Departure makes instances Idle (true) or destroys them (false).
  virtual bool KeepsIdle() const { return false; }
  // Wall time (ns) of the product code inside the last Decide, or -1.
  virtual int64_t LastCoreNs() const { return -1; }
  // Unexpected internal errors seen (treated as rejections and reported).
  virtual int64_t Errors() const { return 0; }
  // Wall times (ns) of the product-code calls inside the last Decide that ran
  // an exhaustive search (empty for baselines).
  virtual std::vector<int64_t> LastExhaustiveCallNs() const { return {}; }
  // The value policy's solves so far in this run.
  virtual SolveReport Solves() const { return {}; }
};

// Op counters (counted while measuring).
struct OpCounters {
  int64_t creates = 0;   // GI creates (incl. Idle pre-creates)
  int64_t destroys = 0;  // GI destroys (reclaims + destroys at departure)
  int64_t reclaims = 0;  // Idle instances destroyed by a decision
  int64_t reuses = 0;    // Idle instances handed out
  int64_t clears = 0;
  int64_t plugin_restarts = 0;
  int64_t substitutions = 0;  // instance of a larger class than requested (B5)
  int64_t exhaustive = 0;     // decisions by exhaustive search
};

// Applies `d` for `req` to `state`. kInternal (a policy bug) if an op is
// illegal, an Active instance would be destroyed, or a request instance is
// not assigned exactly once; `state` is then unspecified.
Status ApplyDecision(ClusterState& state, const Request& req, const Decision& d, OpCounters* c);

// Releases `req`'s instances: Idle (keep_idle) or destroyed.
Status ReleaseRequest(ClusterState& state, const Request& req, bool keep_idle, OpCounters* c);

// Checks every GPU against mig::Layout (listed placement, no overlap,
// instance caps, engine budget) and the table states; kInternal on mismatch.
Status ValidateCluster(const ClusterState& state);

// ---- allocators (what the event loop drives) ----

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::string name() const = 0;
  virtual Status Reset(const RunContext& ctx) = 0;
  // Admits `req` at `now` if possible; *admitted says whether it did.
  virtual Status TryAdmit(const Request& req, double now, bool* admitted) = 0;
  virtual Status Release(const Request& req, double now) = 0;
  virtual void SetMeasuring(bool on) = 0;
  // The cluster for state metrics; nullptr for counting bounds.
  virtual const ClusterState* cluster() const { return nullptr; }
  virtual OpCounters counters() const { return {}; }
  // Active compute / memory units now.
  virtual int ActiveCompute() const = 0;
  virtual int ActiveMemory() const = 0;
  // Decision latencies recorded while measuring (ns).
  struct Latencies {
    // single/multi: Decide wall time; core_*: product code only (LastCoreNs);
    // exhaustive: each product-code call that ran an exhaustive search.
    std::vector<int64_t> single, multi, exhaustive, core_single, core_multi;
  };
  virtual const Latencies* latencies() const { return nullptr; }
};

// A Policy over a ClusterState.
class PlacementAllocator : public Allocator {
 public:
  // `validate`: ValidateCluster after every change (slow; tests).
  explicit PlacementAllocator(std::unique_ptr<Policy> policy, bool validate = false);
  std::string name() const override { return policy_->name(); }
  Status Reset(const RunContext& ctx) override;
  Status TryAdmit(const Request& req, double now, bool* admitted) override;
  Status Release(const Request& req, double now) override;
  void SetMeasuring(bool on) override { measuring_ = on; }
  const ClusterState* cluster() const override { return &state_; }
  OpCounters counters() const override { return counters_; }
  int ActiveCompute() const override;
  int ActiveMemory() const override;
  const Latencies* latencies() const override { return &lat_; }
  uint64_t decision_hash() const { return hash_; }
  Policy& policy() { return *policy_; }
  const Policy& policy() const { return *policy_; }

 private:
  std::unique_ptr<Policy> policy_;
  bool validate_;
  bool measuring_ = false;
  ClusterState state_;
  OpCounters counters_;
  OpCounters discard_;
  Latencies lat_;
  uint64_t hash_ = 0;
};

// ---- the event loop ----

enum class ArrivalMode { kLoss, kQueue };
StatusOr<ArrivalMode> ParseArrivalMode(std::string_view name);

struct SimOptions {
  ArrivalMode mode = ArrivalMode::kLoss;
  double warmup_fraction = 0.1;  // first arrivals not measured
  bool backfill = false;         // queue mode: later requests may pass a blocked head
  double patience = 2.0;         // queue mode: abandon after this many mean lifetimes
  bool record_latency = true;
};

struct RunResult {
  std::string policy;
  int64_t offered = 0, accepted = 0;
  double offered_slice_time = 0, accepted_slice_time = 0;  // Σ c·L
  std::vector<int64_t> class_offered, class_accepted;      // per instance class
  int64_t multi_offered = 0, multi_accepted = 0;
  OpCounters ops;
  double frag_ratio = 0;      // mean of F/Σfree over measured arrivals (placement only)
  double whole_gpu_free = 0;  // mean GPUs able to host the largest class
  double util_compute = 0, util_memory = 0;  // time-averaged, fractions of capacity
  // Queue mode.
  int64_t abandoned = 0, still_waiting = 0;
  double wait_mean = 0, wait_p99 = 0;
  std::vector<double> class_wait_p99;
  // FNV-1a hash over every decision (request id, ops) of the run: equal
  // hashes = identical decision logs.
  uint64_t decision_hash = 0;
  int64_t policy_errors = 0;
  SolveReport solves;  // the value policy's (product planner only)

  double acceptance() const { return offered ? static_cast<double>(accepted) / offered : 0; }
  double slice_acceptance() const {
    return offered_slice_time > 0 ? accepted_slice_time / offered_slice_time : 0;
  }
};

StatusOr<RunResult> RunSimulation(Allocator& alloc, const RunContext& ctx,
                                  const std::vector<Request>& requests, const SimOptions& options);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_SIM_H_
