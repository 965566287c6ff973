#include "k8s/dra/testing/allocator_model.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace migd::k8s::dra::testing {
namespace {

using Json = nlohmann::json;
using Counters = std::map<std::string, int64_t>;
using CounterSets = std::map<std::string, Counters>;

// Integer quantities with binary or decimal suffixes; -1 if unreadable.
int64_t Quantity(const Json& q) {
  if (!q.is_object() || !q.contains("value") || !q["value"].is_string()) return -1;
  const std::string s = q["value"].get<std::string>();
  size_t i = 0;
  int64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
  if (i == 0) return -1;
  static const std::map<std::string, int64_t> kUnits = {
      {"", 1},           {"Ki", 1LL << 10}, {"Mi", 1LL << 20}, {"Gi", 1LL << 30},
      {"Ti", 1LL << 40}, {"k", 1000},       {"M", 1000000},    {"G", 1000000000}};
  auto it = kUnits.find(s.substr(i));
  return it == kUnits.end() ? -1 : v * it->second;
}

Counters ReadCounters(const Json& counters) {
  Counters c;
  if (!counters.is_object()) return c;
  for (const auto& [name, q] : counters.items()) c[name] = Quantity(q);
  return c;
}

const Json& Spec(const Json& slice) {
  static const Json kEmpty = Json::object();
  return slice.contains("spec") && slice["spec"].is_object() ? slice["spec"] : kEmpty;
}

std::string Str(const Json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>()
                                                                      : "";
}

int64_t Int(const Json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_number_integer()
             ? obj[key].get<int64_t>()
             : 0;
}

const Json& Array(const Json& obj, const char* key) {
  static const Json kEmpty = Json::array();
  return obj.is_object() && obj.contains(key) && obj[key].is_array() ? obj[key] : kEmpty;
}

}  // namespace

struct AllocatorModel::Pool {
  struct Dev {
    const Json* json = nullptr;
    std::string name;
    size_t scope = 0;  // counter scope: the slice (v0.34) or 0 (pool-wide)
    std::vector<std::pair<std::string, Counters>> consumes;
  };
  PoolSummary summary;
  std::vector<const Json*> slices;
  std::vector<Dev> devices;                // walk order
  std::map<size_t, CounterSets> capacity;  // by counter scope
};

std::function<bool(const Json&)> StringAttributeIs(const std::string& attribute,
                                                   const std::string& value) {
  return [attribute, value](const Json& device) {
    const Json& attrs = device.value("attributes", Json::object());
    if (!attrs.is_object() || !attrs.contains(attribute)) return false;
    return Str(attrs[attribute], "string") == value;
  };
}

AllocatorModel::Pool AllocatorModel::Build(Pool p) const {
  const bool sorted = minor_ >= 36;
  const bool per_slice = minor_ < 35;
  p.summary.complete =
      !p.slices.empty() && static_cast<int64_t>(p.slices.size()) ==
                               Int(Spec(*p.slices[0])["pool"], "resourceSliceCount");
  if (sorted) {
    std::sort(p.slices.begin(), p.slices.end(), [](const Json* a, const Json* b) {
      return Str((*a)["metadata"], "name") < Str((*b)["metadata"], "name");
    });
  }
  p.summary.valid = true;
  std::set<std::string> names;
  std::set<std::string> set_names;
  for (size_t s = 0; s < p.slices.size(); ++s) {
    const Json& spec = Spec(*p.slices[s]);
    const size_t scope = per_slice ? s : 0;
    for (const Json& cs : Array(spec, "sharedCounters")) {
      const std::string key =
          per_slice ? std::to_string(s) + "/" + Str(cs, "name") : Str(cs, "name");
      if (!set_names.insert(key).second) {
        p.summary.valid = false;
        p.summary.invalid_reason = "duplicate counter set name " + Str(cs, "name");
      }
      p.capacity[scope][Str(cs, "name")] = ReadCounters(cs.value("counters", Json::object()));
    }
    for (const Json& d : Array(spec, "devices")) {
      Pool::Dev dev{&d, Str(d, "name"), scope, {}};
      if (!names.insert(dev.name).second) {
        p.summary.valid = false;
        p.summary.invalid_reason = "duplicate device name " + dev.name;
      }
      for (const Json& c : Array(d, "consumesCounters")) {
        dev.consumes.emplace_back(Str(c, "counterSet"),
                                  ReadCounters(c.value("counters", Json::object())));
      }
      p.devices.push_back(std::move(dev));
    }
  }
  for (const Pool::Dev& d : p.devices) {
    for (const auto& [set, counters] : d.consumes) {
      auto scope = p.capacity.find(d.scope);
      if (scope == p.capacity.end() || scope->second.count(set) == 0) {
        p.summary.valid = false;
        p.summary.invalid_reason = "counter set " + set + " not found";
        continue;
      }
      for (const auto& [name, v] : counters) {
        if (scope->second.at(set).count(name) == 0) {
          p.summary.valid = false;
          p.summary.invalid_reason = "counter " + name + " not found in counter set " + set;
        }
      }
    }
  }
  p.summary.devices = p.devices.size();
  return p;
}

std::vector<AllocatorModel::Pool> AllocatorModel::Gather(const std::vector<Json>& slices,
                                                         const std::string& node) const {
  std::vector<std::pair<std::string, std::string>> order;  // first-seen pool order
  std::map<std::pair<std::string, std::string>, Pool> pools;
  for (const Json& slice : slices) {
    const Json& spec = Spec(slice);
    const bool counters_only =
        !Array(spec, "sharedCounters").empty() && Array(spec, "devices").empty();
    if (Str(spec, "nodeName") != node && !(counters_only && minor_ >= 35)) continue;
    const auto id = std::make_pair(Str(spec, "driver"), Str(spec["pool"], "name"));
    const int64_t gen = Int(spec["pool"], "generation");
    auto it = pools.find(id);
    if (it == pools.end()) {
      order.push_back(id);
      it = pools.emplace(id, Pool{}).first;
      it->second.summary = {id.first, id.second, gen, false, false, "", 0};
    }
    Pool& p = it->second;
    if (gen < p.summary.generation) continue;
    if (gen > p.summary.generation) {
      p.slices.clear();
      p.summary.generation = gen;
    }
    p.slices.push_back(&slice);
  }
  std::vector<Pool> out;
  for (const auto& id : order) out.push_back(Build(std::move(pools[id])));
  if (minor_ >= 36) {
    std::sort(out.begin(), out.end(), [](const Pool& a, const Pool& b) {
      return std::tie(a.summary.driver, a.summary.pool) <
             std::tie(b.summary.driver, b.summary.pool);
    });
  }
  return out;
}

std::vector<PoolSummary> AllocatorModel::Pools(const std::vector<Json>& slices,
                                               const std::string& node) const {
  std::vector<PoolSummary> out;
  for (const Pool& p : Gather(slices, node)) out.push_back(p.summary);
  return out;
}

std::optional<std::vector<DeviceRef>> AllocatorModel::Allocate(
    const std::vector<Json>& slices, const std::set<DeviceRef>& allocated,
    const std::vector<ModelRequest>& requests, const std::string& node) const {
  std::vector<Pool> pools = Gather(slices, node);
  // Available counters per pool and scope, less the allocated devices.
  std::vector<std::map<size_t, CounterSets>> available(pools.size());
  for (size_t i = 0; i < pools.size(); ++i) {
    available[i] = pools[i].capacity;
    for (const Pool::Dev& d : pools[i].devices) {
      if (allocated.count({pools[i].summary.driver, pools[i].summary.pool, d.name}) == 0) continue;
      for (const auto& [set, counters] : d.consumes) {
        for (const auto& [name, v] : counters) {
          int64_t& a = available[i][d.scope][set][name];
          a = std::max<int64_t>(0, a - v);
        }
      }
    }
  }
  std::vector<std::pair<size_t, const Pool::Dev*>> chosen;  // (pool, device)
  std::vector<std::pair<size_t, int>> slots;                // (request, k)
  for (size_t r = 0; r < requests.size(); ++r) {
    for (int k = 0; k < requests[r].count; ++k) slots.emplace_back(r, k);
  }
  auto taken = [&](size_t pi, const Pool::Dev* d) {
    for (const auto& [cp, cd] : chosen) {
      if (cp == pi && cd == d) return true;
    }
    return allocated.count({pools[pi].summary.driver, pools[pi].summary.pool, d->name}) != 0;
  };
  auto fits = [&](size_t pi, const Pool::Dev* d) {
    for (const auto& [set, counters] : d->consumes) {
      for (const auto& [name, v] : counters) {
        int64_t used = v;
        for (const auto& [cp, cd] : chosen) {
          if (cp != pi || cd->scope != d->scope) continue;
          for (const auto& [cset, cc] : cd->consumes) {
            if (cset != set) continue;
            auto it = cc.find(name);
            if (it != cc.end()) used += it->second;
          }
        }
        auto sit = available[pi].find(d->scope);
        if (sit == available[pi].end()) return false;
        auto cit = sit->second.find(set);
        if (cit == sit->second.end()) return false;
        auto vit = cit->second.find(name);
        if (vit == cit->second.end() || vit->second < used) return false;
      }
    }
    return true;
  };
  std::function<bool(size_t)> solve = [&](size_t slot) -> bool {
    if (slot == slots.size()) return true;
    const ModelRequest& req = requests[slots[slot].first];
    for (size_t pi = 0; pi < pools.size(); ++pi) {
      const Pool& p = pools[pi];
      if (!p.summary.complete || !p.summary.valid || p.summary.driver != req.driver) continue;
      for (const Pool::Dev& d : p.devices) {
        if (taken(pi, &d) || !req.selector(*d.json) || !fits(pi, &d)) continue;
        chosen.emplace_back(pi, &d);
        if (solve(slot + 1)) return true;
        chosen.pop_back();
      }
    }
    return false;
  };
  if (!solve(0)) return std::nullopt;
  std::vector<DeviceRef> out;
  for (const auto& [pi, d] : chosen) {
    out.push_back({pools[pi].summary.driver, pools[pi].summary.pool, d->name});
  }
  return out;
}

}  // namespace migd::k8s::dra::testing
