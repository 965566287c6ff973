#include "k8s/apiserver/hami_codec.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <ctime>
#include <exception>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "mig/catalog.h"

namespace migd::k8s::hami {
namespace {

std::string Elem(size_t i) { return "hami.io/vgpu-mig-allocations[" + std::to_string(i) + "]"; }

StatusOr<int64_t> ParseInt(std::string_view s, const std::string& what) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) {
    return InvalidArgumentError(what + ": '" + std::string(s) + "' is not an integer");
  }
  return v;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

// The integer field `key` of `obj`, or `absent` when it is missing. nlohmann's
// get<int>() converts any number with a plain cast, so a float or an
// out-of-range integer (e.g. "start": 4e24) wrapped or was undefined
// behaviour (found by fuzz/hami_codec_fuzz.cc); like Go's json.Unmarshal into
// an int, only an integer that fits is accepted. Throws std::out_of_range
// otherwise (the caller turns it into kInvalidArgument).
template <typename T>
T IntField(const nlohmann::json& obj, const char* key, T absent) {
  auto it = obj.find(key);
  if (it == obj.end()) return absent;
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v <= static_cast<uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(v);
  } else if (it->is_number_integer()) {
    const int64_t v = it->get<int64_t>();
    if (std::in_range<T>(v)) return static_cast<T>(v);
  }
  throw std::out_of_range(std::string(key) + ": " + it->dump() + " is not an integer in range");
}

}  // namespace

StatusOr<std::vector<MigAllocation>> DecodeMigAllocations(std::string_view text) {
  std::vector<MigAllocation> out;
  if (text.empty()) return out;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(kMigAllocations) + ": not JSON: " + e.what());
  }
  if (!j.is_array()) {
    return InvalidArgumentError(std::string(kMigAllocations) + ": not a JSON array");
  }
  std::set<std::pair<int, int>> seen;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& e = j[i];
    MigAllocation a;
    try {
      if (!e.is_object()) return InvalidArgumentError(Elem(i) + ": not an object");
      a.container_index = IntField(e, "containerIndex", 0);
      a.device_index = IntField(e, "deviceIndex", 0);
      a.gpu_uuid = e.value("gpuUUID", "");
      a.profile = e.value("profile", "");
      if (e.contains("placement") && e["placement"].is_object()) {
        a.placement.start = IntField(e["placement"], "start", 0u);
        a.placement.size = IntField(e["placement"], "size", 0u);
      }
      if (e.contains("migUUID") && !e["migUUID"].is_null()) {
        a.mig_uuid = e["migUUID"].get<std::string>();
        if (a.mig_uuid->empty()) a.mig_uuid.reset();  // Go's omitempty: "" = absent
      }
      if (e.contains("gpuInstanceID") && !e["gpuInstanceID"].is_null()) {
        a.gpu_instance_id = IntField<uint32_t>(e, "gpuInstanceID", 0);
      }
      if (e.contains("computeInstanceID") && !e["computeInstanceID"].is_null()) {
        a.compute_instance_id = IntField<uint32_t>(e, "computeInstanceID", 0);
      }
    } catch (const std::exception& ex) {
      return InvalidArgumentError(Elem(i) + ": wrong field type: " + ex.what());
    }
    if (a.gpu_uuid.empty()) return InvalidArgumentError(Elem(i) + ": gpuUUID is missing");
    if (a.profile.empty()) return InvalidArgumentError(Elem(i) + ": profile is missing");
    if (a.placement.size == 0) return InvalidArgumentError(Elem(i) + ": placement.size is 0");
    const int present =
        a.mig_uuid.has_value() + a.gpu_instance_id.has_value() + a.compute_instance_id.has_value();
    if (present != 0 && present != 3) {
      return InvalidArgumentError(Elem(i) +
                                  ": partial runtime identity (migUUID, gpuInstanceID and "
                                  "computeInstanceID must be all present or all absent)");
    }
    if (!seen.insert({a.container_index, a.device_index}).second) {
      return InvalidArgumentError(Elem(i) + ": duplicate containerIndex " +
                                  std::to_string(a.container_index) + " deviceIndex " +
                                  std::to_string(a.device_index));
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string EncodeMigAllocations(const std::vector<MigAllocation>& allocations) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const MigAllocation& a : allocations) {
    nlohmann::ordered_json e;
    e["containerIndex"] = a.container_index;
    e["deviceIndex"] = a.device_index;
    e["gpuUUID"] = a.gpu_uuid;
    e["profile"] = a.profile;
    e["placement"] = {{"start", a.placement.start}, {"size", a.placement.size}};
    if (a.mig_uuid) e["migUUID"] = *a.mig_uuid;
    if (a.gpu_instance_id) e["gpuInstanceID"] = *a.gpu_instance_id;
    if (a.compute_instance_id) e["computeInstanceID"] = *a.compute_instance_id;
    arr.push_back(std::move(e));
  }
  return arr.dump();
}

StatusOr<PodDevices> DecodePodDevices(std::string_view text) {
  PodDevices out;
  if (text.empty()) return out;
  std::vector<std::string_view> containers = Split(text, ';');
  // The encoder terminates every container with ';': the last piece is empty.
  if (!containers.empty() && containers.back().empty()) containers.pop_back();
  for (size_t c = 0; c < containers.size(); ++c) {
    std::vector<ContainerDevice> devs;
    for (std::string_view d : Split(containers[c], ':')) {
      if (d.empty()) continue;
      const std::vector<std::string_view> f = Split(d, ',');
      const std::string what = std::string(kDevicesToAllocate) + " container " + std::to_string(c);
      if (f.size() < 4) {
        return InvalidArgumentError(what + ": device '" + std::string(d) +
                                    "' has fewer than 4 fields (UUID,Type,Usedmem,Usedcores)");
      }
      ContainerDevice dev;
      dev.uuid = std::string(f[0]);
      dev.type = std::string(f[1]);
      auto mem = ParseInt(f[2], what + " Usedmem");
      if (!mem.ok()) return mem.status();
      auto cores = ParseInt(f[3], what + " Usedcores");
      if (!cores.ok()) return cores.status();
      dev.used_mem = *mem;
      dev.used_cores = *cores;
      devs.push_back(std::move(dev));
    }
    out.push_back(std::move(devs));
  }
  return out;
}

std::string EncodePodDevices(const PodDevices& devices) {
  std::string out;
  for (const auto& ctr : devices) {
    for (const ContainerDevice& d : ctr) {
      out += d.uuid + "," + d.type + "," + std::to_string(d.used_mem) + "," +
             std::to_string(d.used_cores) + ":";
    }
    out += ";";
  }
  return out;
}

nlohmann::ordered_json NodeRegisterValue(const std::vector<engine::GpuView>& gpus,
                                         const std::set<std::string>& allowlist) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const engine::GpuView& g : gpus) {
    if (g.model == nullptr) continue;
    uint32_t full_sm = 0;
    for (const mig::GiProfile& p : g.model->gi_profiles) full_sm = std::max(full_sm, p.sm_count);
    nlohmann::ordered_json profiles = nlohmann::ordered_json::array();
    uint32_t count = 0;
    for (const mig::GiProfile& p : g.model->gi_profiles) {
      if (p.variant != mig::Variant::kBase) continue;
      if (!allowlist.empty() && !allowlist.count(p.name)) {
        bool alias = false;
        for (const std::string& a : p.aliases) alias = alias || allowlist.count(a) > 0;
        if (!alias) continue;
      }
      nlohmann::ordered_json prof;
      prof["name"] = p.name;
      prof["memoryMB"] = p.memory_mib;
      prof["core"] = full_sm == 0 ? 0 : (p.sm_count * 100 + full_sm - 1) / full_sm;
      prof["sliceCount"] = p.slice_count;
      nlohmann::ordered_json pl = nlohmann::ordered_json::array();
      for (const mig::Placement& x : p.placements)
        pl.push_back({{"start", x.start}, {"size", x.size}});
      prof["placements"] = std::move(pl);
      profiles.push_back(std::move(prof));
      count = std::max(count, p.instance_count);
    }
    // HAMi does not register a GPU without a discovered profile.
    if (profiles.empty()) continue;
    nlohmann::ordered_json d;
    d["id"] = g.info.uuid.value();
    d["index"] = g.info.index.value();
    d["count"] = count;
    d["devmem"] = g.info.memory_total_mib != 0 ? g.info.memory_total_mib : g.model->memory_mib;
    d["devcore"] = 100;
    d["type"] = "NVIDIA-" + g.info.name;
    d["numa"] = 0;
    d["mode"] = "mig";
    d["health"] = true;
    d["migProfiles"] = std::move(profiles);
    arr.push_back(std::move(d));
  }
  return arr;
}

std::string HandshakeValue(std::time_t now) {
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return std::string("Reported ") + buf;
}

bool PodIsActive(const nlohmann::json& pod) {
  const nlohmann::json* meta = pod.contains("metadata") ? &pod["metadata"] : nullptr;
  if (meta != nullptr && meta->contains("deletionTimestamp") &&
      !(*meta)["deletionTimestamp"].is_null()) {
    return false;
  }
  if (pod.contains("status") && pod["status"].is_object()) {
    const std::string phase = pod["status"].value("phase", "");
    if (phase == "Succeeded" || phase == "Failed") return false;
  }
  return true;
}

std::optional<std::string> Annotation(const nlohmann::json& object, const std::string& key) {
  if (!object.is_object() || !object.contains("metadata")) return std::nullopt;
  const nlohmann::json& meta = object["metadata"];
  if (!meta.is_object() || !meta.contains("annotations")) return std::nullopt;
  const nlohmann::json& ann = meta["annotations"];
  if (!ann.is_object() || !ann.contains(key) || !ann[key].is_string()) return std::nullopt;
  return ann[key].get<std::string>();
}

}  // namespace migd::k8s::hami
