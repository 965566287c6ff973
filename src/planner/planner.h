// File: planner/planner.h
//
// The MIG placement planner: given a snapshot of every GPU's layout and a
// request for one or more GPU instances, decides for each instance whether to
// reuse an Idle instance, create one in free space, or create one after
// reclaiming (destroying) Idle instances — or says precisely why nothing fits.
// It sits between the engine's Manager and the driver (DESIGN.md §1, §7): the
// engine takes a snapshot under its lock, calls MakePlan(), and executes the
// Plan (destroy every reclaimed instance, then create/reuse).
//
// Pure and deterministic: no NVML, no files, no clock, no randomness; the
// result depends only on the input (see "Determinism" below).
//
// Input model
//   - Each GPU carries its placement table (a mig::GpuModel, built by the
//     engine from NVML or taken from the catalogue; 4, 8 or 12 memory units —
//     there is no per-model code here) and its occupied placements, each
//     Active, Idle (with an opaque key and a last-used tick), Error or Foreign.
//   - Legality is mig::Layout's: listed placement, no overlap, instanceCount,
//     engine budget (+me exclusivity). Active, Error and Foreign occupants are
//     never touched; only Idle ones may be reused or reclaimed.
//   - Profiles are named per model and resolved with GpuModel::FindProfileByName,
//     so "1g.10gb" is the base 1g on an H100 and the double-memory 1g on an
//     A100-40GB.
//
// Preference order (per instance, enforced by the cost order below)
//   Where the instance goes is decided first, with Idle instances counted as
//   free space (they are reclaimable, so they never make a request fail):
//   the placement that keeps the most demand placeable on the node, then
//   that opens no empty GPU while a used one can host it, then that keeps
//   the most demand placeable on its GPU. Among equally good placements:
//   1. reuse an Idle instance of the profile (exactly at the requested GPU and
//      placement when those are given);
//   2. create in free space;
//   3. create after reclaiming the cheapest set of Idle instances: fewest
//      memory slices destroyed, then fewest instances, then least recently
//      used (smallest sum of last-used ticks). For an exact placement only the
//      Idle instances overlapping it are reclaimed; otherwise Idle instances
//      that block only through instanceCount or the engine budget may also be
//      reclaimed (cheapest such set).
//   So an Idle instance is reused when it sits on a best spot (the common
//   case: it was placed there by the same rule), not when reusing it would
//   pin a worse one; a create then leaves it Idle (reclaimed only when a
//   later request needs its space). At most one create per instance.
//
// Scoring: alignment, not contiguity (placement.md §4.2)
//   Pairs(model) = every legal (profile, placement) of the table. The state
//   score S(view) = Σ w(pair) over the pairs that are creatable in that view
//   (free mask, instanceCount and engine budget all allow it). Pair weights
//   come from the demand mix's support: every pair of a profile that the mix
//   asks for (a mix name counts for the profile it resolves to on this model;
//   "asks for" = at least 0.1% of the mix's weight on this model) weighs the
//   same, other pairs 0, normalised per table so that S(empty GPU) ≈
//   kScoreScale. The mix decides which pairs count, not how much: a rare
//   large profile's single placement counts as much as one of a common small
//   profile's seven (weighting pairs by the mix let small-heavy mixes give
//   the large placements away; slice-weighted acceptance fell 1-2 pp behind
//   placement.md's B10). When no mix entry resolves on a model (e.g. an
//   empty mix), every pair of the table weighs the same (every profile the
//   table lists, +me/-me/+gfx variants included). Integers throughout, so
//   sums are exact and reproducible.
//   The loss of an action is S(before) - S(after): the weighted count of
//   (profile, placement) pairs it makes impossible, on that GPU.
//   Node term (placement.md §6.4 B10's criterion): the profiles placeable on
//   at least one GPU of the node, weighted by their mix weight (profiles in
//   the support only, normalised per table; equal weights for every listed
//   profile when no mix entry resolves), in the pinned view (Idle
//   instances free). node_loss = value before - value after the plan: what
//   the node as a whole can no longer host. Computed per candidate from the
//   per-GPU placeable sets (a decision on GPU g changes only g's set). It is
//   defined when every GPU shares one table (a homogeneous node, the usual
//   case); on a node with mixed tables it is 0 and the per-GPU terms decide.
//
// Cost of a plan (lower is better; compared lexicographically; every field
// but node_loss is summed over GPUs; see PlanScore):
//   node_loss, opened_gpus, pin_loss, destroyed_slices, destroyed_instances,
//   creates, reclaimed_last_used_sum, loss, fill, uniform_loss
//   - node_loss: the node term above (pinned view);
//   - opened_gpus: GPUs without any Active/Error/Foreign instance (empty in
//     the pinned view) that the plan starts using: keep whole GPUs whole
//     while a used GPU can host the instance (gang requests of several 7g,
//     the Alibaba gpushare100 trace, need several empty GPUs; the node term
//     only asks for one). The node term still overrides it where filling a
//     used GPU would leave a profile placeable nowhere;
//   - pin_loss: weighted loss in the "pinned" view where Idle instances count
//     as free: what reusing an Idle instance or creating in a spot gives up
//     for good;
//   - loss: weighted loss in the actual view (Idle instances occupy slices);
//   - fill = -(memory units occupied on the chosen GPU before the request,
//     by any occupant), per instance: packs the fullest GPU;
//   - uniform_loss: the loss with uniform weights, separating placements a
//     narrow mix scores alike.
//   Why opened_gpus before pin_loss: pin_loss alone already packs in most
//   cases but gives an empty GPU to a small instance when every used GPU
//   would lose a large slot; with whole-GPU (gang) demand that cost slice-
//   weighted acceptance (-1.4 pp vs B9 on gpushare100, N=8, ρ 0.7; ≈ 0 with
//   the term) for ≤ 0.2 pp count on some synthetic cells.
//   Why the node term and pin_loss lead, ahead of creates and reclaims
//   (placement benchmark, docs/benchmarks/placement.md): acceptance depends
//   only on where Active instances sit, since Idle ones are reclaimed when
//   needed; ranking reuse/create/reclaim first made migd reuse Idle
//   instances on poor spots and trail B10 (node-level myopic) by up to
//   0.85 pp count / 2.3 pp slice-weighted. With the node term and pin_loss
//   first it is within noise of B10/B9 in nearly every cell, at the price
//   of more creates (uniform mix, 8 GPUs, ρ 0.9: 0.28 -> ~0.38 creates per
//   accepted request; still ≤ 1 per instance) — reuse still wins every tie
//   in placement quality.
//   Why pin_loss before fill (GPU choice): the loss is itself a packing
//   measure — a fuller GPU has fewer creatable pairs left to destroy, so a
//   small instance goes where it costs least (an empty GPU always loses its 7g
//   and more). Where packing would destroy a GPU's last large slot (a 4g-used
//   GPU's 3g@4) while another used (not empty) GPU hosts the instance
//   harmlessly, the loss keeps the large slot; this is placement.md §7's
//   "PlaceCount" rule. An empty GPU is opened only when no used GPU can host
//   the instance or the node term asks for it (opened_gpus). fill breaks
//   ties toward the fuller GPU (k8s-device-plugin "packed", §4.4).
//   Final tie-break, in this order: lower GPU index, reuse before create,
//   lower placement start. In the exhaustive search (below), among equally
//   cheap plans the one that hosts more instances on lower-index GPUs wins,
//   then reuse before create and lower starts.
//   The greedy stage minimises the full cost, node term included, per
//   instance. The exhaustive search's dynamic programme minimises the
//   per-GPU fields (the node term is not a sum over GPUs); its plan's
//   node_loss is computed afterwards, and it replaces the greedy plan only
//   when strictly cheaper on the full cost.
//   On an empty 8-unit GPU this yields end-packing for 1g (6, 4, 5, ...), 3g
//   at 4:4, so 4g/3g@0 survive three sequential 1g (the DRA #933 pattern
//   cannot arise from the planner's own choices).
//
// Search
//   - Greedy: instances in order of constraint (GPU and placement given, then
//     placement, then GPU, then none), then larger placement size, larger
//     compute, then profile name, GPU and placement (so the request's order
//     does not matter); each takes its cheapest action on the state left by
//     the previous ones. For one instance this scan covers every candidate,
//     so it is already exact. Per-table data (every (profile, placement,
//     mask), caps, engines) is precomputed once and cached by table address;
//     GPUs identical to a lower-index one (same table and occupants) are not
//     re-scored while the plan has not touched either, as they can only tie.
//   - Exhaustive (multi-instance; when greedy fails, or when greedy had to
//     reclaim): identical instances are grouped into classes (same profile
//     text, GPU and placement). For each GPU, every way of hosting a
//     sub-multiset of the classes (reuse choices x create placements x the
//     implied reclaim set) is enumerated — bounded by the GPU's legal layouts
//     (≤ 298 / 723 on 8 units) times its reuse choices — keeping the cheapest
//     per hosted multiset; then a dynamic programme over GPUs in index order
//     and remaining demand picks the cheapest combination. It is complete
//     (finds a plan whenever one exists) and optimal for the cost above, with
//     no budget or cut-off. Work is O(GPUs x R x O): R = reachable
//     remaining-demand vectors (≤ Π(n_c + 1) over classes not pinned to a
//     GPU; pinned classes must be done on their GPU), O = per-GPU options
//     that fit (walked as a trie over class counts). Necessary checks prune
//     states: per class, the most the remaining GPUs could host, and the
//     memory units left outside Active/Error/Foreign instances. In practice:
//     tens of microseconds for requests of 2-4 instances on 8 GPUs, up to
//     tens of milliseconds for 10-15 instances of ~10 distinct constraints
//     on 8 fragmented GPUs. The exhaustive plan replaces the greedy one only
//     when strictly cheaper.
//   - Multi-instance requests are all-or-nothing: instances never overlap,
//     no Idle instance is both reused and reclaimed or reused twice, and
//     reclaim lists are disjoint.
//
// Errors
//   kInvalidArgument: no GPUs, duplicate GPU index, null model, an occupant
//     with an unknown profile, unlisted placement, overlap or missing/duplicate
//     key; an empty request; a request naming an unknown GPU, a profile that
//     no (eligible) GPU knows, or a placement not in the table; two requested
//     exact placements that overlap on one GPU; a negative or non-finite
//     demand weight.
//   kResourceExhausted: no plan exists. The message names the profile and
//     request instance, the GPUs considered and, per GPU, what blocks each
//     placement, e.g. "GPU 0: 3g.40gb needs 0:4 or 4:4; 0:4 blocked by Active
//     1g.10gb@1, 4:4 blocked by Foreign 2g.20gb@4". When every instance fits
//     alone but not together, it says so and lists where each would fit.
//
// Determinism (canonicalised): GPUs are processed in ascending index and
// occupants in ascending placement, whatever the input order; outputs are in
// request order, reclaim lists in (GPU, start) order. The same input, in any
// GPU/occupant order, gives the same Plan (byte-identical via PlanToJson).
// The request order itself is meaningful: it fixes which request instance
// receives which result (identical instances receive results in ascending
// GPU/start order).
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
struct Table;  // per-model precomputation (planner.cc)
}  // namespace internal_planner

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
// (see the file comment). Losses are in units of kScoreScale per GPU.
struct PlanScore {
  int64_t node_loss = 0;
  int64_t opened_gpus = 0;
  int64_t pin_loss = 0;
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
};

class Planner {
 public:
  Planner();
  ~Planner();
  Planner(const Planner&) = delete;
  Planner& operator=(const Planner&) = delete;

  // Plans `input.request` against `input.gpus`. On success every request
  // instance has exactly one InstancePlan; on failure: kInvalidArgument or
  // kResourceExhausted as described in the file comment. Never modifies the
  // input.
  // REQUIRES: every model pointer stays valid and unchanged for the lifetime
  // of this Planner (per-table data is cached by address; ClearCache() drops
  // it, e.g. after the engine rebuilds its tables).
  StatusOr<Plan> MakePlan(const PlanInput& input);

  const PlannerCounters& counters() const { return counters_; }
  void ClearCache();

 private:
  // The cached precomputation for `model`; kInvalidArgument if the table
  // cannot be planned on (more than 32 memory units or profiles).
  StatusOr<const internal_planner::Table*> TableFor(const mig::GpuModel& model);

  std::map<const mig::GpuModel*, std::unique_ptr<internal_planner::Table>> tables_;
  PlannerCounters counters_;
};

// Convenience: a one-shot plan with a fresh Planner (no cache reuse).
StatusOr<Plan> MakePlan(const PlanInput& input);

}  // namespace migd::planner

#endif  // MIGD_PLANNER_PLANNER_H_
