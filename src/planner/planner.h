// File: planner/planner.h
//
// The MIG placement planner: given a snapshot of every GPU's layout and a
// request for one or more GPU instances, decides for each instance whether to
// reuse an Idle instance, create one in free space, or create one after
// reclaiming (destroying) Idle instances, or says precisely why nothing fits.
// The engine takes a snapshot under its lock, calls MakePlan() and executes
// the Plan (destroy every reclaimed instance, then create/reuse). The cost
// order, the searches and their rationale are in docs/planner.md.
//
// Contract:
//   - Pure and deterministic: no NVML, files, clock or randomness. GPUs are
//     processed by index and occupants by placement whatever the input
//     order; the same input gives the same Plan (byte-identical PlanToJson).
//   - Legality is mig/legality.h's. Active, Error and Foreign occupants are
//     never touched; only Idle ones are reused or reclaimed. An exact
//     placement (GPU and placement given) is honoured or refused.
//   - Multi-instance requests are all-or-nothing and complete: when any
//     joint plan exists, one is returned.
//   - Profiles are named per model (GpuModel::FindProfileByName), so
//     "1g.10gb" is the base 1g on an H100 and the double-memory 1g on an
//     A100-40GB.
//
// Errors
//   kInvalidArgument: no GPUs, duplicate GPU index, null model, a model that
//     does not fit mig::PlacementRules, an occupant with an unknown profile,
//     unlisted placement, overlap or missing/duplicate key; an empty
//     request; a request naming an unknown GPU, a profile no (eligible) GPU
//     knows, or a placement not in the table; two requested exact
//     placements that overlap on one GPU; more than 255 instances; a negative
//     or non-finite demand weight.
//   kResourceExhausted: no plan exists. The message names the profile and
//     request instance, the GPUs considered and, per GPU, what blocks each
//     placement, e.g. "GPU 0: 3g.40gb needs 0:4 or 4:4; 0:4 blocked by Active
//     1g.10gb@1, 4:4 blocked by Foreign 2g.20gb@4". When every instance fits
//     alone but not together, it says so and lists where each would fit.
//
// Example:
//   planner::Planner planner;
//   planner::PlanInput in;
//   in.gpus.push_back({GpuIndex(0), h100, {{"1g.10gb", {6, 1}, OccupantState::kActive, "MIG-a"}}});
//   in.request.push_back({"3g.40gb"});
//   MIGD_ASSIGN_OR_RETURN(planner::Plan plan, planner.MakePlan(in));
//   // plan.instances[0]: kFree, GPU 0, 0:4.
//
// Thread-safety: Planner is not thread-safe (it caches per-table data); use
// one per thread or call it under the engine's lock. The value types are
// plain data.
#ifndef MIGD_PLANNER_PLANNER_H_
#define MIGD_PLANNER_PLANNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "mig/catalog.h"
#include "mig/placement.h"
#include "planner/demand_mix.h"

namespace migd::planner {

namespace internal_planner {
struct Table;      // per-model precomputation (scoring.h)
struct Canonical;  // one call's canonical form (plan_input.h)
}  // namespace internal_planner
class ValueService;  // value_service.h
class ValueTable;    // value_table.h

// S(empty GPU) ≈ kScoreScale for every table, so losses of different models
// compare as fractions of a GPU.
inline constexpr int64_t kScoreScale = int64_t{1} << 30;

enum class OccupantState {
  kActive,   // in use; never touched
  kIdle,     // released, kept warm; may be reused or reclaimed
  kError,    // failed destroy; never reused, never touched by the planner
  kForeign,  // not migd's (or not verified); never touched
};
// "active", "idle", "error", "foreign".
std::string_view OccupantStateName(OccupantState state);
StatusOr<OccupantState> ParseOccupantState(std::string_view name);

// An occupied placement on a GPU.
struct Occupant {
  std::string profile;       // a profile name of the GPU's table
  mig::Placement placement;  // must be listed for the profile
  OccupantState state = OccupantState::kActive;
  std::string key;        // opaque instance key (e.g. MIG UUID); required for Active/Idle
  int64_t last_used = 0;  // Idle: tick of the last release; ignored otherwise
};

struct GpuLayout {
  GpuIndex index;
  const mig::GpuModel* model = nullptr;  // placement table; not owned, must outlive the call
  std::vector<Occupant> occupants;       // any order; must not overlap
};

// One requested instance. Without `gpu` any GPU may host it; without
// `placement` the planner chooses one; with both it is an exact
// (scheduler-selected) placement.
struct InstanceRequest {
  std::string profile;
  std::optional<GpuIndex> gpu;
  std::optional<mig::Placement> placement;
};

struct PlanInput {
  std::vector<GpuLayout> gpus;
  std::vector<InstanceRequest> request;  // non-empty; planned jointly, all or nothing
  DemandWeights demand;                  // may be empty (uniform weights)
};

enum class Stage {
  kReuse = 0,    // an Idle instance is handed out as is
  kFree = 1,     // created in free space
  kReclaim = 2,  // created after destroying Idle instances
};
std::string_view StageName(Stage stage);  // "reuse", "free", "reclaim"
StatusOr<Stage> ParseStage(std::string_view name);

enum class Search {
  kGreedy,      // instance by instance
  kExhaustive,  // joint search over all GPUs
};
std::string_view SearchName(Search search);  // "greedy", "exhaustive"
StatusOr<Search> ParseSearch(std::string_view name);

struct ReclaimedInstance {
  GpuIndex gpu;
  std::string key;
  std::string profile;  // canonical table name
  mig::Placement placement;
  int64_t last_used = 0;
  friend bool operator==(const ReclaimedInstance&, const ReclaimedInstance&) = default;
};

struct InstancePlan {
  Stage stage = Stage::kFree;
  GpuIndex gpu;
  std::string profile;  // canonical table name of the resolved profile
  GiProfileId profile_id;
  mig::Placement placement;
  std::string reuse_key;  // kReuse: the Idle instance handed out
  // Idle instances to destroy before this instance is created, in placement
  // order. Disjoint across the instances of one plan. An Idle instance that
  // blocks two created instances is listed under the first in request order.
  std::vector<ReclaimedInstance> reclaim;
  friend bool operator==(const InstancePlan&, const InstancePlan&) = default;
};

// The cost of a plan, lower is better, compared field by field in this order
// (docs/planner.md, "The cost order" and "The value policy"). value_loss is
// in kValueScale units of expected future reward, summed over GPUs (0 under
// the cost order); the other losses are in units of kScoreScale per GPU (0
// where the value policy does not compute them).
struct PlanScore {
  int64_t node_loss = 0;
  int64_t opened_gpus = 0;
  int64_t pin_loss = 0;
  int64_t value_loss = 0;
  int64_t destroyed_slices = 0;
  int64_t destroyed_instances = 0;
  int64_t creates = 0;
  int64_t reclaimed_last_used_sum = 0;
  int64_t loss = 0;
  int64_t fill = 0;
  int64_t uniform_loss = 0;

  friend auto operator<=>(const PlanScore&, const PlanScore&) = default;
  friend bool operator==(const PlanScore&, const PlanScore&) = default;
  PlanScore& operator+=(const PlanScore& o);
  PlanScore& operator-=(const PlanScore& o);
};

// Work done for one plan (observability; not part of the decision).
struct PlanStats {
  uint64_t candidates_examined = 0;  // actions costed by the greedy stage
  uint64_t exhaustive_options = 0;   // per-GPU hosting options enumerated
  uint64_t exhaustive_states = 0;    // (GPU, remaining demand) states solved
  bool greedy_failed = false;        // the greedy stage found no plan
  bool value_policy = false;         // ordered by the value policy (else the cost order)
  uint64_t value_version = 0;        // the newest ValueTable used (SolveStats::serial)
  // Greedy steps where the reuse margin kept an Idle instance that the cost
  // order would have passed over for a create (PlannerOptions::reuse_margin).
  uint64_t margin_reuses = 0;
  friend bool operator==(const PlanStats&, const PlanStats&) = default;
};

struct Plan {
  std::vector<InstancePlan> instances;  // one per request instance, in request order
  Stage stage = Stage::kFree;           // the latest stage any instance needed
  Search search = Search::kGreedy;      // which search produced the plan
  PlanScore score;
  PlanStats stats;

  // Every reclaimed instance of the plan, in (GPU, start) order.
  std::vector<ReclaimedInstance> AllReclaims() const;
  friend bool operator==(const Plan&, const Plan&) = default;
};

// Cumulative counters of a Planner (for metrics).
struct PlannerCounters {
  uint64_t plans = 0;             // MakePlan calls that returned a plan
  uint64_t invalid = 0;           // ... kInvalidArgument
  uint64_t exhausted = 0;         // ... kResourceExhausted
  uint64_t greedy_plans = 0;      // plans produced by the greedy stage
  uint64_t exhaustive_runs = 0;   // times the exhaustive search ran
  uint64_t exhaustive_plans = 0;  // plans produced by it
  uint64_t greedy_failures = 0;   // plans found only by the exhaustive search
  uint64_t candidates_examined = 0;
  uint64_t exhaustive_options = 0;
  uint64_t exhaustive_states = 0;
  uint64_t table_cache_misses = 0;  // tables precomputed
  uint64_t table_cache_hits = 0;
  uint64_t value_plans = 0;       // plans ordered by the value policy
  uint64_t cost_order_plans = 0;  // ... by the cost order (no values, or none apply)
};

// One way to host one instance (RankPlacements, ExplainChoices).
struct RankedCandidate {
  GpuIndex gpu;
  std::string profile;  // canonical table name
  mig::Placement placement;
  Stage stage = Stage::kFree;
  std::string reuse_key;                   // kReuse: the Idle instance
  std::vector<ReclaimedInstance> reclaim;  // kReclaim: destroyed first
  PlanScore cost;                          // what it costs on its GPU (and the node)
  friend bool operator==(const RankedCandidate&, const RankedCandidate&) = default;
};

struct InstanceChoice {
  RankedCandidate chosen;
  std::optional<RankedCandidate> next_best;  // the best other GPU/placement, if any
};

struct PlannerOptions {
  // The value policy: candidates are ordered by the value they give up
  // (value_service.h). Null: the cost order alone (today's policy).
  std::shared_ptr<ValueService> values;
  // Reuse by value (planner.reuseMargin). Unset: the best create beats the
  // best Idle instance when it is cheaper in the cost order (today's rule).
  // Set, and where values are attached: only when it keeps more profiles
  // placeable on the node (the node term) or gives up more than this much
  // less value (the objective's units: accepted requests or slices); the
  // cost order's other terms do not count against a reuse. Each greedy step
  // and RankPlacements' first candidate; the joint search keeps the cost
  // order. MakePlan and RankPlacements return CheckReuseMargin's error for a
  // value it refuses.
  std::optional<double> reuse_margin;
  // Calls over several GPUs use this margin instead, when set: there the
  // values are a per-GPU approximation (docs/planner.md, "Reuse margin").
  std::optional<double> reuse_margin_several_gpus;
};
inline constexpr double kMaxReuseMargin = 1000;
// kInvalidArgument naming the value unless it is a number in 0..kMaxReuseMargin.
Status CheckReuseMargin(double margin);

// planner.reuseMargin resolved for the two kinds of call.
struct ReuseMargins {
  std::optional<double> one_gpu;       // PlannerOptions::reuse_margin
  std::optional<double> several_gpus;  // PlannerOptions::reuse_margin_several_gpus
  friend bool operator==(const ReuseMargins&, const ReuseMargins&) = default;
};
// "auto" (the default): 0 on one GPU, where the values are exact, and this
// on several, where a margin this small gives up no measured acceptance.
inline constexpr double kAutoReuseMarginSeveralGpus = 0.1;
inline constexpr ReuseMargins kAutoReuseMargins{0.0, kAutoReuseMarginSeveralGpus};
// A configured reuse margin: "auto", "off" (none) or a number CheckReuseMargin
// accepts (the same on every node); kInvalidArgument naming the text
// otherwise.
StatusOr<ReuseMargins> ParseReuseMargin(std::string_view text);

class Planner {
 public:
  Planner();
  explicit Planner(PlannerOptions options);
  ~Planner();
  Planner(const Planner&) = delete;
  Planner& operator=(const Planner&) = delete;

  // Plans `input.request` against `input.gpus`. On success every request
  // instance has exactly one InstancePlan, in request order (identical
  // instances in ascending GPU/start order); on failure kInvalidArgument or
  // kResourceExhausted as listed above. Never modifies the input.
  // REQUIRES: a model object is not changed in place while this Planner has
  // it cached (per-table data is cached by address, built from a copy and
  // shared by every model with the same table; ClearCache() drops it, e.g.
  // after the engine rebuilds its tables).
  // With the value policy the plan also depends on the values solved so far
  // (Plan::stats.value_version names the newest table used); the same input
  // and values give the same plan.
  StatusOr<Plan> MakePlan(const PlanInput& input);

  // Learns the demand from a request that arrived (the value policy; no-op
  // without it): call once per request, after deciding it, with the input
  // it was decided on and whether it was placed. Dry runs and pool top-ups
  // are not arrivals.
  void ObserveArrival(const PlanInput& input, bool placed);

  // Every candidate for one instance of `profile` (on `gpu` only, if given)
  // in `input`'s layouts (its request is ignored), best first by this
  // planner's policy: the first is what MakePlan chooses for a single-
  // instance request of that profile (an order in which a frontend can offer
  // devices to a scheduler). kInvalidArgument as MakePlan; an empty list when
  // nothing fits.
  StatusOr<std::vector<RankedCandidate>> RankPlacements(const PlanInput& input,
                                                        std::string_view profile,
                                                        std::optional<GpuIndex> gpu = {});

  // For each instance of `plan` (made by MakePlan on `input`): its cost and
  // the next-best candidate's, the rest of the plan held fixed.
  StatusOr<std::vector<InstanceChoice>> ExplainChoices(const PlanInput& input, const Plan& plan);

  const PlannerCounters& counters() const { return counters_; }
  const std::shared_ptr<ValueService>& values() const { return options_.values; }
  void ClearCache();

 private:
  // The cached precomputation for `model`; kInvalidArgument if the table
  // cannot be planned on (see mig::PlacementRules::Build).
  StatusOr<const internal_planner::Table*> TableFor(const mig::GpuModel& model);

  // Canonicalises `input` and attaches the values when they apply.
  StatusOr<internal_planner::Canonical> Prepare(
      const PlanInput& input, std::vector<std::shared_ptr<const ValueTable>>& keep);

  PlannerOptions options_;
  // Per model object: its table and the object's shape when last checked
  // (a freed model whose address another one reuses is noticed).
  struct CachedTable {
    std::shared_ptr<const internal_planner::Table> table;
    const mig::GiProfile* profiles_data = nullptr;
    size_t profile_count = 0;
    uint32_t memory_slices = 0;
  };
  std::map<const mig::GpuModel*, CachedTable> tables_;
  PlannerCounters counters_;
};

// Convenience: a one-shot plan with a fresh Planner (no cache reuse).
StatusOr<Plan> MakePlan(const PlanInput& input);

}  // namespace migd::planner

#endif  // MIGD_PLANNER_PLANNER_H_
