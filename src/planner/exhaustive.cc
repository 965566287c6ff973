#include "planner/exhaustive.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace migd::planner::internal_planner {

void ExhaustiveSearch::Record(size_t g, const Overlay& ov_in, const Counts& hosted,
                              const Assignment& assignment,
                              std::unordered_map<Counts, size_t>& index) {
  const Gpu& gpu = canon_.gpus[g];
  Overlay ov = ov_in;
  bool allow_extras = false;
  for (const auto& [ci, a] : assignment) {
    if (!a.reuse && !Exact(canon_.classes[ci])) allow_extras = true;
  }
  if (!SettleReclaims(gpu, ov, allow_extras)) return;
  ++stats_.exhaustive_options;
  std::vector<Option>& opts = options_[g];
  auto it = index.find(hosted);
  PlanScore cost = CostOf(gpu, ov);
  if (it != index.end()) {
    Option& old = opts[it->second];
    if (!(cost < old.cost)) return;
    old.ov = ov;
    old.assignment = assignment;
    old.cost = cost;
    return;
  }
  Option o;
  o.hosted = hosted;
  for (size_t ci = 0; ci < hosted.size(); ++ci) o.hosted_total += At(hosted, ci);
  o.ov = ov;
  o.assignment = assignment;
  o.cost = cost;
  index.emplace(hosted, opts.size());
  opts.push_back(std::move(o));
}

void ExhaustiveSearch::Enumerate(size_t g, size_t class_pos, size_t action_start, Overlay& ov,
                                 Counts& hosted, Assignment& assignment,
                                 std::unordered_map<Counts, size_t>& index) {
  Record(g, ov, hosted, assignment, index);
  const Gpu& gpu = canon_.gpus[g];
  for (size_t ci = class_pos; ci < canon_.classes.size(); ++ci) {
    const Class& c = canon_.classes[ci];
    if (At(hosted, ci) >= c.members.size()) continue;
    const std::vector<Action>& acts = c.actions[g];
    for (size_t ai = (ci == class_pos ? action_start : 0); ai < acts.size(); ++ai) {
      const Action& a = acts[ai];
      if (!Compatible(gpu, ov, a)) continue;
      Apply(gpu, ov, a);
      Set(hosted, ci, At(hosted, ci) + 1u);
      assignment.emplace_back(static_cast<uint16_t>(ci), a);
      Enumerate(g, ci, ai + 1, ov, hosted, assignment, index);
      assignment.pop_back();
      Set(hosted, ci, At(hosted, ci) - 1u);
      Undo(gpu, ov, a);
    }
  }
}

void ExhaustiveSearch::BuildTrie(size_t g) {
  std::vector<TrieNode>& trie = tries_[g];
  trie.assign(1, TrieNode{});
  const std::vector<size_t>& levels = eligible_[g];
  for (size_t oi = 0; oi < options_[g].size(); ++oi) {
    uint32_t node = 0;
    for (size_t ci : levels) {
      const uint8_t v = At(options_[g][oi].hosted, ci);
      uint32_t next = 0;
      for (const auto& [count, child] : trie[node].children) {
        if (count == v) next = child;
      }
      if (next == 0) {
        next = static_cast<uint32_t>(trie.size());
        trie[node].children.emplace_back(v, next);
        trie.emplace_back();
      }
      node = next;
    }
    trie[node].option = oi;
  }
  for (TrieNode& t : trie) std::sort(t.children.begin(), t.children.end());
}

void ExhaustiveSearch::Walk(size_t g, uint32_t node, size_t level, const Counts& remaining,
                            Counts& rest, Memo& best) {
  const std::vector<size_t>& levels = eligible_[g];
  if (level == levels.size()) {
    for (size_t ci : levels) {
      // A class pinned to this GPU must be done here.
      if (canon_.classes[ci].pinned_gpu == g && At(rest, ci) != 0) return;
    }
    const size_t oi = tries_[g][node].option;
    const Memo& sub = SolveFrom(g + 1, rest);
    if (!sub.feasible) return;
    PlanScore total = options_[g][oi].cost;
    total += sub.cost;
    // Ties: the option first in DP order (see BuildOptions()).
    if (!best.feasible || total < best.cost || (total == best.cost && oi < best.option)) {
      best.feasible = true;
      best.cost = total;
      best.option = oi;
    }
    return;
  }
  const size_t ci = levels[level];
  for (const auto& [count, child] : tries_[g][node].children) {
    if (count > At(remaining, ci)) break;
    const uint32_t left = At(remaining, ci) - count;
    if (left > suffix_capacity_[g + 1][ci]) continue;  // the GPUs after g cannot take the rest
    Set(rest, ci, left);
    Walk(g, child, level + 1, remaining, rest, best);
  }
  Set(rest, ci, At(remaining, ci));
}

const ExhaustiveSearch::Memo& ExhaustiveSearch::SolveFrom(size_t g, const Counts& remaining) {
  auto found = memo_[g].find(remaining);
  if (found != memo_[g].end()) return found->second;
  ++stats_.exhaustive_states;
  Memo best;
  if (g == canon_.gpus.size()) {
    best.feasible = std::all_of(remaining.begin(), remaining.end(), [](char n) { return n == 0; });
    return memo_[g].emplace(remaining, best).first->second;
  }
  // Necessary: every instance takes at least its class's memory units on a
  // GPU >= g outside Active/Error/Foreign instances, and classes not
  // eligible here must fit the GPUs after this one.
  uint64_t units = 0;
  bool possible = true;
  for (size_t ci = 0; ci < canon_.classes.size(); ++ci) {
    units += uint64_t{At(remaining, ci)} * class_units_[ci];
    possible = possible && At(remaining, ci) <= suffix_capacity_[g][ci];
  }
  if (possible && units <= suffix_units_[g]) {
    Counts rest = remaining;
    Walk(g, 0, 0, remaining, rest, best);
  }
  return memo_[g].emplace(remaining, best).first->second;
}

void ExhaustiveSearch::BuildOptions(size_t g) {
  const size_t nc = canon_.classes.size();
  for (size_t ci = 0; ci < nc; ++ci) {
    if (!canon_.classes[ci].actions[g].empty()) eligible_[g].push_back(ci);
  }
  if (const std::optional<size_t> t = twins_[g]; t.has_value() && eligible_[g] == eligible_[*t]) {
    // Same table, occupants (hence occupant indices) and eligible classes:
    // the twin's options, already sorted, apply as they are.
    options_[g] = options_[*t];
    tries_[g] = tries_[*t];
    return;
  }
  Overlay ov;
  Counts hosted(nc, '\0');
  Assignment assignment;
  std::unordered_map<Counts, size_t> index;
  Enumerate(g, 0, 0, ov, hosted, assignment, index);
  // DP order, which decides ties in cost: options hosting more first (so
  // lower GPU indices host more), then enumeration order (reuse before
  // create, lower starts first).
  std::stable_sort(options_[g].begin(), options_[g].end(), [](const Option& a, const Option& b) {
    return a.hosted_total > b.hosted_total;
  });
  BuildTrie(g);
}

void ExhaustiveSearch::BuildBounds() {
  const size_t n = canon_.gpus.size();
  const size_t nc = canon_.classes.size();
  suffix_capacity_.assign(n + 1, std::vector<uint32_t>(nc, 0));
  suffix_units_.assign(n + 1, 0);
  for (size_t g = n; g-- > 0;) {
    for (size_t ci = 0; ci < nc; ++ci) {
      uint32_t most = 0;
      for (const Option& o : options_[g]) most = std::max<uint32_t>(most, At(o.hosted, ci));
      suffix_capacity_[g][ci] = suffix_capacity_[g + 1][ci] + most;
    }
    suffix_units_[g] = suffix_units_[g + 1] + canon_.gpus[g].model->memory_slices -
                       static_cast<uint64_t>(std::popcount(canon_.gpus[g].hard_mask));
  }
  class_units_.assign(nc, 0);
  for (size_t ci = 0; ci < nc; ++ci) {
    uint32_t least = std::numeric_limits<uint32_t>::max();
    for (size_t g = 0; g < n; ++g) {
      if (canon_.classes[ci].actions[g].empty()) continue;
      least = std::min(least, canon_.classes[ci].actions[g].front().placement.size);
    }
    class_units_[ci] = least == std::numeric_limits<uint32_t>::max() ? 0 : least;
  }
}

SearchResult ExhaustiveSearch::Reconstruct(const Counts& demand) {
  const size_t n = canon_.gpus.size();
  const size_t nc = canon_.classes.size();
  SearchResult r;
  r.overlays.assign(n, Overlay{});
  r.assigned.assign(input_.request.size(), Assigned{});
  std::vector<size_t> next_member(nc, 0);
  Counts remaining = demand;
  for (size_t g = 0; g < n; ++g) {
    const Memo& m = SolveFrom(g, remaining);
    const Option& o = options_[g][m.option];
    r.overlays[g] = o.ov;
    r.cost += o.cost;
    for (const auto& [ci, a] : o.assignment) {
      r.assigned[canon_.classes[ci].members[next_member[ci]++]] = Assigned{g, a};
    }
    for (size_t ci = 0; ci < nc; ++ci) Set(remaining, ci, At(remaining, ci) - At(o.hosted, ci));
  }
  r.cost.node_loss = NodeLossOf(canon_.gpus, r.overlays);
  return r;
}

std::optional<SearchResult> ExhaustiveSearch::Run() {
  const size_t n = canon_.gpus.size();
  const size_t nc = canon_.classes.size();
  options_.assign(n, {});
  eligible_.assign(n, {});
  tries_.assign(n, {});
  for (size_t g = 0; g < n; ++g) BuildOptions(g);
  BuildBounds();
  memo_.assign(n + 1, {});
  Counts demand(nc, '\0');
  for (size_t ci = 0; ci < nc; ++ci) Set(demand, ci, canon_.classes[ci].members.size());
  if (!SolveFrom(0, demand).feasible) return std::nullopt;
  return Reconstruct(demand);
}

}  // namespace migd::planner::internal_planner
