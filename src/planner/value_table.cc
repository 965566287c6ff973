#include "planner/value_table.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <numeric>

namespace migd::planner {
namespace {

// Visits every legal set of slots once: a set only grows by slots after the
// last one added (mig's legality decides each addition).
void Extend(const mig::PlacementRules& rules, const std::vector<mig::Slot>& slots, size_t first,
            mig::Occupancy& occ, uint64_t set, std::vector<uint64_t>& out, size_t max_states,
            bool& overflow) {
  if (out.size() >= max_states) {
    overflow = true;
    return;
  }
  out.push_back(set);
  for (size_t i = first; i < slots.size() && !overflow; ++i) {
    const mig::Slot& s = slots[i];
    if (mig::CheckAdd(rules, occ, s.profile, s.placement) != mig::Verdict::kOk) continue;
    occ.Add(rules, s.profile, s.mask);
    Extend(rules, slots, i + 1, occ, set | (uint64_t{1} << i), out, max_states, overflow);
    occ.Remove(rules, s.profile, s.mask);
  }
}

double Reward(const mig::GpuModel& m, Objective o, size_t profile) {
  return o == Objective::kCount ? 1.0 : static_cast<double>(m.gi_profiles[profile].slice_count);
}

}  // namespace

std::string_view ObjectiveName(Objective o) { return o == Objective::kCount ? "count" : "slices"; }

StatusOr<Objective> ParseObjective(std::string_view name) {
  if (name == "count") return Objective::kCount;
  if (name == "slices") return Objective::kSliceWeighted;
  return InvalidArgumentError("unknown objective '" + std::string(name) +
                              "' (want count or slices)");
}

StatusOr<std::shared_ptr<const ValueTable>> ValueTable::Solve(const mig::GpuModel& model,
                                                              const ValueSpec& spec,
                                                              const SolveOptions& options) {
  return Solve(std::make_shared<const mig::GpuModel>(model), spec, options);
}

StatusOr<std::shared_ptr<const ValueTable>> ValueTable::Solve(
    std::shared_ptr<const mig::GpuModel> shared_model, const ValueSpec& spec,
    const SolveOptions& options, const ValueTable* warm) {
  const auto t0 = std::chrono::steady_clock::now();
  const mig::GpuModel& model = *shared_model;
  StatusOr<mig::PlacementRules> rules = mig::PlacementRules::Build(model);
  if (!rules.ok()) return rules.status();
  if (spec.rates.size() != model.gi_profiles.size()) {
    return InvalidArgumentError("value table for " + model.key + ": " +
                                std::to_string(spec.rates.size()) + " rates for " +
                                std::to_string(model.gi_profiles.size()) + " profiles");
  }
  std::shared_ptr<ValueTable> t(new ValueTable(std::move(shared_model), *std::move(rules)));
  t->spec_ = spec;
  bool demand = false;
  for (size_t p = 0; p < spec.rates.size(); ++p) {
    if (!(spec.rates[p] >= 0.0) || !std::isfinite(spec.rates[p])) {
      return InvalidArgumentError("value table for " + model.key + ": rate of " +
                                  model.gi_profiles[p].name + " must be finite and >= 0");
    }
    if (spec.rates[p] > 0.0) demand = true;
    if (spec.rates[p] > 0.0 || ((spec.extra_profiles >> p) & 1u) != 0) t->profiles_ |= 1u << p;
  }
  if (!demand) return InvalidArgumentError("value table for " + model.key + ": no demand");
  Status s = t->Enumerate(options.max_states);
  if (!s.ok()) return s;
  t->Iterate(options, warm);
  t->stats_.states = t->sets_.size();
  t->stats_.slots = t->slot_count_;
  t->stats_.bytes = t->sets_.capacity() * sizeof(uint64_t) + t->add_.capacity() * sizeof(int32_t) +
                    t->h_.capacity() * sizeof(double) +
                    t->index_.size() * (sizeof(uint64_t) + sizeof(int) + 2 * sizeof(void*)) +
                    t->slots_.capacity() * sizeof(mig::Slot) + sizeof(ValueTable);
  static std::atomic<uint64_t> next_serial{1};
  t->stats_.serial = next_serial.fetch_add(1);
  t->stats_.solve_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  return std::shared_ptr<const ValueTable>(std::move(t));
}

Status ValueTable::Enumerate(size_t max_states) {
  const mig::GpuModel& m = model();
  slot_of_.assign(m.gi_profiles.size(), std::vector<int16_t>(m.memory_slices, -1));
  for (const mig::Slot& s : rules_.slots()) {
    if (((profiles_ >> s.profile) & 1u) == 0) continue;
    slot_of_[s.profile][s.placement.start] = static_cast<int16_t>(slots_.size());
    slots_.push_back(s);
  }
  slot_count_ = slots_.size();
  if (slot_count_ > 64) {
    return InvalidArgumentError("value table for " + m.key + ": " + std::to_string(slot_count_) +
                                " placements of the demanded profiles (at most 64 supported)");
  }
  mig::Occupancy occ;
  bool overflow = false;
  Extend(rules_, slots_, 0, occ, 0, sets_, max_states, overflow);
  if (overflow) {
    return InvalidArgumentError("value table for " + m.key + ": more than " +
                                std::to_string(max_states) + " legal layouts");
  }
  // The empty layout first, then by size, then slot set.
  std::sort(sets_.begin(), sets_.end(), [](uint64_t a, uint64_t b) {
    const int pa = std::popcount(a);
    const int pb = std::popcount(b);
    return pa != pb ? pa < pb : a < b;
  });
  for (size_t i = 0; i < sets_.size(); ++i) index_.emplace(sets_[i], static_cast<int>(i));
  add_.assign(sets_.size() * slot_count_, -1);
  for (size_t s = 0; s < sets_.size(); ++s) {
    for (size_t i = 0; i < slot_count_; ++i) {
      const uint64_t bit = uint64_t{1} << i;
      if ((sets_[s] & bit) != 0) continue;
      auto it = index_.find(sets_[s] | bit);
      if (it != index_.end()) add_[s * slot_count_ + i] = it->second;
    }
  }
  return OkStatus();
}

// Relative value iteration on the uniformised chain:
//   h'(s) = (1/Λ) [ Σ_p λ_p max_{n ∈ A_p(s)} (r_p + h(n))  (h(s) when A_p(s) is empty)
//                  + Σ_{i ∈ s} h(s − i) + (Λ − Σ_p λ_p − |s|) h(s) ],
// Λ = Σ_p λ_p + max |s| + 1; h is renormalised to h(empty) = 0 after each
// sweep; stop when the span of h' − h times Λ is below the tolerance.
void ValueTable::Iterate(const SolveOptions& options, const ValueTable* warm) {
  const mig::GpuModel& m = model();
  const size_t n = sets_.size();
  // Departures: the states after removing each present slot.
  std::vector<std::vector<int32_t>> depart(n);
  int max_instances = 0;
  for (size_t s = 0; s < n; ++s) {
    max_instances = std::max(max_instances, std::popcount(sets_[s]));
    for (uint64_t bits = sets_[s]; bits != 0; bits &= bits - 1) {
      depart[s].push_back(index_.at(sets_[s] & ~(bits & -bits)));
    }
  }
  double total_rate = 0;
  for (double r : spec_.rates) total_rate += r;
  const double uniform = total_rate + max_instances + 1.0;
  std::vector<double> h(n, 0.0), next(n, 0.0);
  if (warm != nullptr && warm->profiles_ == profiles_ && warm->sets_ == sets_) h = warm->h_;
  for (stats_.iterations = 1; stats_.iterations <= options.max_iterations; ++stats_.iterations) {
    double lo = 1e300, hi = -1e300;
    for (size_t s = 0; s < n; ++s) {
      double v = 0;
      for (size_t p = 0; p < spec_.rates.size(); ++p) {
        if (spec_.rates[p] <= 0) continue;
        double best = -1e300;
        for (int16_t slot : slot_of_[p]) {
          if (slot < 0) continue;
          const int32_t to = add_[s * slot_count_ + static_cast<size_t>(slot)];
          if (to >= 0) best = std::max(best, Reward(m, spec_.objective, p) + h[to]);
        }
        v += spec_.rates[p] * (best > -1e299 ? best : h[s]);
      }
      for (int32_t to : depart[s]) v += h[to];
      v += (uniform - total_rate - static_cast<double>(depart[s].size())) * h[s];
      next[s] = v / uniform;
      lo = std::min(lo, next[s] - h[s]);
      hi = std::max(hi, next[s] - h[s]);
    }
    const double ref = next[0];
    for (size_t s = 0; s < n; ++s) h[s] = next[s] - ref;
    stats_.gain = uniform * 0.5 * (lo + hi);
    if ((hi - lo) * uniform < options.tolerance) {
      stats_.converged = true;
      break;
    }
  }
  h_ = std::move(h);
}

int ValueTable::SlotOf(size_t profile, uint32_t start) const {
  if (profile >= slot_of_.size() || start >= slot_of_[profile].size()) return -1;
  return slot_of_[profile][start];
}

int ValueTable::StateOf(uint64_t slot_set) const {
  auto it = index_.find(slot_set);
  return it == index_.end() ? -1 : it->second;
}

std::vector<double> PerGpuRates(const mig::GpuModel& model, const DemandWeights& mix, double load) {
  std::vector<double> w(model.gi_profiles.size(), 0.0);
  double total = 0;
  for (const auto& [name, weight] : mix) {
    const mig::GiProfile* p = model.FindProfileByName(name);
    if (p == nullptr || p->placements.empty() || !(weight > 0)) continue;
    w[static_cast<size_t>(p - model.gi_profiles.data())] += weight;
    total += weight;
  }
  if (total <= 0) return std::vector<double>(w.size(), 0.0);
  double mean_c = 0;
  for (size_t p = 0; p < w.size(); ++p) {
    w[p] /= total;
    mean_c += w[p] * model.gi_profiles[p].slice_count;
  }
  const double rate = mean_c > 0 ? load * model.compute_slices / mean_c : 0;
  for (double& x : w) x *= rate;
  return w;
}

}  // namespace migd::planner
