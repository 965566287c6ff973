#include "planner/value_service.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "planner/planner.h"
#include "planner/scoring.h"

namespace migd::planner {
namespace {

// The least offered load per GPU a table is solved for: an estimate of 0
// (nothing Active yet) would make every choice equal. The drift is measured
// from the clamped estimate too, or a node whose load stays below the floor
// would read a drift of 0.25 at every arrival and never stop solving.
constexpr double kMinSolveLoad = 0.05;

// Total variation distance of two normalised mixes.
double TotalVariation(const DemandWeights& a, const DemandWeights& b) {
  double d = 0;
  for (const auto& [name, w] : a) {
    auto it = b.find(name);
    d += std::abs(w - (it == b.end() ? 0.0 : it->second));
  }
  for (const auto& [name, w] : b) {
    if (a.find(name) == a.end()) d += w;
  }
  return 0.5 * d;
}

// Σ compute slices of the request's instances on the first GPU that knows
// the profile (a name resolves per model).
double RequestCompute(const PlanInput& input) {
  double c = 0;
  for (const InstanceRequest& r : input.request) {
    for (const GpuLayout& g : input.gpus) {
      const mig::GiProfile* p =
          g.model != nullptr ? g.model->FindProfileByName(r.profile) : nullptr;
      if (p != nullptr) {
        c += p->slice_count;
        break;
      }
    }
  }
  return c;
}

// Active compute / compute capacity of the node.
double ActiveFraction(const PlanInput& input) {
  double active = 0, capacity = 0;
  for (const GpuLayout& g : input.gpus) {
    if (g.model == nullptr) continue;
    capacity += g.model->compute_slices;
    for (const Occupant& o : g.occupants) {
      if (o.state != OccupantState::kActive) continue;
      const mig::GiProfile* p = g.model->FindProfileByName(o.profile);
      if (p != nullptr) active += p->slice_count;
    }
  }
  return capacity > 0 ? active / capacity : 0;
}

}  // namespace

ValueService::ValueService(ValueOptions options, std::unique_ptr<SolveExecutor> executor)
    : options_(std::move(options)), executor_(std::move(executor)) {}

ValueService::~ValueService() { executor_.reset(); }

void ValueService::Start() { executor_->Start(); }

void ValueService::Stop() { executor_->Stop(); }

void ValueService::ObserveArrival(const PlanInput& input, bool placed) {
  MutexLock l(&mu_);
  const double decay =
      options_.half_life_arrivals > 0 ? std::exp2(-1.0 / options_.half_life_arrivals) : 1.0;
  for (auto& [name, w] : counts_) w *= decay;
  active_fraction_sum_ *= decay;
  weight_sum_ *= decay;
  offered_compute_ *= decay;
  placed_compute_ *= decay;
  for (const InstanceRequest& r : input.request) counts_[r.profile] += 1.0;
  active_fraction_sum_ += ActiveFraction(input);
  weight_sum_ += 1.0;
  const double c = RequestCompute(input);
  offered_compute_ += c;
  if (placed) placed_compute_ += c;
  ++arrivals_;
  if (arrivals_ < options_.min_arrivals) return;
  for (const GpuLayout& g : input.gpus) {
    if (g.model == nullptr) continue;
    Entry& e = EntryLocked(*g.model);
    if (e.in_flight) continue;
    // The first solve of a model is not a drift solve (an entry that never
    // had a table is infinitely far from any estimate).
    const bool first = e.table == nullptr && !e.failed;
    if (first || DriftLocked(e) > options_.drift_threshold) {
      if (!first) ++counters_.drift_solves;
      StartSolveLocked(e, e.extra);
    }
  }
}

void ValueService::Prime(const DemandWeights& mix, double load,
                         const std::vector<const mig::GpuModel*>& models) {
  MutexLock l(&mu_);
  counts_ = mix;
  weight_sum_ = 1.0;
  active_fraction_sum_ = load;
  offered_compute_ = 1.0;
  placed_compute_ = 1.0;
  arrivals_ = std::max<int64_t>(arrivals_, options_.min_arrivals);
  for (const mig::GpuModel* m : models) {
    Entry& e = EntryLocked(*m);
    if (!e.in_flight) StartSolveLocked(e, e.extra);
  }
}

std::shared_ptr<const ValueTable> ValueService::Values(const mig::GpuModel& model,
                                                       uint32_t needed) {
  MutexLock l(&mu_);
  Entry& e = EntryLocked(model);
  if (e.table == nullptr) return nullptr;
  if ((needed & ~e.table->profiles()) != 0) {
    // A profile present or requested is not in the table: solve with it
    // (once; a refused solve is retried only when the demand drifts).
    const uint32_t extra = e.extra | needed;
    const bool refused = e.failed && e.failed_extra == extra;
    if (!e.in_flight && !refused && arrivals_ >= options_.min_arrivals) {
      StartSolveLocked(e, extra);
    }
    return nullptr;
  }
  return e.table;
}

DemandEstimate ValueService::estimate() const {
  MutexLock l(&mu_);
  return DemandEstimate{counts_, LoadLocked(), arrivals_};
}

ValueServiceCounters ValueService::counters() const {
  MutexLock l(&mu_);
  return counters_;
}

DemandWeights ValueService::NormalisedMixLocked() const {
  double total = 0;
  for (const auto& [name, w] : counts_) total += w;
  DemandWeights out;
  if (total <= 0) return out;
  for (const auto& [name, w] : counts_) out[name] = w / total;
  return out;
}

double ValueService::LoadLocked() const {
  if (weight_sum_ <= 0) return 0;
  const double carried = active_fraction_sum_ / weight_sum_;
  const double acceptance = offered_compute_ > 0 ? placed_compute_ / offered_compute_ : 1.0;
  return carried / std::max(acceptance, 0.05);
}

double ValueService::DriftLocked(const Entry& e) const {
  const double load = std::max(LoadLocked(), kMinSolveLoad);
  const double load_drift = e.load > 0 ? std::abs(load - e.load) / (4 * e.load) : 1.0;
  return std::max(TotalVariation(NormalisedMixLocked(), e.mix), load_drift);
}

ValueService::Entry& ValueService::EntryLocked(const mig::GpuModel& model) {
  Entry& e = entries_[model.key];
  if (e.seen == &model && e.seen_profiles == model.gi_profiles.data() &&
      e.seen_count == model.gi_profiles.size()) {
    return e;
  }
  if (e.model == nullptr || !internal_planner::SameTable(*e.model, model)) {
    // New model, or the same key now describes another table: forget the
    // old values (an in-flight solve for the old copy is dropped on publish).
    e = Entry{};
    e.model = std::make_shared<const mig::GpuModel>(model);
  }
  e.seen = &model;
  e.seen_profiles = model.gi_profiles.data();
  e.seen_count = model.gi_profiles.size();
  return e;
}

void ValueService::StartSolveLocked(Entry& e, uint32_t extra) {
  e.in_flight = true;
  e.pending_extra = extra;
  e.mix = NormalisedMixLocked();
  e.load = std::max(LoadLocked(), kMinSolveLoad);
  ValueSpec spec;
  spec.objective = options_.objective;
  spec.rates = PerGpuRates(*e.model, e.mix, e.load);
  spec.extra_profiles = extra;
  std::shared_ptr<const mig::GpuModel> model = e.model;
  std::shared_ptr<const ValueTable> warm = e.table;  // starts the iteration
  const std::string key = model->key;
  const SolveOptions solve = options_.solve;
  executor_->Submit([this, key, model, spec, solve, warm] {
    Publish(key, model, ValueTable::Solve(model, spec, solve, warm.get()));
  });
}

void ValueService::Publish(const std::string& key,
                           const std::shared_ptr<const mig::GpuModel>& model,
                           StatusOr<std::shared_ptr<const ValueTable>> table) {
  MutexLock l(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.model != model) return;  // superseded
  Entry& e = it->second;
  e.in_flight = false;
  if (!table.ok()) {
    ++counters_.solve_failures;
    e.failed = true;
    e.failed_extra = e.pending_extra;
    return;
  }
  e.failed = false;
  e.extra = e.pending_extra;
  e.table = *std::move(table);
  const SolveStats& st = e.table->stats();
  ++counters_.solves;
  ++counters_.version;
  counters_.last_solve_ns = st.solve_ns;
  counters_.max_solve_ns = std::max(counters_.max_solve_ns, st.solve_ns);
  counters_.total_solve_ns += st.solve_ns;
  counters_.max_bytes = std::max(counters_.max_bytes, st.bytes);
  counters_.max_states = std::max(counters_.max_states, st.states);
}

}  // namespace migd::planner
