#include "planner/demand_mix.h"

#include <cmath>

namespace migd::planner {

DemandMix::DemandMix(int64_t half_life_ticks)
    : half_life_(half_life_ticks < 0 ? kNoDecay : half_life_ticks) {}

double DemandMix::DecayFactor(int64_t ticks) const {
  if (half_life_ == kNoDecay || ticks <= 0) return 1.0;
  return std::exp2(-static_cast<double>(ticks) / static_cast<double>(half_life_));
}

void DemandMix::Observe(std::string_view profile, int64_t now_tick) {
  if (profile.empty()) return;
  double add = 1.0;
  if (!reference_.has_value()) {
    reference_ = now_tick;
  } else if (now_tick > *reference_) {
    // Move the reference forward: everything remembered decays uniformly.
    const double factor = DecayFactor(now_tick - *reference_);
    reference_ = now_tick;
    for (auto it = values_.begin(); it != values_.end();) {
      it->second *= factor;
      it = it->second < kForgetBelow ? values_.erase(it) : std::next(it);
    }
  } else {
    add = DecayFactor(*reference_ - now_tick);
    if (add < kForgetBelow) return;
  }
  auto it = values_.find(profile);
  if (it == values_.end()) {
    values_.emplace(std::string(profile), add);
  } else {
    it->second += add;
  }
}

double DemandMix::Weight(std::string_view profile) const {
  auto it = values_.find(profile);
  return it == values_.end() ? 0.0 : it->second;
}

}  // namespace migd::planner
