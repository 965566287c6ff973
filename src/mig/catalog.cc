#include "mig/catalog.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "base/status_macros.h"

namespace migd::mig {

namespace internal_catalog {
// Defined in the source generated from data/mig-profiles.json (embed_file.cmake).
extern const unsigned char kMigProfilesJson[];
extern const std::size_t kMigProfilesJsonSize;
}  // namespace internal_catalog

namespace {

using Json = nlohmann::json;

constexpr uint32_t kSchemaVersion = 1;

struct VariantEntry {
  Variant variant;
  std::string_view name;
};
constexpr VariantEntry kVariants[] = {
    {Variant::kBase, "base"},  {Variant::kMe, "me"},   {Variant::kMeAll, "me.all"},
    {Variant::kNoMe, "no-me"}, {Variant::kGfx, "gfx"}, {Variant::kDoubleMemory, "double-memory"},
};

// Every error names the item at fault: `where` is e.g. "model 'h100-80gb'
// profile '1g.10gb'", so a typo in a 3000-line file can be found.
Status Error(const std::string& where, const std::string& what) {
  return InvalidArgumentError(where + ": " + what);
}

StatusOr<const Json*> GetField(const Json& obj, const std::string& field,
                               const std::string& where) {
  if (!obj.is_object()) return Error(where, "is not a JSON object");
  auto it = obj.find(field);
  if (it == obj.end()) return Error(where, "missing field '" + field + "'");
  return &*it;
}

StatusOr<uint64_t> GetUint64(const Json& obj, const std::string& field, const std::string& where) {
  MIGD_ASSIGN_OR_RETURN(const Json* v, GetField(obj, field, where));
  // nlohmann stores every non-negative integer literal as number_unsigned;
  // negative and fractional values land elsewhere and are rejected here.
  if (!v->is_number_unsigned()) {
    return Error(where, "field '" + field + "' must be a non-negative integer, got " + v->dump());
  }
  return v->get<uint64_t>();
}

StatusOr<uint32_t> GetUint32(const Json& obj, const std::string& field, const std::string& where) {
  MIGD_ASSIGN_OR_RETURN(uint64_t v, GetUint64(obj, field, where));
  if (v > std::numeric_limits<uint32_t>::max()) {
    return Error(where, "field '" + field + "' is out of range: " + std::to_string(v));
  }
  return static_cast<uint32_t>(v);
}

StatusOr<std::string> GetString(const Json& obj, const std::string& field,
                                const std::string& where) {
  MIGD_ASSIGN_OR_RETURN(const Json* v, GetField(obj, field, where));
  if (!v->is_string()) return Error(where, "field '" + field + "' must be a string");
  return v->get<std::string>();
}

StatusOr<bool> GetBool(const Json& obj, const std::string& field, const std::string& where) {
  MIGD_ASSIGN_OR_RETURN(const Json* v, GetField(obj, field, where));
  if (!v->is_boolean()) return Error(where, "field '" + field + "' must be true or false");
  return v->get<bool>();
}

StatusOr<const Json*> GetArray(const Json& obj, const std::string& field,
                               const std::string& where) {
  MIGD_ASSIGN_OR_RETURN(const Json* v, GetField(obj, field, where));
  if (!v->is_array()) return Error(where, "field '" + field + "' must be an array");
  return v;
}

StatusOr<std::vector<std::string>> GetStringArray(const Json& obj, const std::string& field,
                                                  const std::string& where) {
  MIGD_ASSIGN_OR_RETURN(const Json* arr, GetArray(obj, field, where));
  std::vector<std::string> out;
  for (const Json& v : *arr) {
    if (!v.is_string()) return Error(where, "field '" + field + "' must hold only strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

// "confidence": "confirmed" | "inferred".
StatusOr<bool> GetConfirmed(const Json& obj, const std::string& where) {
  MIGD_ASSIGN_OR_RETURN(std::string c, GetString(obj, "confidence", where));
  if (c == "confirmed") return true;
  if (c == "inferred") return false;
  return Error(where,
               "field 'confidence' must be \"confirmed\" or \"inferred\", got \"" + c + "\"");
}

StatusOr<Engines> ParseEngines(const Json& obj, const std::string& field,
                               const std::string& where) {
  MIGD_ASSIGN_OR_RETURN(const Json* e, GetField(obj, field, where));
  const std::string inner = where + " " + field;
  Engines out;
  MIGD_ASSIGN_OR_RETURN(out.copy_engines, GetUint32(*e, "copyEngines", inner));
  MIGD_ASSIGN_OR_RETURN(out.decoders, GetUint32(*e, "decoders", inner));
  MIGD_ASSIGN_OR_RETURN(out.encoders, GetUint32(*e, "encoders", inner));
  MIGD_ASSIGN_OR_RETURN(out.jpeg, GetUint32(*e, "jpeg", inner));
  MIGD_ASSIGN_OR_RETURN(out.ofa, GetUint32(*e, "ofa", inner));
  return out;
}

// Parses a placement list and checks it against an axis of `axis` units:
// every range inside [0, axis), one size for all, no repeats. Sorted by start.
StatusOr<std::vector<Placement>> ParsePlacements(const Json& obj, uint32_t axis,
                                                 const std::string& axis_name,
                                                 const std::string& where) {
  MIGD_ASSIGN_OR_RETURN(const Json* arr, GetArray(obj, "placements", where));
  std::vector<Placement> out;
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string inner = where + " placements[" + std::to_string(i) + "]";
    Placement p;
    MIGD_ASSIGN_OR_RETURN(p.start, GetUint32((*arr)[i], "start", inner));
    MIGD_ASSIGN_OR_RETURN(p.size, GetUint32((*arr)[i], "size", inner));
    if (p.size == 0) return Error(where, "placement " + p.ToString() + " has size 0");
    if (p.start >= axis || p.size > axis - p.start) {
      return Error(where, "placement " + p.ToString() + " is outside [0, " + std::to_string(axis) +
                              ") " + axis_name);
    }
    if (!out.empty() && p.size != out.front().size) {
      return Error(where, "placements of mixed sizes (" + out.front().ToString() + " and " +
                              p.ToString() + ")");
    }
    if (std::find(out.begin(), out.end(), p) != out.end()) {
      return Error(where, "placement " + p.ToString() + " is listed twice");
    }
    out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "0x20B710DE" -> 0x20B710DE.
StatusOr<uint32_t> ParsePciDeviceId(const std::string& text, const std::string& where) {
  uint32_t value = 0;
  const bool prefixed = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  if (prefixed && text.size() <= 10) {
    const char* first = text.data() + 2;
    const char* last = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(first, last, value, 16);
    if (ec == std::errc() && ptr == last) return value;
  }
  return Error(where, "pciDeviceIds entry '" + text + "' is not a hex id like 0x20B710DE");
}

StatusOr<CiProfile> ParseCiProfile(const Json& obj, const GiProfile& gi, size_t pos,
                                   const std::string& gi_where) {
  std::string where = gi_where + " ciProfiles[" + std::to_string(pos) + "]";
  CiProfile ci;
  MIGD_ASSIGN_OR_RETURN(uint32_t id, GetUint32(obj, "id", where));
  ci.id = CiProfileId(id);
  where = gi_where + " CI profile id " + std::to_string(id);
  MIGD_ASSIGN_OR_RETURN(uint32_t index, GetUint32(obj, "index", where));
  ci.index = CiProfileIndex(index);
  MIGD_ASSIGN_OR_RETURN(ci.slice_count, GetUint32(obj, "sliceCount", where));
  MIGD_ASSIGN_OR_RETURN(ci.instance_count, GetUint32(obj, "instanceCount", where));
  MIGD_ASSIGN_OR_RETURN(ci.is_default, GetBool(obj, "default", where));
  MIGD_ASSIGN_OR_RETURN(ci.confirmed, GetConfirmed(obj, where));
  if (ci.slice_count == 0) return Error(where, "sliceCount is 0");
  if (ci.slice_count > gi.slice_count) {
    return Error(where, "sliceCount " + std::to_string(ci.slice_count) +
                            " is larger than its GI's sliceCount " +
                            std::to_string(gi.slice_count));
  }
  MIGD_ASSIGN_OR_RETURN(ci.placements,
                        ParsePlacements(obj, gi.slice_count, "compute slices", where));
  return ci;
}

StatusOr<GiProfile> ParseGiProfile(const Json& obj, const GpuModel& model, size_t pos,
                                   const std::string& model_where) {
  std::string where = model_where + " giProfiles[" + std::to_string(pos) + "]";
  GiProfile p;
  MIGD_ASSIGN_OR_RETURN(p.name, GetString(obj, "name", where));
  if (p.name.empty()) return Error(where, "field 'name' is empty");
  where = model_where + " profile '" + p.name + "'";
  if (obj.contains("aliases")) {
    MIGD_ASSIGN_OR_RETURN(p.aliases, GetStringArray(obj, "aliases", where));
  }
  MIGD_ASSIGN_OR_RETURN(uint32_t index, GetUint32(obj, "index", where));
  p.index = GiProfileIndex(index);
  MIGD_ASSIGN_OR_RETURN(uint32_t id, GetUint32(obj, "id", where));
  p.id = GiProfileId(id);
  MIGD_ASSIGN_OR_RETURN(std::string variant, GetString(obj, "variant", where));
  StatusOr<Variant> v = ParseVariant(variant);
  if (!v.ok()) return Error(where, std::string(v.status().message()));
  p.variant = *v;
  MIGD_ASSIGN_OR_RETURN(p.slice_count, GetUint32(obj, "sliceCount", where));
  MIGD_ASSIGN_OR_RETURN(p.instance_count, GetUint32(obj, "instanceCount", where));
  MIGD_ASSIGN_OR_RETURN(p.memory_mib, GetUint64(obj, "memoryMiB", where));
  MIGD_ASSIGN_OR_RETURN(p.sm_count, GetUint32(obj, "smCount", where));
  MIGD_ASSIGN_OR_RETURN(p.engines, ParseEngines(obj, "engines", where));
  MIGD_ASSIGN_OR_RETURN(p.confirmed, GetConfirmed(obj, where));
  if (p.slice_count == 0 || p.slice_count > model.compute_slices) {
    return Error(where, "sliceCount " + std::to_string(p.slice_count) + " is outside [1, " +
                            std::to_string(model.compute_slices) + "]");
  }
  MIGD_ASSIGN_OR_RETURN(p.placements,
                        ParsePlacements(obj, model.memory_slices, "memory slices", where));

  MIGD_ASSIGN_OR_RETURN(const Json* cis, GetArray(obj, "ciProfiles", where));
  for (size_t i = 0; i < cis->size(); ++i) {
    MIGD_ASSIGN_OR_RETURN(CiProfile ci, ParseCiProfile((*cis)[i], p, i, where));
    for (const CiProfile& other : p.ci_profiles) {
      if (other.id == ci.id) {
        return Error(where, "duplicate CI profile id " + std::to_string(ci.id.value()));
      }
      if (other.index == ci.index) {
        return Error(where, "duplicate CI profile index " + std::to_string(ci.index.value()));
      }
      if (other.is_default && ci.is_default) return Error(where, "more than one default CI");
    }
    p.ci_profiles.push_back(std::move(ci));
  }
  return p;
}

StatusOr<GpuModel> ParseModel(const Json& obj, size_t pos) {
  std::string where = "models[" + std::to_string(pos) + "]";
  GpuModel m;
  MIGD_ASSIGN_OR_RETURN(m.key, GetString(obj, "key", where));
  if (m.key.empty()) return Error(where, "field 'key' is empty");
  where = "model '" + m.key + "'";
  MIGD_ASSIGN_OR_RETURN(m.names, GetStringArray(obj, "names", where));
  MIGD_ASSIGN_OR_RETURN(std::vector<std::string> pci, GetStringArray(obj, "pciDeviceIds", where));
  for (const std::string& text : pci) {
    MIGD_ASSIGN_OR_RETURN(uint32_t id, ParsePciDeviceId(text, where));
    m.pci_device_ids.push_back(id);
  }
  MIGD_ASSIGN_OR_RETURN(m.compute_slices, GetUint32(obj, "computeSlices", where));
  MIGD_ASSIGN_OR_RETURN(m.memory_slices, GetUint32(obj, "memorySlices", where));
  MIGD_ASSIGN_OR_RETURN(m.memory_mib, GetUint64(obj, "memoryMiB", where));
  MIGD_ASSIGN_OR_RETURN(m.sm_count, GetUint32(obj, "smCount", where));
  MIGD_ASSIGN_OR_RETURN(m.engine_totals, ParseEngines(obj, "engineTotals", where));
  if (m.compute_slices == 0) return Error(where, "computeSlices is 0");
  if (m.memory_slices == 0 || m.memory_slices > kMaxMemorySlices) {
    return Error(where, "memorySlices " + std::to_string(m.memory_slices) + " is outside [1, " +
                            std::to_string(kMaxMemorySlices) + "]");
  }

  MIGD_ASSIGN_OR_RETURN(const Json* ranges, GetField(obj, "giIdRangesBySize", where));
  if (!ranges->is_object()) return Error(where, "field 'giIdRangesBySize' must be an object");
  for (const auto& [size_text, range] : ranges->items()) {
    const std::string inner = where + " giIdRangesBySize[\"" + size_text + "\"]";
    uint32_t size = 0;
    auto [ptr, ec] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), size);
    if (ec != std::errc() || ptr != size_text.data() + size_text.size() || size == 0) {
      return Error(inner, "key is not a placement size");
    }
    if (!range.is_array() || range.size() != 2 || !range[0].is_number_unsigned() ||
        !range[1].is_number_unsigned() || range[0].get<uint64_t>() > range[1].get<uint64_t>() ||
        range[1].get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      return Error(inner, "must be [first, last] with first <= last, got " + range.dump());
    }
    m.gi_id_ranges[size] = {range[0].get<uint32_t>(), range[1].get<uint32_t>()};
  }

  MIGD_ASSIGN_OR_RETURN(const Json* profiles, GetArray(obj, "giProfiles", where));
  std::set<std::string> names;
  for (size_t i = 0; i < profiles->size(); ++i) {
    MIGD_ASSIGN_OR_RETURN(GiProfile p, ParseGiProfile((*profiles)[i], m, i, where));
    const std::string pwhere = where + " profile '" + p.name + "'";
    for (const GiProfile& other : m.gi_profiles) {
      if (other.id == p.id) {
        return Error(pwhere, "duplicate profile id " + std::to_string(p.id.value()) +
                                 " (also used by '" + other.name + "')");
      }
      if (other.index == p.index) {
        return Error(pwhere, "duplicate profile index " + std::to_string(p.index.value()) +
                                 " (also used by '" + other.name + "')");
      }
    }
    // FindProfileByName must be unambiguous.
    if (!names.insert(p.name).second) return Error(pwhere, "duplicate profile name");
    for (const std::string& alias : p.aliases) {
      if (!names.insert(alias).second) return Error(pwhere, "duplicate alias '" + alias + "'");
    }
    if (p.placement_size() != 0 && m.gi_id_ranges.count(p.placement_size()) == 0) {
      return Error(pwhere, "no giIdRangesBySize entry for placement size " +
                               std::to_string(p.placement_size()));
    }
    m.gi_profiles.push_back(std::move(p));
  }
  return m;
}

StatusOr<std::vector<GpuModel>> ParseDocument(const Json& doc) {
  const std::string where = "catalogue";
  MIGD_ASSIGN_OR_RETURN(uint64_t version, GetUint64(doc, "schemaVersion", where));
  if (version != kSchemaVersion) {
    return Error(where, "unsupported schemaVersion " + std::to_string(version) + " (want " +
                            std::to_string(kSchemaVersion) + ")");
  }
  MIGD_ASSIGN_OR_RETURN(const Json* models, GetArray(doc, "models", where));
  std::vector<GpuModel> out;
  for (size_t i = 0; i < models->size(); ++i) {
    MIGD_ASSIGN_OR_RETURN(GpuModel m, ParseModel((*models)[i], i));
    // The Find* lookups of Catalog must be unambiguous.
    for (const GpuModel& other : out) {
      const std::string mwhere = "model '" + m.key + "'";
      if (other.key == m.key) return Error(mwhere, "duplicate model key");
      for (uint32_t pci : m.pci_device_ids) {
        if (std::find(other.pci_device_ids.begin(), other.pci_device_ids.end(), pci) !=
            other.pci_device_ids.end()) {
          char hex[16];
          std::snprintf(hex, sizeof(hex), "0x%08X", pci);
          return Error(mwhere, std::string("PCI device id ") + hex + " also belongs to model '" +
                                   other.key + "'");
        }
      }
      for (const std::string& name : m.names) {
        if (std::find(other.names.begin(), other.names.end(), name) != other.names.end()) {
          return Error(mwhere,
                       "device name '" + name + "' also belongs to model '" + other.key + "'");
        }
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

std::string_view VariantName(Variant v) {
  for (const VariantEntry& e : kVariants) {
    if (e.variant == v) return e.name;
  }
  return "unknown";
}

StatusOr<Variant> ParseVariant(std::string_view name) {
  for (const VariantEntry& e : kVariants) {
    if (e.name == name) return e.variant;
  }
  return InvalidArgumentError("unknown profile variant '" + std::string(name) +
                              "' (want base, me, me.all, no-me, gfx or double-memory)");
}

Engines& Engines::operator+=(const Engines& o) {
  copy_engines += o.copy_engines;
  decoders += o.decoders;
  encoders += o.encoders;
  jpeg += o.jpeg;
  ofa += o.ofa;
  return *this;
}

Engines& Engines::operator-=(const Engines& o) {
  auto sub = [](uint32_t& a, uint32_t b) { a = a > b ? a - b : 0; };
  sub(copy_engines, o.copy_engines);
  sub(decoders, o.decoders);
  sub(encoders, o.encoders);
  sub(jpeg, o.jpeg);
  sub(ofa, o.ofa);
  return *this;
}

bool Engines::Covers(const Engines& need) const {
  return need.copy_engines <= copy_engines && need.decoders <= decoders &&
         need.encoders <= encoders && need.jpeg <= jpeg && need.ofa <= ofa;
}

bool GiProfile::HasPlacement(const Placement& p) const {
  return std::find(placements.begin(), placements.end(), p) != placements.end();
}

const CiProfile* GiProfile::DefaultCi() const {
  for (const CiProfile& ci : ci_profiles) {
    if (ci.is_default) return &ci;
  }
  return nullptr;
}

const CiProfile* GiProfile::FindCiByIndex(CiProfileIndex ci_index) const {
  for (const CiProfile& ci : ci_profiles) {
    if (ci.index == ci_index) return &ci;
  }
  return nullptr;
}

const GiProfile* GpuModel::FindProfileById(GiProfileId id) const {
  for (const GiProfile& p : gi_profiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

const GiProfile* GpuModel::FindProfileByIndex(GiProfileIndex profile_index) const {
  for (const GiProfile& p : gi_profiles) {
    if (p.index == profile_index) return &p;
  }
  return nullptr;
}

const GiProfile* GpuModel::FindProfileByName(std::string_view name) const {
  // NVML's profile names read "MIG 1g.10gb"; nvidia-smi prints "1g.10gb".
  constexpr std::string_view kPrefix = "MIG ";
  if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
  for (const GiProfile& p : gi_profiles) {
    if (p.name == name) return &p;
    for (const std::string& alias : p.aliases) {
      if (alias == name) return &p;
    }
  }
  return nullptr;
}

StatusOr<Catalog> Catalog::FromJson(std::string_view json) {
  // nlohmann::json throws; exceptions stop at this parse edge.
  try {
    const Json doc = Json::parse(json.begin(), json.end());
    MIGD_ASSIGN_OR_RETURN(std::vector<GpuModel> models, ParseDocument(doc));
    Catalog catalog;
    catalog.models_ = std::move(models);
    return catalog;
  } catch (const Json::exception& e) {
    return InvalidArgumentError(std::string("catalogue is not valid JSON: ") + e.what());
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("catalogue could not be read: ") + e.what());
  }
}

const Catalog& Catalog::Default() {
  // Never destroyed, so references stay valid during static destruction.
  static const Catalog* const catalog = [] {
    StatusOr<Catalog> parsed = FromJson(EmbeddedCatalogJson());
    if (!parsed.ok()) {
      std::fprintf(stderr, "migd: the embedded MIG catalogue is invalid: %s\n",
                   parsed.status().ToString().c_str());
      std::abort();
    }
    return new Catalog(std::move(parsed).value());
  }();
  return *catalog;
}

const GpuModel* Catalog::FindModel(std::string_view key) const {
  for (const GpuModel& m : models_) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

const GpuModel* Catalog::FindModelByPciDeviceId(uint32_t pci_device_id) const {
  for (const GpuModel& m : models_) {
    for (uint32_t id : m.pci_device_ids) {
      if (id == pci_device_id) return &m;
    }
  }
  return nullptr;
}

const GpuModel* Catalog::FindModelByName(std::string_view device_name) const {
  for (const GpuModel& m : models_) {
    for (const std::string& name : m.names) {
      if (name == device_name) return &m;
    }
  }
  return nullptr;
}

std::string_view EmbeddedCatalogJson() {
  return std::string_view(reinterpret_cast<const char*>(internal_catalog::kMigProfilesJson),
                          internal_catalog::kMigProfilesJsonSize);
}

}  // namespace migd::mig
