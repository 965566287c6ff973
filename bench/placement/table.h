// File: bench/placement/table.h
//
// GpuTable: the single-GPU state machine the placement benchmark runs on.
// Built from one mig::GpuModel of the embedded
// catalogue and a set of benchmark profile classes ("1g", "1g.dm", "2g", "3g",
// "4g", "7g"): every legal (profile, placement) pair is numbered, every legal
// layout (mig::EnumerateLayouts, i.e. the legality model of mig/legality.h:
// listed placement, no overlap, instance caps, engine budget) becomes a
// state, and the transitions "add pair" / "remove pair" are tabulated.
// Policies and bounds then work on small integers; legality is mig's by
// construction.
//
// Benchmark only (bench/ is not linked into migd).
//
// Example:
//   StatusOr<GpuTable> t = GpuTable::Build(*h100, /*include_double_memory=*/false);
//   int s = t->Add(t->empty_state(), t->PairOf(t->FindProfile("3g"), 4));  // 3g@4
//   // t->states()[s].placeable: profiles still placeable on this GPU.
//
// Thread-safety: immutable after Build; share freely.
#ifndef MIGD_BENCH_PLACEMENT_TABLE_H_
#define MIGD_BENCH_PLACEMENT_TABLE_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mig/catalog.h"

namespace migd::bench {

inline constexpr int kMaxProfiles = 8;
inline constexpr int kMaxPairs = 20;

// One benchmark profile class on a model.
struct ProfileClass {
  std::string key;                     // "1g", "1g.dm", "2g", "3g", "4g", "7g"
  const mig::GiProfile* gi = nullptr;  // the model's profile (points into the catalogue)
  int compute = 0;                     // c_p: compute slices
  int memory = 0;                      // m_p: memory units (placement size)
  std::vector<int> pairs;              // pair indices, ascending start
};

// A legal (profile, placement) of the table.
struct PairInfo {
  int profile = 0;
  uint32_t start = 0;
  uint32_t size = 0;
  uint32_t mask = 0;
};

// One legal layout (a set of pairs).
struct StateInfo {
  uint32_t pair_set = 0;  // bit i: pair i present
  uint32_t mask = 0;      // occupied memory units
  int compute = 0;        // Σ c_p
  int memory = 0;         // Σ m_p
  int instances = 0;
  uint32_t placeable = 0;                     // bit p: profile p can be added now
  int legal_pairs = 0;                        // pairs that can be added now
  int largest_free_run = 0;                   // longest run of free memory units
  bool maximal = false;                       // no pair can be added
  std::array<uint8_t, kMaxProfiles> count{};  // instances per profile
};

class GpuTable {
 public:
  // Builds the table of `model` for the classes "1g", "2g", "3g", "4g", "7g"
  // (the base profiles; the ones the model has) plus "1g.dm" (the
  // double-memory 1g) when `include_double_memory` is set. kInvalidArgument if
  // the model lacks a requested class or the table exceeds kMaxPairs.
  // REQUIRES: `model` outlives the table.
  static StatusOr<GpuTable> Build(const mig::GpuModel& model, bool include_double_memory);

  // Builds from an explicit list of (key, profile) classes of `model`.
  static StatusOr<GpuTable> BuildFrom(
      const mig::GpuModel& model,
      const std::vector<std::pair<std::string, const mig::GiProfile*>>& classes);

  const mig::GpuModel& model() const { return *model_; }
  int num_profiles() const { return static_cast<int>(profiles_.size()); }
  int num_pairs() const { return static_cast<int>(pairs_.size()); }
  int num_states() const { return static_cast<int>(states_.size()); }
  const std::vector<ProfileClass>& profiles() const { return profiles_; }
  const ProfileClass& profile(int p) const { return profiles_[p]; }
  const std::vector<PairInfo>& pairs() const { return pairs_; }
  const PairInfo& pair(int i) const { return pairs_[i]; }
  const std::vector<StateInfo>& states() const { return states_; }
  const StateInfo& state(int s) const { return states_[s]; }
  int memory_slices() const { return static_cast<int>(model_->memory_slices); }
  int compute_slices() const { return static_cast<int>(model_->compute_slices); }
  int empty_state() const { return 0; }
  // Largest number of instances any state holds.
  int max_instances() const { return max_instances_; }
  // Indices of the maximal states, in the order of their layout strings.
  const std::vector<int>& maximal_states() const { return maximal_; }

  // The state after adding pair `pair` to state `s`, or -1 if that is illegal.
  int Add(int s, int pair) const { return add_[static_cast<size_t>(s) * pairs_.size() + pair]; }
  // The state after removing pair `pair` (REQUIRES: present in `s`).
  int Remove(int s, int pair) const {
    return remove_[static_cast<size_t>(s) * pairs_.size() + pair];
  }
  // The state whose pair set is `set`, or -1 if that set is not legal.
  int StateOf(uint32_t set) const;
  // Class index of `key` ("3g"), or -1.
  int FindProfile(std::string_view key) const;
  // Pair index of profile `p` at `start`, or -1.
  int PairOf(int p, uint32_t start) const;
  // e.g. "1g@0 3g@4" (sorted by start).
  std::string StateString(int s) const;

 private:
  GpuTable() = default;
  // BuildFrom's steps: the classes and their pairs; every legal layout as a
  // pair set (empty first, then by size); one state's facts and transitions.
  Status AddClasses(const std::vector<std::pair<std::string, const mig::GiProfile*>>& classes);
  std::vector<uint32_t> LegalPairSets() const;
  void FillState(size_t s);

  const mig::GpuModel* model_ = nullptr;
  std::vector<ProfileClass> profiles_;
  std::vector<PairInfo> pairs_;
  std::vector<StateInfo> states_;
  std::vector<int16_t> add_;
  std::vector<int16_t> remove_;
  std::vector<int16_t> by_set_;  // 2^pairs entries: pair set -> state or -1
  std::vector<int> maximal_;
  int max_instances_ = 0;
};

// "1g.10gb" -> "1g"; the double-memory 1g -> "1g.dm".
std::string ProfileClassKey(const mig::GiProfile& profile);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_TABLE_H_
