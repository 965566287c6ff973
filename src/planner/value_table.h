// File: planner/value_table.h
//
// ValueTable: the relative values of every legal layout of one GPU model
// under one demand, the heart of the value policy (docs/planner.md, "The
// value policy"). The single-GPU continuous-time Markov decision process:
// states = the legal layouts (mig/legality.h) of the profiles with demand;
// requests of profile p arrive at rate λ_p (per mean lifetime), each GI
// departs at rate 1; a request must be accepted when some placement is legal
// (the planner never refuses one that fits), the action is the placement; the
// reward is 1 per acceptance (count objective) or the profile's compute
// slices (slice-weighted objective). Solved by uniformisation and relative
// value iteration; h(empty) = 0. Choosing the placement that maximises h of
// the next state is then optimal on one GPU (average reward), and Σ_g h(s_g)
// is the separable approximation the planner uses on N GPUs.
//
// Example:
//   ValueSpec spec;
//   spec.rates = PerGpuRates(*h100, mix, /*load=*/0.9);
//   MIGD_ASSIGN_OR_RETURN(std::shared_ptr<const ValueTable> t, ValueTable::Solve(*h100, spec));
//   double h = t->Value(t->Add(t->empty_state(), t->SlotOf(three_g, 4)));
//
// Thread-safety: immutable after Solve; share freely (the planner holds it
// through shared_ptr while a newer one is solved in the background).
#ifndef MIGD_PLANNER_VALUE_TABLE_H_
#define MIGD_PLANNER_VALUE_TABLE_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "mig/catalog.h"
#include "mig/legality.h"
#include "planner/demand_mix.h"

namespace migd::planner {

// What acceptance the value policy maximises.
enum class Objective {
  kCount,          // accepted requests / offered requests
  kSliceWeighted,  // accepted compute-slice time / offered compute-slice time
};
std::string_view ObjectiveName(Objective o);  // "count", "slices" (planner.objective, migctl plan --objective)
StatusOr<Objective> ParseObjective(std::string_view name);

// Value losses are integers: kValueScale per unit of reward.
inline constexpr int64_t kValueScale = int64_t{1} << 30;

struct ValueSpec {
  Objective objective = Objective::kCount;
  // Per profile index of the model: arrivals per mean lifetime on one GPU.
  // Profiles with rate 0 are left out of the table, except those in
  // `extra_profiles` (present on a GPU, e.g. Foreign, but not requested).
  std::vector<double> rates;
  uint32_t extra_profiles = 0;  // bit p: keep profile p in the table
};

struct SolveOptions {
  double tolerance = 1e-9;  // span of successive differences × uniformisation rate
  int max_iterations = 100000;
  size_t max_states = 50000;
};

struct SolveStats {
  int iterations = 0;
  bool converged = false;
  double gain = 0;  // optimal average reward per mean lifetime
  size_t states = 0;
  size_t slots = 0;
  size_t bytes = 0;  // memory held by the table
  int64_t solve_ns = 0;
  uint64_t serial = 0;  // unique in the process, increasing: names the table
};

class ValueTable {
 public:
  // kInvalidArgument when the model does not fit mig::PlacementRules, no
  // profile has demand, the rates do not match the model, the table has more
  // than 64 slots or more than options.max_states states.
  // The table keeps `model` alive; the overload taking a reference copies it.
  // `warm` (optional): a table of the same model and profiles whose values
  // start the iteration (a re-solve after a small drift converges in a few
  // sweeps); the result does not depend on it beyond the tolerance.
  static StatusOr<std::shared_ptr<const ValueTable>> Solve(
      std::shared_ptr<const mig::GpuModel> model, const ValueSpec& spec,
      const SolveOptions& options = {}, const ValueTable* warm = nullptr);
  static StatusOr<std::shared_ptr<const ValueTable>> Solve(const mig::GpuModel& model,
                                                           const ValueSpec& spec,
                                                           const SolveOptions& options = {});

  const mig::GpuModel& model() const { return *model_; }
  const ValueSpec& spec() const { return spec_; }
  const SolveStats& stats() const { return stats_; }
  size_t num_states() const { return sets_.size(); }
  int empty_state() const { return 0; }
  // Bit p: profile p is in the table.
  uint32_t profiles() const { return profiles_; }

  // The slot of `profile` (model index) at `start`, or -1 if not in the table.
  int SlotOf(size_t profile, uint32_t start) const;
  // The state holding exactly the slots of `slot_set` (bit i = slot i), or -1.
  int StateOf(uint64_t slot_set) const;
  // The state after adding `slot` to `state`, or -1 if that is illegal.
  int Add(int state, int slot) const {
    return add_[static_cast<size_t>(state) * slot_count_ + static_cast<size_t>(slot)];
  }
  // The relative value h(state), h(empty) = 0.
  double Value(int state) const { return h_[static_cast<size_t>(state)]; }

 private:
  ValueTable(std::shared_ptr<const mig::GpuModel> model, mig::PlacementRules rules)
      : model_(std::move(model)), rules_(std::move(rules)) {}
  Status Enumerate(size_t max_states);
  void Iterate(const SolveOptions& options, const ValueTable* warm);

  std::shared_ptr<const mig::GpuModel> model_;
  mig::PlacementRules rules_;  // built from *model_
  ValueSpec spec_;
  SolveStats stats_;
  uint32_t profiles_ = 0;
  std::vector<mig::Slot> slots_;               // the table's slots, rules order
  std::vector<std::vector<int16_t>> slot_of_;  // [profile][start] -> slot or -1
  size_t slot_count_ = 0;
  std::vector<uint64_t> sets_;               // per state: its slots
  std::unordered_map<uint64_t, int> index_;  // slot set -> state
  std::vector<int32_t> add_;                 // [state * slots + slot] -> state or -1
  std::vector<double> h_;                    // relative values
};

// Per-GPU arrival rates (per mean lifetime) for a demand mix on `model`: the
// mix (profile name -> weight, resolved on the model; unknown names ignored)
// normalised, times the rate that offers `load` of the GPU's compute slices
// (ρ = λ·E[c] / compute_slices with mean lifetime 1).
std::vector<double> PerGpuRates(const mig::GpuModel& model, const DemandWeights& mix, double load);

}  // namespace migd::planner

#endif  // MIGD_PLANNER_VALUE_TABLE_H_
