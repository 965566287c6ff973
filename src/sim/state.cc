#include "sim/state.h"

#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "base/status_macros.h"
#include "mig/layout.h"

namespace migd::sim {
namespace {

using Json = nlohmann::ordered_json;

// Thrown inside the parser only; converted to kDataLoss at its edge.
struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string HexNonce(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

Json PlacementJson(const mig::Placement& p) { return Json{{"start", p.start}, {"size", p.size}}; }

// A cursor over one JSON object: typed field access with the JSON path in
// every error, and a final check that no unknown field is present.
class Obj {
 public:
  Obj(const Json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) throw ParseError(path_ + ": expected an object");
  }

  const Json& Field(const char* key) {
    auto it = j_.find(key);
    if (it == j_.end()) throw ParseError(path_ + "." + key + ": missing");
    seen_.insert(key);
    return *it;
  }
  bool Has(const char* key) const { return j_.contains(key); }

  uint64_t U64(const char* key) {
    const Json& v = Field(key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      throw ParseError(path_ + "." + key + ": expected a non-negative integer");
    }
    return v.get<uint64_t>();
  }
  uint32_t U32(const char* key) {
    uint64_t v = U64(key);
    if (v > UINT32_MAX) throw ParseError(path_ + "." + key + ": out of range");
    return static_cast<uint32_t>(v);
  }
  std::string Str(const char* key) {
    const Json& v = Field(key);
    if (!v.is_string()) throw ParseError(path_ + "." + key + ": expected a string");
    return v.get<std::string>();
  }
  bool Bool(const char* key) {
    const Json& v = Field(key);
    if (!v.is_boolean()) throw ParseError(path_ + "." + key + ": expected true or false");
    return v.get<bool>();
  }
  const Json& Array(const char* key) {
    const Json& v = Field(key);
    if (!v.is_array()) throw ParseError(path_ + "." + key + ": expected an array");
    return v;
  }
  mig::Placement PlacementField(const char* key) {
    Obj o(Field(key), path_ + "." + key);
    mig::Placement p{o.U32("start"), o.U32("size")};
    o.Done();
    return p;
  }
  std::string Path(const char* key) const { return path_ + "." + key; }

  // REQUIRES: called after all fields were read.
  void Done() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!seen_.contains(it.key())) throw ParseError(path_ + "." + it.key() + ": unknown field");
    }
  }

 private:
  const Json& j_;
  std::string path_;
  std::set<std::string> seen_;
};

bool ParseMigModeName(const std::string& s, const std::string& path) {
  if (s == "enabled") return true;
  if (s == "disabled") return false;
  throw ParseError(path + ": expected \"enabled\" or \"disabled\"");
}

SimState ParseOrThrow(std::string_view text) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw ParseError(std::string("invalid JSON: ") + e.what());
  }
  Obj o(root, "$");
  SimState s;
  s.schema_version = static_cast<int>(o.U32("schemaVersion"));
  if (s.schema_version != kStateSchemaVersion) {
    throw ParseError("$.schemaVersion: unsupported version " + std::to_string(s.schema_version) +
                     " (this build reads " + std::to_string(kStateSchemaVersion) + ")");
  }
  s.driver_version = o.Str("driverVersion");
  s.nvml_version = o.Str("nvmlVersion");
  std::string policy = o.Str("giIdPolicy");
  if (policy == "deterministic") {
    s.gi_id_policy.mode = GiIdMode::kDeterministic;
  } else if (policy == "shuffle") {
    s.gi_id_policy.mode = GiIdMode::kShuffle;
  } else {
    throw ParseError("$.giIdPolicy: expected \"deterministic\" or \"shuffle\"");
  }
  s.gi_id_policy.seed = o.U64("giIdSeed");
  std::string nonce = o.Str("nonce");
  if (nonce.empty() || nonce.size() > 16 ||
      nonce.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw ParseError("$.nonce: expected 1 to 16 lower-case hex digits");
  }
  s.nonce = std::stoull(nonce, nullptr, 16);
  s.serial = o.U64("serial");
  s.boot_count = o.U64("bootCount");
  s.proc_root = o.Str("procRoot");

  const Json& gpus = o.Array("gpus");
  for (size_t g = 0; g < gpus.size(); ++g) {
    Obj go(gpus[g], "$.gpus[" + std::to_string(g) + "]");
    SimGpu gpu;
    gpu.index = GpuIndex(go.U32("index"));
    gpu.model_key = go.Str("model");
    gpu.uuid = GpuUuid(go.Str("uuid"));
    gpu.minor = go.U32("minor");
    gpu.pci_bus_id = go.Str("pciBusId");
    {
      Obj mo(go.Field("migMode"), go.Path("migMode"));
      gpu.mig_current = ParseMigModeName(mo.Str("current"), mo.Path("current"));
      gpu.mig_pending = ParseMigModeName(mo.Str("pending"), mo.Path("pending"));
      mo.Done();
    }
    gpu.permission = go.Bool("permission");
    const Json& gis = go.Array("gpuInstances");
    for (size_t i = 0; i < gis.size(); ++i) {
      Obj io(gis[i], go.Path("gpuInstances") + "[" + std::to_string(i) + "]");
      SimGi gi;
      gi.id = NvmlGiId(io.U32("id"));
      gi.profile_id = GiProfileId(io.U32("profileId"));
      gi.placement = io.PlacementField("placement");
      gi.serial = io.U64("serial");
      const Json& cis = io.Array("computeInstances");
      for (size_t c = 0; c < cis.size(); ++c) {
        Obj co(cis[c], io.Path("computeInstances") + "[" + std::to_string(c) + "]");
        SimCi ci;
        ci.id = NvmlCiId(co.U32("id"));
        ci.profile_id = CiProfileId(co.U32("profileId"));
        ci.placement = co.PlacementField("placement");
        ci.serial = co.U64("serial");
        ci.uuid = MigUuid(co.Str("uuid"));
        const Json& procs = co.Array("processes");
        for (size_t p = 0; p < procs.size(); ++p) {
          Obj po(procs[p], co.Path("processes") + "[" + std::to_string(p) + "]");
          SimProcess proc;
          proc.pid = po.U32("pid");
          proc.used_gpu_memory = po.U64("usedGpuMemory");
          po.Done();
          ci.processes.push_back(proc);
        }
        co.Done();
        gi.compute_instances.push_back(std::move(ci));
      }
      io.Done();
      gpu.gpu_instances.push_back(std::move(gi));
    }
    go.Done();
    s.gpus.push_back(std::move(gpu));
  }

  const Json& counters = o.Field("counters");
  if (!counters.is_object()) throw ParseError("$.counters: expected an object");
  for (auto it = counters.begin(); it != counters.end(); ++it) {
    Obj per_fn(it.value(), "$.counters." + it.key());
    for (auto r = it.value().begin(); r != it.value().end(); ++r) {
      s.counters[it.key()][r.key()] = per_fn.U64(r.key().c_str());
    }
    per_fn.Done();
  }
  o.Done();
  return s;
}

std::string Where(const SimGpu& gpu) { return "$.gpus[" + std::to_string(gpu.index.value()) + "]"; }

}  // namespace

std::string SerializeState(const SimState& s) {
  Json root;
  root["schemaVersion"] = s.schema_version;
  root["driverVersion"] = s.driver_version;
  root["nvmlVersion"] = s.nvml_version;
  root["giIdPolicy"] = s.gi_id_policy.mode == GiIdMode::kShuffle ? "shuffle" : "deterministic";
  root["giIdSeed"] = s.gi_id_policy.seed;
  root["nonce"] = HexNonce(s.nonce);
  root["serial"] = s.serial;
  root["bootCount"] = s.boot_count;
  root["procRoot"] = s.proc_root;
  Json gpus = Json::array();
  for (const SimGpu& gpu : s.gpus) {
    Json g;
    g["index"] = gpu.index.value();
    g["model"] = gpu.model_key;
    g["uuid"] = gpu.uuid.value();
    g["minor"] = gpu.minor;
    g["pciBusId"] = gpu.pci_bus_id;
    g["migMode"] = Json{{"current", gpu.mig_current ? "enabled" : "disabled"},
                        {"pending", gpu.mig_pending ? "enabled" : "disabled"}};
    g["permission"] = gpu.permission;
    Json gis = Json::array();
    for (const SimGi& gi : gpu.gpu_instances) {
      Json ij;
      ij["id"] = gi.id.value();
      ij["profileId"] = gi.profile_id.value();
      ij["placement"] = PlacementJson(gi.placement);
      ij["serial"] = gi.serial;
      Json cis = Json::array();
      for (const SimCi& ci : gi.compute_instances) {
        Json cj;
        cj["id"] = ci.id.value();
        cj["profileId"] = ci.profile_id.value();
        cj["placement"] = PlacementJson(ci.placement);
        cj["serial"] = ci.serial;
        cj["uuid"] = ci.uuid.value();
        Json procs = Json::array();
        for (const SimProcess& p : ci.processes) {
          procs.push_back(Json{{"pid", p.pid}, {"usedGpuMemory", p.used_gpu_memory}});
        }
        cj["processes"] = std::move(procs);
        cis.push_back(std::move(cj));
      }
      ij["computeInstances"] = std::move(cis);
      gis.push_back(std::move(ij));
    }
    g["gpuInstances"] = std::move(gis);
    gpus.push_back(std::move(g));
  }
  root["gpus"] = std::move(gpus);
  Json counters = Json::object();
  for (const auto& [fn, results] : s.counters) {
    Json r = Json::object();
    for (const auto& [name, count] : results) r[name] = count;
    counters[fn] = std::move(r);
  }
  root["counters"] = std::move(counters);
  return root.dump(2) + "\n";
}

Status ValidateState(const SimState& s, const mig::Catalog& catalog) {
  if (s.schema_version != kStateSchemaVersion) {
    return DataLossError("$.schemaVersion: unsupported version " +
                         std::to_string(s.schema_version));
  }
  std::set<std::string> uuids;
  std::set<uint32_t> minors;
  for (size_t g = 0; g < s.gpus.size(); ++g) {
    const SimGpu& gpu = s.gpus[g];
    const std::string where = "$.gpus[" + std::to_string(g) + "]";
    if (gpu.index.value() != g)
      return DataLossError(where + ".index: expected " + std::to_string(g));
    const mig::GpuModel* model = catalog.FindModel(gpu.model_key);
    if (model == nullptr)
      return DataLossError(where + ".model: unknown model '" + gpu.model_key + "'");
    if (!IsValidGpuUuid(gpu.uuid.value())) return DataLossError(where + ".uuid: not a GPU UUID");
    if (!uuids.insert(gpu.uuid.value()).second) return DataLossError(where + ".uuid: duplicate");
    if (!minors.insert(gpu.minor).second) return DataLossError(where + ".minor: duplicate");
    if (gpu.minor > 31) return DataLossError(where + ".minor: must be 0..31");
    if (!gpu.mig_current && !gpu.gpu_instances.empty()) {
      return DataLossError(where + ": GPU instances exist while MIG mode is disabled");
    }
    mig::Layout layout(*model);
    std::set<uint32_t> gi_ids;
    for (size_t i = 0; i < gpu.gpu_instances.size(); ++i) {
      const SimGi& gi = gpu.gpu_instances[i];
      const std::string gw = Where(gpu) + ".gpuInstances[" + std::to_string(i) + "]";
      const mig::GiProfile* profile = model->FindProfileById(gi.profile_id);
      if (profile == nullptr) {
        return DataLossError(gw + ".profileId: no profile " +
                             std::to_string(gi.profile_id.value()) + " on " + model->key);
      }
      if (gi.id.value() >= kMaxGiIds || !gi_ids.insert(gi.id.value()).second) {
        return DataLossError(gw + ".id: duplicate or out of range 0..14");
      }
      if (i > 0 && gpu.gpu_instances[i - 1].id >= gi.id) {
        return DataLossError(gw + ".id: GPU instances must be sorted by id");
      }
      if (gi.serial == 0 || gi.serial > s.serial) {
        return DataLossError(gw + ".serial: must be in 1..$.serial");
      }
      if (Status st = layout.Add(*profile, gi.placement); !st.ok()) {
        return DataLossError(gw + ": illegal layout: " + std::string(st.message()));
      }
      uint32_t used_slices = 0;
      std::set<uint32_t> ci_ids;
      for (size_t c = 0; c < gi.compute_instances.size(); ++c) {
        const SimCi& ci = gi.compute_instances[c];
        const std::string cw = gw + ".computeInstances[" + std::to_string(c) + "]";
        const mig::CiProfile* cp = nullptr;
        for (const mig::CiProfile& candidate : profile->ci_profiles) {
          if (candidate.id == ci.profile_id) cp = &candidate;
        }
        if (cp == nullptr) return DataLossError(cw + ".profileId: not a CI profile of this GI");
        bool listed = false;
        for (const mig::Placement& p : cp->placements) listed = listed || p == ci.placement;
        if (!listed) return DataLossError(cw + ".placement: not listed for the CI profile");
        const uint32_t mask = ci.placement.Mask();
        if ((used_slices & mask) != 0) return DataLossError(cw + ".placement: overlaps another CI");
        used_slices |= mask;
        if (ci.id.value() >= kMaxCiIds || !ci_ids.insert(ci.id.value()).second) {
          return DataLossError(cw + ".id: duplicate or out of range 0..7");
        }
        if (c > 0 && gi.compute_instances[c - 1].id >= ci.id) {
          return DataLossError(cw + ".id: compute instances must be sorted by id");
        }
        if (ci.serial == 0 || ci.serial > s.serial) {
          return DataLossError(cw + ".serial: must be in 1..$.serial");
        }
        if (!IsValidMigUuid(ci.uuid.value()) || !uuids.insert(ci.uuid.value()).second) {
          return DataLossError(cw + ".uuid: not a MIG UUID, or a duplicate");
        }
        std::set<uint32_t> pids;
        for (const SimProcess& p : ci.processes) {
          if (!pids.insert(p.pid).second) {
            return DataLossError(cw + ".processes: duplicate pid " + std::to_string(p.pid));
          }
        }
      }
      // Per-CI-profile instance caps.
      for (const mig::CiProfile& cp : profile->ci_profiles) {
        uint32_t n = 0;
        for (const SimCi& ci : gi.compute_instances) n += ci.profile_id == cp.id ? 1 : 0;
        if (n > cp.instance_count) {
          return DataLossError(gw + ": more CIs of profile " + std::to_string(cp.id.value()) +
                               " than its instanceCount");
        }
      }
    }
  }
  return OkStatus();
}

StatusOr<SimState> ParseState(std::string_view json, const mig::Catalog& catalog) {
  SimState s;
  try {
    s = ParseOrThrow(json);
  } catch (const ParseError& e) {
    return DataLossError(e.what());
  } catch (const std::exception& e) {
    return DataLossError(std::string("invalid state: ") + e.what());
  }
  MIGD_RETURN_IF_ERROR(ValidateState(s, catalog));
  return s;
}

}  // namespace migd::sim
