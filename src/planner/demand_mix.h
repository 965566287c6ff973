// File: planner/demand_mix.h
//
// DemandMix: how often each GI profile has been asked for recently, with
// exponential decay, so that the planner's alignment score can weight what a
// placement keeps possible by what is likely to be asked for next.
//
// The engine owns one DemandMix, calls Observe() for every requested instance
// and hands Weights() to the planner (PlanInput::demand). Pure: time is an
// integer tick supplied by the caller (the engine's clock, any unit), nothing
// here reads a clock.
//
// Decay: an observation made at tick t counts 2^(-(now - t) / half_life) at
// tick `now`. Only relative weights matter to the planner, so values are kept
// at one reference tick (the newest observation) and scaled when it advances.
//
// Example:
//   planner::DemandMix mix(/*half_life_ticks=*/3600);
//   mix.Observe("1g.10gb", now);
//   input.demand = mix.Weights();
//
// Thread-safety: value type; not safe for concurrent mutation.
#ifndef MIGD_PLANNER_DEMAND_MIX_H_
#define MIGD_PLANNER_DEMAND_MIX_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace migd::planner {

// Profile name (as requested, e.g. "1g.10gb") -> non-negative relative weight.
// Ordered, so iteration (and JSON output) is deterministic.
using DemandWeights = std::map<std::string, double, std::less<>>;

class DemandMix {
 public:
  // Half-life value that disables decay: every observation counts 1 forever.
  static constexpr int64_t kNoDecay = 0;
  // Observations whose decayed weight falls below this are forgotten (a fresh
  // observation weighs 1).
  static constexpr double kForgetBelow = 1e-12;

  // `half_life_ticks` > 0, or kNoDecay. A negative value is treated as kNoDecay.
  explicit DemandMix(int64_t half_life_ticks);

  int64_t half_life_ticks() const { return half_life_; }

  // Records one request for `profile` at `now_tick`. A tick older than the
  // newest observation is accepted and counts with its decay relative to it.
  // An empty profile name is ignored.
  void Observe(std::string_view profile, int64_t now_tick);

  // The decayed weight of every remembered profile, relative to the newest
  // observation (which counts 1). Empty when nothing has been observed.
  const DemandWeights& Weights() const { return values_; }
  // Weights()[profile], or 0.
  double Weight(std::string_view profile) const;
  bool empty() const { return values_.empty(); }
  // Tick of the newest observation; nullopt before the first one.
  std::optional<int64_t> reference_tick() const { return reference_; }

 private:
  // 2^(-ticks / half_life); 1 when decay is disabled.
  double DecayFactor(int64_t ticks) const;

  int64_t half_life_;
  std::optional<int64_t> reference_;
  DemandWeights values_;
};

}  // namespace migd::planner

#endif  // MIGD_PLANNER_DEMAND_MIX_H_
