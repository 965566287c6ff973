#include "mig/layout.h"

#include <algorithm>
#include <limits>

namespace migd::mig {
namespace {

std::string EnginesToString(const Engines& e) {
  return "CE/DEC/ENC/JPG/OFA " + std::to_string(e.copy_engines) + "/" + std::to_string(e.decoders) +
         "/" + std::to_string(e.encoders) + "/" + std::to_string(e.jpeg) + "/" +
         std::to_string(e.ofa);
}

std::string PlacementList(const GiProfile& profile) {
  std::string out;
  for (const Placement& p : profile.placements) {
    if (!out.empty()) out += ' ';
    out += p.ToString();
  }
  return out.empty() ? "none" : out;
}

// "1g.10gb+me" -> "1g+me": drops the memory part, keeps the variant suffix.
// The double-memory 1g keeps its full name, since "1g" alone would read as
// the base 1g.
std::string ShortName(const GiProfile& profile) {
  if (profile.variant == Variant::kDoubleMemory) return profile.name;
  const size_t dot = profile.name.find('.');
  if (dot == std::string::npos) return profile.name;
  const size_t suffix = profile.name.find_first_of("+-", dot);
  return profile.name.substr(0, dot) +
         (suffix == std::string::npos ? std::string() : profile.name.substr(suffix));
}

// How many copies of `need` fit into `free`; unlimited if `need` is all zero.
uint32_t EngineFit(const EngineVector& free, const EngineVector& need) {
  uint32_t fit = std::numeric_limits<uint32_t>::max();
  for (size_t i = 0; i < free.size(); ++i) {
    if (need[i] > 0) fit = std::min(fit, free[i] / need[i]);
  }
  return fit;
}

}  // namespace

Layout::Layout(const GpuModel& model) : model_(&model) {
  StatusOr<PlacementRules> rules = PlacementRules::Build(model);
  if (rules.ok()) {
    rules_ = std::make_shared<const PlacementRules>(*std::move(rules));
  } else {
    rules_error_ = rules.status();
  }
}

int Layout::IndexOf(const GiProfile& profile) const {
  const std::vector<GiProfile>& all = model_->gi_profiles;
  if (all.empty() || &profile < all.data() || &profile >= all.data() + all.size()) return -1;
  return static_cast<int>(&profile - all.data());
}

uint32_t Layout::CountOf(GiProfileId id) const {
  uint32_t n = 0;
  for (const PlacedGi& gi : instances_) {
    if (gi.profile->id == id) ++n;
  }
  return n;
}

Status Layout::CanAdd(const GiProfile& profile, const Placement& placement) const {
  const int index = IndexOf(profile);
  if (index < 0) {
    return InvalidArgumentError("profile " + profile.name + " (id " +
                                std::to_string(profile.id.value()) + ") is not a profile of " +
                                model_->key);
  }
  if (rules_ == nullptr) return rules_error_;
  switch (CheckAdd(*rules_, occupancy_, static_cast<size_t>(index), placement)) {
    case Verdict::kOk:
      return OkStatus();
    case Verdict::kNotListed:
      return InvalidArgumentError("placement " + placement.ToString() + " is not listed for " +
                                  profile.name + " on " + model_->key +
                                  " (listed: " + PlacementList(profile) + ")");
    case Verdict::kOverlap:
      for (const PlacedGi& gi : instances_) {
        if (gi.placement.Overlaps(placement)) {
          return ResourceExhaustedError("placement " + placement.ToString() + " of " +
                                        profile.name + " overlaps the " + gi.profile->name +
                                        " at " + gi.placement.ToString());
        }
      }
      return ResourceExhaustedError("placement " + placement.ToString() +
                                    " overlaps an existing GI");
    case Verdict::kInstanceCount:
      return ResourceExhaustedError("instanceCount of " + profile.name + " reached (" +
                                    std::to_string(CountOf(profile.id)) + " of " +
                                    std::to_string(profile.instance_count) + ")");
    case Verdict::kEngines: {
      Engines free = model_->engine_totals;
      free -= engines_used();
      return ResourceExhaustedError("engine budget exhausted: " + profile.name + " needs " +
                                    EnginesToString(profile.engines) + ", free " +
                                    EnginesToString(free));
    }
  }
  return InternalError("unknown legality verdict");
}

Status Layout::Add(const GiProfile& profile, const Placement& placement) {
  Status s = CanAdd(profile, placement);
  if (!s.ok()) return s;
  instances_.push_back(PlacedGi{&profile, placement});
  occupancy_.Add(*rules_, static_cast<size_t>(IndexOf(profile)), placement.Mask());
  return OkStatus();
}

Status Layout::Remove(const GiProfile& profile, const Placement& placement) {
  auto it = std::find(instances_.begin(), instances_.end(), PlacedGi{&profile, placement});
  if (it == instances_.end()) {
    return NotFoundError("no " + profile.name + " at " + placement.ToString() + " on " +
                         model_->key);
  }
  instances_.erase(it);
  occupancy_.Remove(*rules_, static_cast<size_t>(IndexOf(profile)), placement.Mask());
  return OkStatus();
}

uint32_t Layout::RemainingCapacity(const GiProfile& profile) const {
  const int index = IndexOf(profile);
  if (index < 0 || rules_ == nullptr) return 0;
  const auto p = static_cast<size_t>(index);
  if (occupancy_.counts[p] >= rules_->cap(p)) return 0;
  uint32_t capacity = rules_->cap(p) - occupancy_.counts[p];

  // Placements are intervals on one axis, so taking the free one that ends
  // first, repeatedly, yields a largest pairwise-disjoint set (interval
  // scheduling); no search over subsets is needed.
  std::vector<Placement> free;
  for (const Placement& pl : profile.placements) {
    if ((occupancy_.mask & pl.Mask()) == 0) free.push_back(pl);
  }
  std::sort(free.begin(), free.end(),
            [](const Placement& a, const Placement& b) { return a.end() < b.end(); });
  uint32_t disjoint = 0;
  uint32_t taken = 0;
  for (const Placement& pl : free) {
    if ((taken & pl.Mask()) == 0) {
      taken |= pl.Mask();
      ++disjoint;
    }
  }
  capacity = std::min(capacity, disjoint);

  EngineVector engines_free = rules_->totals();
  for (size_t i = 0; i < engines_free.size(); ++i) {
    engines_free[i] -= std::min(engines_free[i], occupancy_.used[i]);
  }
  return std::min(capacity, EngineFit(engines_free, rules_->engines(p)));
}

bool Layout::IsMaximal(const std::vector<const GiProfile*>& profiles) const {
  for (const GiProfile* profile : profiles) {
    for (const Placement& p : profile->placements) {
      if (CanAdd(*profile, p).ok()) return false;
    }
  }
  return true;
}

std::string Layout::ToString() const {
  std::vector<const PlacedGi*> sorted;
  for (const PlacedGi& gi : instances_) sorted.push_back(&gi);
  std::sort(sorted.begin(), sorted.end(),
            [](const PlacedGi* a, const PlacedGi* b) { return a->placement < b->placement; });
  std::string out;
  for (const PlacedGi* gi : sorted) {
    if (!out.empty()) out += ' ';
    out += ShortName(*gi->profile) + "@" + std::to_string(gi->placement.start);
  }
  return out;
}

namespace {

struct Candidate {
  const GiProfile* profile;
  Placement placement;
};

// Visits each set of candidates once: a layout only ever grows by candidates
// after the last one added, so no set is reached in two orders.
void Extend(const std::vector<Candidate>& candidates, size_t first, Layout& layout,
            std::vector<Layout>& out) {
  out.push_back(layout);
  for (size_t i = first; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!layout.Add(*c.profile, c.placement).ok()) continue;
    Extend(candidates, i + 1, layout, out);
    layout.Remove(*c.profile, c.placement).IgnoreError();
  }
}

}  // namespace

std::vector<Layout> EnumerateLayouts(const GpuModel& model,
                                     const std::vector<const GiProfile*>& profiles) {
  std::vector<Candidate> candidates;
  std::vector<const GiProfile*> seen;
  for (const GiProfile* profile : profiles) {
    // A profile listed twice would produce every set containing it twice over.
    if (std::find(seen.begin(), seen.end(), profile) != seen.end()) continue;
    seen.push_back(profile);
    for (const Placement& p : profile->placements) candidates.push_back({profile, p});
  }
  std::vector<Layout> out;
  Layout layout(model);
  Extend(candidates, 0, layout, out);
  return out;
}

std::vector<const GiProfile*> ProfilesOfVariants(const GpuModel& model,
                                                 const std::vector<Variant>& variants) {
  std::vector<const GiProfile*> out;
  for (const GiProfile& p : model.gi_profiles) {
    if (std::find(variants.begin(), variants.end(), p.variant) != variants.end()) {
      out.push_back(&p);
    }
  }
  return out;
}

}  // namespace migd::mig
