#include "k8s/dra/slices.h"

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

#include <algorithm>
#include <limits>

namespace migd::k8s::dra {
namespace {

using Json = nlohmann::json;

// k8s.io/api resource/v1: DeviceAttributeMaxValueLength.
constexpr size_t kMaxAttributeValue = 64;
// DNS subdomain (object names).
constexpr size_t kMaxObjectName = 253;

Json Quantity(int64_t v) { return Json{{"value", std::to_string(v)}}; }

Json CountersJson(const Counters& c) {
  Json out = Json::object();
  for (const auto& [name, v] : c) out[name] = Quantity(v);
  return out;
}

Json StringAttr(std::string s) {
  if (s.size() > kMaxAttributeValue) s.resize(kMaxAttributeValue);
  return Json{{"string", std::move(s)}};
}
Json IntAttr(int64_t v) { return Json{{"int", v}}; }

Json DeviceJson(const PoolDevice& d) {
  Json dev;
  dev["name"] = d.name;
  Json& a = dev["attributes"];
  a["type"] = StringAttr("mig");
  a["profile"] = StringAttr(d.profile->name);
  a["profileID"] = IntAttr(d.profile->id.value());
  a["memoryMiB"] = IntAttr(static_cast<int64_t>(d.profile->memory_mib));
  a["parentUUID"] = StringAttr(d.gpu_uuid.value());
  a["parentIndex"] = IntAttr(d.gpu.value());
  if (!d.product_name.empty()) a["productName"] = StringAttr(d.product_name);
  a["placementStart"] = IntAttr(d.placement.start);
  a["placementSize"] = IntAttr(d.placement.size);
  if (!d.pci_bus_id.empty())
    a["resource.kubernetes.io/pciBusID"] = StringAttr(SysfsBusId(d.pci_bus_id));
  dev["capacity"]["memory"] = Json{{"value", MebibyteQuantity(d.profile->memory_mib)}};
  if (d.profile->sm_count > 0) dev["capacity"]["multiprocessors"] = Quantity(d.profile->sm_count);
  dev["consumesCounters"] =
      Json::array({Json{{"counterSet", d.counter_set}, {"counters", CountersJson(d.consumes)}}});
  return dev;
}

Json BaseSpec(const SliceOptions& o) {
  Json spec;
  spec["driver"] = o.driver;
  spec["pool"] = Json{{"name", o.pool}};
  spec["nodeName"] = o.node_name;
  return spec;
}

Json CounterSetJson(const PoolCounterSet& cs) {
  return Json{{"name", cs.name}, {"counters", CountersJson(cs.counters)}};
}

// Device slices of the split layout: whole profile runs per slice where
// they fit (see slices.h).
std::vector<std::vector<const PoolDevice*>> PackDevices(const std::vector<PoolDevice>& devices,
                                                        size_t max) {
  std::vector<std::vector<const PoolDevice*>> runs;
  for (const PoolDevice& d : devices) {
    if (runs.empty() || runs.back().front()->profile->name != d.profile->name) runs.emplace_back();
    runs.back().push_back(&d);
  }
  std::vector<std::vector<const PoolDevice*>> slices;
  for (const auto& run : runs) {
    if (slices.empty() || slices.back().size() + run.size() > max) {
      if (slices.empty() || !slices.back().empty()) slices.emplace_back();
    }
    for (const PoolDevice* d : run) {
      if (slices.back().size() == max) slices.emplace_back();
      slices.back().push_back(d);
    }
  }
  return slices;
}

// FNV-1a, for shortening names.
uint64_t Fnv(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void Canonicalize(Json& j) {
  if (j.is_object()) {
    if (j.size() == 1 && j.contains("value") && j["value"].is_string()) {
      if (std::optional<int64_t> q = ParseIntegerQuantity(j["value"].get<std::string>())) {
        j["value"] = std::to_string(*q);
      }
      return;
    }
    for (auto& [k, v] : j.items()) Canonicalize(v);
  } else if (j.is_array()) {
    for (Json& v : j) Canonicalize(v);
  }
}

}  // namespace

std::string_view CounterLayoutName(CounterLayout layout) {
  return layout == CounterLayout::kCombined ? "combined" : "split";
}

std::optional<CounterLayout> CounterLayoutFromName(std::string_view name) {
  if (name == "combined") return CounterLayout::kCombined;
  if (name == "split") return CounterLayout::kSplit;
  return std::nullopt;
}

CounterLayout LayoutForServer(int major, int minor) {
  return (major > 1 || (major == 1 && minor >= 35)) ? CounterLayout::kSplit
                                                    : CounterLayout::kCombined;
}

std::string MebibyteQuantity(uint64_t mib) {
  if (mib != 0 && mib % (1024ull * 1024) == 0) return absl::StrCat(mib / (1024ull * 1024), "Ti");
  if (mib != 0 && mib % 1024 == 0) return absl::StrCat(mib / 1024, "Gi");
  return absl::StrCat(mib, "Mi");
}

std::optional<int64_t> ParseIntegerQuantity(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 18) return std::nullopt;
  int64_t v = 0;
  for (size_t i = 0; i < digits; ++i) v = v * 10 + (text[i] - '0');
  const std::string_view suffix = text.substr(digits);
  struct Unit {
    std::string_view name;
    int64_t factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"Ki", int64_t{1} << 10},
      {"Mi", int64_t{1} << 20},
      {"Gi", int64_t{1} << 30},
      {"Ti", int64_t{1} << 40},
      {"Pi", int64_t{1} << 50},
      {"k", 1000},
      {"M", 1000000},
      {"G", 1000000000},
      {"T", 1000000000000},
  };
  for (const Unit& u : kUnits) {
    if (suffix != u.name) continue;
    if (v > std::numeric_limits<int64_t>::max() / u.factor) return std::nullopt;
    return v * u.factor;
  }
  return std::nullopt;
}

std::string SysfsBusId(std::string_view nvml_bus_id) {
  std::string id = absl::AsciiStrToLower(std::string(nvml_bus_id));
  const size_t colon = id.find(':');
  // NVML's domain has 8 hex digits; sysfs prints 4 while the upper ones are 0.
  if (colon == 8 && id.compare(0, 4, "0000") == 0) id = id.substr(4);
  return id;
}

std::string SliceName(const SliceOptions& o, size_t index) {
  std::string driver = o.driver;
  std::replace(driver.begin(), driver.end(), '.', '-');
  std::string base = absl::StrCat(o.node_name, "-", driver);
  const std::string suffix = absl::StrFormat("-%03u", static_cast<unsigned>(index));
  if (base.size() + suffix.size() > kMaxObjectName) {
    const std::string hash = absl::StrFormat("-%016x", Fnv(base));
    base = base.substr(0, kMaxObjectName - suffix.size() - hash.size());
    while (!base.empty() && (base.back() == '-' || base.back() == '.')) base.pop_back();
    base += hash;
  }
  return base + suffix;
}

std::vector<DesiredSlice> RenderSlices(const Pool& pool, const SliceOptions& o) {
  std::vector<Json> specs;
  if (o.layout == CounterLayout::kCombined) {
    for (const PoolCounterSet& cs : pool.counter_sets) {
      Json spec = BaseSpec(o);
      spec["sharedCounters"] = Json::array({CounterSetJson(cs)});
      spec["devices"] = Json::array();
      for (const PoolDevice& d : pool.devices) {
        if (d.gpu == cs.gpu) spec["devices"].push_back(DeviceJson(d));
      }
      specs.push_back(std::move(spec));
    }
  } else {
    const size_t per = std::max<size_t>(1, o.max_counter_sets);
    for (size_t i = 0; i < pool.counter_sets.size(); i += per) {
      Json spec = BaseSpec(o);
      spec["sharedCounters"] = Json::array();
      for (size_t j = i; j < std::min(pool.counter_sets.size(), i + per); ++j) {
        spec["sharedCounters"].push_back(CounterSetJson(pool.counter_sets[j]));
      }
      specs.push_back(std::move(spec));
    }
    for (const auto& chunk : PackDevices(pool.devices, std::max<size_t>(1, o.max_devices))) {
      Json spec = BaseSpec(o);
      spec["devices"] = Json::array();
      for (const PoolDevice* d : chunk) spec["devices"].push_back(DeviceJson(*d));
      specs.push_back(std::move(spec));
    }
  }
  std::vector<DesiredSlice> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    specs[i]["pool"]["resourceSliceCount"] = static_cast<int64_t>(specs.size());
    out.push_back({SliceName(o, i), std::move(specs[i])});
  }
  return out;
}

Json SliceObject(const DesiredSlice& slice, int64_t generation, const SliceOptions& o) {
  Json obj;
  obj["apiVersion"] = "resource.k8s.io/v1";
  obj["kind"] = "ResourceSlice";
  obj["metadata"]["name"] = slice.name;
  obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "migd";
  if (!o.node_uid.empty()) {
    obj["metadata"]["ownerReferences"] = Json::array({Json{{"apiVersion", "v1"},
                                                           {"kind", "Node"},
                                                           {"name", o.node_name},
                                                           {"uid", o.node_uid},
                                                           {"controller", true}}});
  }
  obj["spec"] = slice.spec;
  obj["spec"]["pool"]["generation"] = generation;
  return obj;
}

Json ComparableSpec(const Json& spec) {
  Json out = spec;
  if (out.is_object() && out.contains("pool") && out["pool"].is_object()) {
    out["pool"].erase("generation");
  }
  Canonicalize(out);
  return out;
}

}  // namespace migd::k8s::dra
