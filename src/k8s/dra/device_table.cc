#include "k8s/dra/device_table.h"

#include <absl/strings/str_cat.h>

#include <algorithm>
#include <utility>

namespace migd::k8s::dra {
namespace {

// The engine counters, with the Engines member each one reads.
struct EngineCounter {
  const char* name;
  uint32_t mig::Engines::*field;
};
constexpr EngineCounter kEngineCounters[] = {
    {"copy-engines", &mig::Engines::copy_engines}, {"decoders", &mig::Engines::decoders},
    {"encoders", &mig::Engines::encoders},         {"jpeg-engines", &mig::Engines::jpeg},
    {"ofa-engines", &mig::Engines::ofa},
};

std::string InstanceCounter(const mig::GiProfile& p) {
  return absl::StrCat("gi-", p.id.value(), "-instances");
}

// The most instances of `p` the slices and the engine budget allow on an
// empty GPU: a maximum set of pairwise disjoint placements (intervals,
// greedy by end) and, per engine, total / need.
uint32_t UncappedLimit(const mig::GpuModel& model, const mig::GiProfile& p) {
  std::vector<mig::Placement> by_end = p.placements;
  std::sort(by_end.begin(), by_end.end(),
            [](const mig::Placement& a, const mig::Placement& b) { return a.end() < b.end(); });
  uint32_t disjoint = 0;
  uint32_t end = 0;
  bool first = true;
  for (const mig::Placement& pl : by_end) {
    if (first || pl.start >= end) {
      ++disjoint;
      end = pl.end();
      first = false;
    }
  }
  uint32_t limit = disjoint;
  for (const EngineCounter& e : kEngineCounters) {
    const uint32_t need = p.engines.*(e.field);
    if (need > 0) limit = std::min(limit, model.engine_totals.*(e.field) / need);
  }
  return limit;
}

Counters Capacity(const mig::GpuModel& model) {
  Counters c;
  for (uint32_t i = 0; i < model.memory_slices; ++i) c[MemorySliceCounter(i)] = 1;
  for (const EngineCounter& e : kEngineCounters) {
    bool needed = false;
    for (const mig::GiProfile& p : model.gi_profiles) needed = needed || p.engines.*(e.field) > 0;
    if (needed) c[e.name] = model.engine_totals.*(e.field);
  }
  for (const mig::GiProfile& p : model.gi_profiles) {
    if (p.instance_count < UncappedLimit(model, p)) c[InstanceCounter(p)] = p.instance_count;
  }
  return c;
}

}  // namespace

std::string ProfileSlug(std::string_view profile_name) {
  std::string out;
  for (char ch : profile_name) {
    if (ch == '.') continue;
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    const bool keep = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
    if (keep) {
      out += ch;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::string DeviceName(GpuIndex gpu, const mig::GiProfile& profile, const mig::Placement& p) {
  return absl::StrCat("gpu-", gpu.value(), "-", ProfileSlug(profile.name), "-", profile.id.value(),
                      "-", p.start);
}

std::string CounterSetName(GpuIndex gpu) { return absl::StrCat("gpu-", gpu.value()); }

std::string MemorySliceCounter(uint32_t slice) { return absl::StrCat("memory-slice-", slice); }

Counters Consumption(const Counters& capacity, const mig::GiProfile& profile,
                     const mig::Placement& placement) {
  Counters c;
  for (uint32_t i = placement.start; i < placement.end(); ++i) c[MemorySliceCounter(i)] = 1;
  for (const EngineCounter& e : kEngineCounters) {
    const uint32_t need = profile.engines.*(e.field);
    if (need > 0 && capacity.count(e.name) != 0) c[e.name] = need;
  }
  const std::string cap = InstanceCounter(profile);
  if (capacity.count(cap) != 0) c[cap] = 1;
  return c;
}

void Subtract(Counters& available, const Counters& used) {
  for (const auto& [name, amount] : used) {
    auto it = available.find(name);
    if (it != available.end()) it->second = std::max<int64_t>(0, it->second - amount);
  }
}

bool Fits(const Counters& available, const Counters& need) {
  for (const auto& [name, amount] : need) {
    auto it = available.find(name);
    if (it == available.end() || it->second < amount) return false;
  }
  return true;
}

DeviceTable BuildDeviceTable(GpuIndex gpu, const mig::GpuModel& model) {
  DeviceTable t;
  t.gpu = gpu;
  t.model = &model;
  t.counter_set = CounterSetName(gpu);
  t.capacity = Capacity(model);
  for (const mig::GiProfile& p : model.gi_profiles) {
    for (const mig::Placement& pl : p.placements) {
      t.devices.push_back({DeviceName(gpu, p, pl), &p, pl, Consumption(t.capacity, p, pl)});
    }
  }
  return t;
}

const TableDevice* DeviceTable::Find(const std::string& name) const {
  for (const TableDevice& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const TableDevice* DeviceTable::Find(GiProfileId profile, const mig::Placement& placement) const {
  for (const TableDevice& d : devices) {
    if (d.profile->id == profile && d.placement == placement) return &d;
  }
  return nullptr;
}

}  // namespace migd::k8s::dra
