// File: planner/exhaustive.h
//
// Internal to the planner. The complete joint search for multi-instance
// requests: for each GPU, every way of hosting a sub-multiset of the request
// classes (reuse choices x create placements x the implied reclaim set),
// cheapest per hosted multiset, stored as a trie over class counts; then a
// dynamic programme over GPUs in index order and remaining demand picks the
// cheapest combination. Complete (finds a plan whenever one exists) and
// optimal for the per-GPU cost fields, with no budget or cut-off. Necessary
// checks prune states: per class, the most the remaining GPUs could host, and
// the memory units left outside Active/Error/Foreign instances.
//
// Thread-safety: one object per call, used by one thread.
#ifndef MIGD_PLANNER_EXHAUSTIVE_H_
#define MIGD_PLANNER_EXHAUSTIVE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/search.h"

namespace migd::planner::internal_planner {

class ExhaustiveSearch {
 public:
  ExhaustiveSearch(const PlanInput& input, const Canonical& canon,
                   const std::vector<std::optional<size_t>>& twins, PlanStats& stats)
      : input_(input), canon_(canon), twins_(twins), stats_(stats) {}

  // The cheapest joint plan (node term computed afterwards), or nullopt when
  // none exists. Adds its option and state counts to the stats.
  std::optional<SearchResult> Run();

 private:
  // Per-class instance counts, one byte per class (a request has at most 255
  // instances). A string so that it hashes; lookups only, never iterated.
  using Counts = std::string;
  static uint8_t At(const Counts& c, size_t i) { return static_cast<uint8_t>(c[i]); }
  static void Set(Counts& c, size_t i, uint32_t v) { c[i] = static_cast<char>(v); }
  using Assignment = std::vector<std::pair<uint16_t, Action>>;  // (class, action)

  struct Option {
    Counts hosted;  // per class
    uint32_t hosted_total = 0;
    Overlay ov;
    Assignment assignment;
    PlanScore cost;
  };
  struct Memo {
    bool feasible = false;
    PlanScore cost;
    size_t option = 0;  // index into options_[g]
  };
  // Options of one GPU as a trie over the counts of the classes eligible
  // there, so that a state visits only the options that fit its remaining
  // demand.
  struct TrieNode {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // (count, node), ascending count
    size_t option = 0;                                   // at depth == classes: the option
  };

  void BuildOptions(size_t g);
  void Enumerate(size_t g, size_t class_pos, size_t action_start, Overlay& ov, Counts& hosted,
                 Assignment& assignment, std::unordered_map<Counts, size_t>& index);
  void Record(size_t g, const Overlay& ov, const Counts& hosted, const Assignment& assignment,
              std::unordered_map<Counts, size_t>& index);
  void BuildTrie(size_t g);
  void BuildBounds();
  // The cheapest way for GPUs g.. to host `remaining`.
  const Memo& SolveFrom(size_t g, const Counts& remaining);
  void Walk(size_t g, uint32_t node, size_t level, const Counts& remaining, Counts& rest,
            Memo& best);
  SearchResult Reconstruct(const Counts& demand);

  const PlanInput& input_;
  const Canonical& canon_;
  const std::vector<std::optional<size_t>>& twins_;
  PlanStats& stats_;

  std::vector<std::vector<Option>> options_;            // per GPU, in DP order
  std::vector<std::vector<size_t>> eligible_;           // per GPU: classes with actions there
  std::vector<std::vector<TrieNode>> tries_;            // per GPU; node 0 is the root
  std::vector<std::vector<uint32_t>> suffix_capacity_;  // [g][class]: most GPUs g.. can host
  std::vector<uint32_t> class_units_;                   // least memory units per instance
  std::vector<uint64_t> suffix_units_;                  // [g]: units not Active/Error/Foreign
  std::vector<std::unordered_map<Counts, Memo>> memo_;
};

}  // namespace migd::planner::internal_planner

#endif  // MIGD_PLANNER_EXHAUSTIVE_H_
