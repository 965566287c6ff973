#include "bench/placement/table.h"

#include <algorithm>
#include <utility>

#include "base/status_macros.h"
#include "mig/layout.h"

namespace migd::bench {

std::string ProfileClassKey(const mig::GiProfile& profile) {
  const size_t dot = profile.name.find('.');
  std::string base = dot == std::string::npos ? profile.name : profile.name.substr(0, dot);
  if (profile.variant == mig::Variant::kDoubleMemory) return base + ".dm";
  return base;
}

StatusOr<GpuTable> GpuTable::Build(const mig::GpuModel& model, bool include_double_memory) {
  std::vector<std::pair<std::string, const mig::GiProfile*>> classes;
  for (const mig::GiProfile& p : model.gi_profiles) {
    if (p.variant == mig::Variant::kBase ||
        (include_double_memory && p.variant == mig::Variant::kDoubleMemory)) {
      classes.emplace_back(ProfileClassKey(p), &p);
    }
  }
  if (include_double_memory && std::none_of(classes.begin(), classes.end(), [](const auto& c) {
        return c.second->variant == mig::Variant::kDoubleMemory;
      })) {
    return InvalidArgumentError("model " + model.key + " has no double-memory 1g profile");
  }
  // Order: by compute, then memory (1g, 1g.dm, 2g, 3g, 4g, 7g).
  std::stable_sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) {
    if (a.second->slice_count != b.second->slice_count) {
      return a.second->slice_count < b.second->slice_count;
    }
    return a.second->placement_size() < b.second->placement_size();
  });
  return BuildFrom(model, classes);
}

Status GpuTable::AddClasses(
    const std::vector<std::pair<std::string, const mig::GiProfile*>>& classes) {
  if (classes.empty() || static_cast<int>(classes.size()) > kMaxProfiles) {
    return InvalidArgumentError("need 1.." + std::to_string(kMaxProfiles) + " profile classes");
  }
  for (const auto& [key, gi] : classes) {
    ProfileClass pc;
    pc.key = key;
    pc.gi = gi;
    pc.compute = static_cast<int>(gi->slice_count);
    pc.memory = static_cast<int>(gi->placement_size());
    const int p = static_cast<int>(profiles_.size());
    for (const mig::Placement& pl : gi->placements) {
      pc.pairs.push_back(static_cast<int>(pairs_.size()));
      pairs_.push_back({p, pl.start, pl.size, pl.Mask()});
    }
    profiles_.push_back(std::move(pc));
  }
  if (static_cast<int>(pairs_.size()) > kMaxPairs) {
    return InvalidArgumentError("table of " + model_->key + " has " +
                                std::to_string(pairs_.size()) + " pairs (max " +
                                std::to_string(kMaxPairs) + ")");
  }
  return OkStatus();
}

std::vector<uint32_t> GpuTable::LegalPairSets() const {
  std::vector<const mig::GiProfile*> gis;
  for (const ProfileClass& pc : profiles_) gis.push_back(pc.gi);
  const std::vector<mig::Layout> layouts = mig::EnumerateLayouts(*model_, gis);
  std::vector<uint32_t> sets;
  for (const mig::Layout& l : layouts) {
    uint32_t set = 0;
    for (const mig::PlacedGi& gi : l.instances()) {
      for (size_t i = 0; i < pairs_.size(); ++i) {
        const PairInfo& pi = pairs_[i];
        if (profiles_[pi.profile].gi == gi.profile && pi.start == gi.placement.start) {
          set |= 1u << i;
        }
      }
    }
    sets.push_back(set);
  }
  // The empty layout first, then by instance count, then pair set: state 0 is empty.
  std::sort(sets.begin(), sets.end(), [](uint32_t a, uint32_t b) {
    const int pa = __builtin_popcount(a);
    const int pb = __builtin_popcount(b);
    return pa != pb ? pa < pb : a < b;
  });
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  return sets;
}

void GpuTable::FillState(size_t s) {
  const size_t npairs = pairs_.size();
  StateInfo& st = states_[s];
  const uint32_t set = st.pair_set;
  for (size_t i = 0; i < npairs; ++i) {
    const uint32_t bit = 1u << i;
    const PairInfo& pi = pairs_[i];
    if (set & bit) {
      st.mask |= pi.mask;
      st.compute += profiles_[pi.profile].compute;
      st.memory += profiles_[pi.profile].memory;
      ++st.instances;
      ++st.count[pi.profile];
      remove_[s * npairs + i] = by_set_[set & ~bit];
    } else {
      const int16_t next = by_set_[set | bit];
      add_[s * npairs + i] = next;
      if (next >= 0) {
        st.placeable |= 1u << pi.profile;
        ++st.legal_pairs;
      }
    }
  }
  st.maximal = st.legal_pairs == 0;
  int run = 0;
  for (int u = 0; u < static_cast<int>(model_->memory_slices); ++u) {
    run = (st.mask >> u) & 1u ? 0 : run + 1;
    st.largest_free_run = std::max(st.largest_free_run, run);
  }
  max_instances_ = std::max(max_instances_, st.instances);
}

StatusOr<GpuTable> GpuTable::BuildFrom(
    const mig::GpuModel& model,
    const std::vector<std::pair<std::string, const mig::GiProfile*>>& classes) {
  GpuTable t;
  t.model_ = &model;
  MIGD_RETURN_IF_ERROR(t.AddClasses(classes));
  const std::vector<uint32_t> sets = t.LegalPairSets();
  if (sets.size() > 32000) return InvalidArgumentError("too many states");
  const size_t npairs = t.pairs_.size();
  t.by_set_.assign(size_t{1} << npairs, -1);
  for (size_t s = 0; s < sets.size(); ++s) t.by_set_[sets[s]] = static_cast<int16_t>(s);
  t.states_.resize(sets.size());
  t.add_.assign(sets.size() * npairs, -1);
  t.remove_.assign(sets.size() * npairs, -1);
  for (size_t s = 0; s < sets.size(); ++s) {
    t.states_[s].pair_set = sets[s];
    t.FillState(s);
  }
  for (int s = 0; s < t.num_states(); ++s) {
    if (t.states_[s].maximal) t.maximal_.push_back(s);
  }
  std::sort(t.maximal_.begin(), t.maximal_.end(),
            [&t](int a, int b) { return t.StateString(a) < t.StateString(b); });
  return t;
}

int GpuTable::StateOf(uint32_t set) const {
  if (set >= by_set_.size()) return -1;
  return by_set_[set];
}

int GpuTable::FindProfile(std::string_view key) const {
  for (int p = 0; p < num_profiles(); ++p) {
    if (profiles_[p].key == key) return p;
  }
  return -1;
}

int GpuTable::PairOf(int p, uint32_t start) const {
  if (p < 0 || p >= num_profiles()) return -1;
  for (int i : profiles_[p].pairs) {
    if (pairs_[i].start == start) return i;
  }
  return -1;
}

std::string GpuTable::StateString(int s) const {
  std::vector<int> present;
  for (int i = 0; i < num_pairs(); ++i) {
    if (states_[s].pair_set & (1u << i)) present.push_back(i);
  }
  std::sort(present.begin(), present.end(), [this](int a, int b) {
    return pairs_[a].start != pairs_[b].start ? pairs_[a].start < pairs_[b].start : a < b;
  });
  std::string out;
  for (int i : present) {
    if (!out.empty()) out += ' ';
    out += profiles_[pairs_[i].profile].key + "@" + std::to_string(pairs_[i].start);
  }
  return out.empty() ? "-" : out;
}

}  // namespace migd::bench
