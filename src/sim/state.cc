#include "sim/state.h"

#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/json_reader.h"
#include "base/status_macros.h"
#include "mig/layout.h"

namespace migd::sim {
namespace {

using Json = nlohmann::ordered_json;

std::string HexNonce(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

Json PlacementJson(const mig::Placement& p) { return Json{{"start", p.start}, {"size", p.size}}; }

StatusOr<mig::Placement> ReadPlacement(const JsonReader& parent, std::string_view key) {
  MIGD_ASSIGN_OR_RETURN(JsonReader r, parent.Object(key));
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys({"start", "size"}));
  MIGD_ASSIGN_OR_RETURN(uint32_t start, r.Uint32("start"));
  MIGD_ASSIGN_OR_RETURN(uint32_t size, r.Uint32("size"));
  return mig::Placement{start, size};
}

StatusOr<SimCi> ReadCi(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  MIGD_RETURN_IF_ERROR(
      r.NoUnknownKeys({"id", "profileId", "placement", "serial", "uuid", "processes"}));
  SimCi ci;
  MIGD_ASSIGN_OR_RETURN(uint32_t id, r.Uint32("id"));
  MIGD_ASSIGN_OR_RETURN(uint32_t profile, r.Uint32("profileId"));
  ci.id = NvmlCiId(id);
  ci.profile_id = CiProfileId(profile);
  MIGD_ASSIGN_OR_RETURN(ci.placement, ReadPlacement(r, "placement"));
  MIGD_ASSIGN_OR_RETURN(ci.serial, r.Uint("serial"));
  MIGD_ASSIGN_OR_RETURN(std::string uuid, r.String("uuid"));
  ci.uuid = MigUuid(uuid);
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> procs, r.Array("processes"));
  for (const JsonReader& p : procs) {
    MIGD_RETURN_IF_ERROR(p.ExpectObject());
    MIGD_RETURN_IF_ERROR(p.NoUnknownKeys({"pid", "usedGpuMemory"}));
    SimProcess proc;
    MIGD_ASSIGN_OR_RETURN(proc.pid, p.Uint32("pid"));
    MIGD_ASSIGN_OR_RETURN(proc.used_gpu_memory, p.Uint("usedGpuMemory"));
    ci.processes.push_back(proc);
  }
  return ci;
}

StatusOr<SimGi> ReadGi(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  MIGD_RETURN_IF_ERROR(
      r.NoUnknownKeys({"id", "profileId", "placement", "serial", "computeInstances"}));
  SimGi gi;
  MIGD_ASSIGN_OR_RETURN(uint32_t id, r.Uint32("id"));
  MIGD_ASSIGN_OR_RETURN(uint32_t profile, r.Uint32("profileId"));
  gi.id = NvmlGiId(id);
  gi.profile_id = GiProfileId(profile);
  MIGD_ASSIGN_OR_RETURN(gi.placement, ReadPlacement(r, "placement"));
  MIGD_ASSIGN_OR_RETURN(gi.serial, r.Uint("serial"));
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> cis, r.Array("computeInstances"));
  for (const JsonReader& c : cis) {
    MIGD_ASSIGN_OR_RETURN(SimCi ci, ReadCi(c));
    gi.compute_instances.push_back(std::move(ci));
  }
  return gi;
}

StatusOr<SimGpu> ReadGpu(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  MIGD_RETURN_IF_ERROR(r.NoUnknownKeys(
      {"index", "model", "uuid", "minor", "pciBusId", "migMode", "permission", "lost",
       "gpuInstances"}));
  SimGpu gpu;
  MIGD_ASSIGN_OR_RETURN(uint32_t index, r.Uint32("index"));
  gpu.index = GpuIndex(index);
  MIGD_ASSIGN_OR_RETURN(gpu.model_key, r.String("model"));
  MIGD_ASSIGN_OR_RETURN(std::string uuid, r.String("uuid"));
  gpu.uuid = GpuUuid(uuid);
  MIGD_ASSIGN_OR_RETURN(gpu.minor, r.Uint32("minor"));
  MIGD_ASSIGN_OR_RETURN(gpu.pci_bus_id, r.String("pciBusId"));
  MIGD_ASSIGN_OR_RETURN(JsonReader mode, r.Object("migMode"));
  MIGD_RETURN_IF_ERROR(mode.NoUnknownKeys({"current", "pending"}));
  MIGD_ASSIGN_OR_RETURN(size_t current, mode.Enum("current", {"disabled", "enabled"}));
  MIGD_ASSIGN_OR_RETURN(size_t pending, mode.Enum("pending", {"disabled", "enabled"}));
  gpu.mig_current = current == 1;
  gpu.mig_pending = pending == 1;
  MIGD_ASSIGN_OR_RETURN(gpu.permission, r.Bool("permission"));
  MIGD_ASSIGN_OR_RETURN(gpu.lost, r.OptionalBool("lost", false));
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> gis, r.Array("gpuInstances"));
  for (const JsonReader& g : gis) {
    MIGD_ASSIGN_OR_RETURN(SimGi gi, ReadGi(g));
    gpu.gpu_instances.push_back(std::move(gi));
  }
  return gpu;
}

StatusOr<CallCounters> ReadCounters(const JsonReader& root) {
  MIGD_ASSIGN_OR_RETURN(JsonReader counters, root.Object("counters"));
  CallCounters out;
  for (auto it = counters.value().begin(); it != counters.value().end(); ++it) {
    const JsonReader per_fn = counters.Child(it.key());
    MIGD_RETURN_IF_ERROR(per_fn.ExpectObject());
    for (auto r = it.value().begin(); r != it.value().end(); ++r) {
      MIGD_ASSIGN_OR_RETURN(out[it.key()][r.key()], per_fn.Uint(r.key()));
    }
  }
  return out;
}

StatusOr<std::vector<SimEvent>> ReadEvents(const JsonReader& root) {
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> events, root.OptionalArray("events"));
  std::vector<SimEvent> out;
  for (const JsonReader& r : events) {
    MIGD_RETURN_IF_ERROR(r.ExpectObject());
    MIGD_RETURN_IF_ERROR(r.NoUnknownKeys({"seq", "gpu", "type", "data", "gi", "ci"}));
    SimEvent e;
    MIGD_ASSIGN_OR_RETURN(e.seq, r.Uint("seq"));
    MIGD_ASSIGN_OR_RETURN(e.gpu, r.Uint32("gpu"));
    MIGD_ASSIGN_OR_RETURN(e.type, r.Uint("type"));
    MIGD_ASSIGN_OR_RETURN(e.data, r.Uint("data"));
    MIGD_ASSIGN_OR_RETURN(e.gi, r.Uint32("gi"));
    MIGD_ASSIGN_OR_RETURN(e.ci, r.Uint32("ci"));
    out.push_back(e);
  }
  return out;
}

StatusOr<SimState> ReadState(const JsonReader& r) {
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  MIGD_RETURN_IF_ERROR(
      r.NoUnknownKeys({"schemaVersion", "driverVersion", "nvmlVersion", "giIdPolicy", "giIdSeed",
                       "nonce", "serial", "bootCount", "procRoot", "gpus", "eventSeq", "events",
                       "counters"}));
  SimState s;
  MIGD_ASSIGN_OR_RETURN(int64_t version, r.Int("schemaVersion"));
  if (version != kStateSchemaVersion) {
    return r.ExpectedAt("schemaVersion", "schema version " + std::to_string(kStateSchemaVersion) +
                                             " (the one this build reads)");
  }
  s.schema_version = static_cast<int>(version);
  MIGD_ASSIGN_OR_RETURN(s.driver_version, r.String("driverVersion"));
  MIGD_ASSIGN_OR_RETURN(s.nvml_version, r.String("nvmlVersion"));
  MIGD_ASSIGN_OR_RETURN(size_t policy, r.Enum("giIdPolicy", {"deterministic", "shuffle"}));
  s.gi_id_policy.mode = policy == 1 ? GiIdMode::kShuffle : GiIdMode::kDeterministic;
  MIGD_ASSIGN_OR_RETURN(s.gi_id_policy.seed, r.Uint("giIdSeed"));
  MIGD_ASSIGN_OR_RETURN(std::string nonce, r.String("nonce"));
  if (nonce.empty() || nonce.size() > 16 ||
      nonce.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return r.ExpectedAt("nonce", "1 to 16 lower-case hex digits");
  }
  s.nonce = std::stoull(nonce, nullptr, 16);
  MIGD_ASSIGN_OR_RETURN(s.serial, r.Uint("serial"));
  MIGD_ASSIGN_OR_RETURN(s.boot_count, r.Uint("bootCount"));
  MIGD_ASSIGN_OR_RETURN(s.proc_root, r.String("procRoot"));
  MIGD_ASSIGN_OR_RETURN(std::vector<JsonReader> gpus, r.Array("gpus"));
  for (const JsonReader& g : gpus) {
    MIGD_ASSIGN_OR_RETURN(SimGpu gpu, ReadGpu(g));
    s.gpus.push_back(std::move(gpu));
  }
  MIGD_ASSIGN_OR_RETURN(s.event_seq, r.OptionalUint("eventSeq", 0));
  MIGD_ASSIGN_OR_RETURN(s.events, ReadEvents(r));
  MIGD_ASSIGN_OR_RETURN(s.counters, ReadCounters(r));
  return s;
}

// The JSON pointer of a GPU in the state document (for ValidateState).
std::string Where(const SimGpu& gpu) { return "/gpus/" + std::to_string(gpu.index.value()); }

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
    if (gpu.lost) g["lost"] = true;
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
  if (s.event_seq > 0) {
    root["eventSeq"] = s.event_seq;
    Json events = Json::array();
    for (const SimEvent& e : s.events) {
      events.push_back(Json{{"seq", e.seq}, {"gpu", e.gpu}, {"type", e.type}, {"data", e.data},
                            {"gi", e.gi}, {"ci", e.ci}});
    }
    root["events"] = std::move(events);
  }
  Json counters = Json::object();
  for (const auto& [fn, results] : s.counters) {
    Json r = Json::object();
    for (const auto& [name, count] : results) r[name] = count;
    counters[fn] = std::move(r);
  }
  root["counters"] = std::move(counters);
  return root.dump(2) + "\n";
}

namespace {

// The CIs of one GI (pointer `gw`): listed, disjoint placements of CI
// profiles the GI offers, ids and serials in range, unique MIG UUIDs (with
// `uuids`), unique pids, per-profile caps.
Status ValidateCis(const SimState& s, const SimGi& gi, const mig::GiProfile& profile,
                   const std::string& gw, std::set<std::string>& uuids) {
  uint32_t used_slices = 0;
  std::set<uint32_t> ci_ids;
  for (size_t c = 0; c < gi.compute_instances.size(); ++c) {
    const SimCi& ci = gi.compute_instances[c];
    const std::string cw = gw + "/computeInstances/" + std::to_string(c);
    const mig::CiProfile* cp = nullptr;
    for (const mig::CiProfile& candidate : profile.ci_profiles) {
      if (candidate.id == ci.profile_id) cp = &candidate;
    }
    if (cp == nullptr) return DataLossError(cw + "/profileId: not a CI profile of this GI");
    bool listed = false;
    for (const mig::Placement& p : cp->placements) listed = listed || p == ci.placement;
    if (!listed) return DataLossError(cw + "/placement: not listed for the CI profile");
    const uint32_t mask = ci.placement.Mask();
    if ((used_slices & mask) != 0) return DataLossError(cw + "/placement: overlaps another CI");
    used_slices |= mask;
    if (ci.id.value() >= kMaxCiIds || !ci_ids.insert(ci.id.value()).second) {
      return DataLossError(cw + "/id: duplicate or out of range 0..7");
    }
    if (c > 0 && gi.compute_instances[c - 1].id >= ci.id) {
      return DataLossError(cw + "/id: compute instances must be sorted by id");
    }
    if (ci.serial == 0 || ci.serial > s.serial) {
      return DataLossError(cw + "/serial: must be in 1../serial");
    }
    if (!IsValidMigUuid(ci.uuid.value()) || !uuids.insert(ci.uuid.value()).second) {
      return DataLossError(cw + "/uuid: not a MIG UUID, or a duplicate");
    }
    std::set<uint32_t> pids;
    for (const SimProcess& p : ci.processes) {
      if (!pids.insert(p.pid).second) {
        return DataLossError(cw + "/processes: duplicate pid " + std::to_string(p.pid));
      }
    }
  }
  for (const mig::CiProfile& cp : profile.ci_profiles) {
    uint32_t n = 0;
    for (const SimCi& ci : gi.compute_instances) n += ci.profile_id == cp.id ? 1 : 0;
    if (n > cp.instance_count) {
      return DataLossError(gw + ": more CIs of profile " + std::to_string(cp.id.value()) +
                           " than its instanceCount");
    }
  }
  return OkStatus();
}

// The GIs of one GPU: known profiles, a legal layout, ids and serials.
Status ValidateGis(const SimState& s, const SimGpu& gpu, const mig::GpuModel& model,
                   std::set<std::string>& uuids) {
  mig::Layout layout(model);
  std::set<uint32_t> gi_ids;
  for (size_t i = 0; i < gpu.gpu_instances.size(); ++i) {
    const SimGi& gi = gpu.gpu_instances[i];
    const std::string gw = Where(gpu) + "/gpuInstances/" + std::to_string(i);
    const mig::GiProfile* profile = model.FindProfileById(gi.profile_id);
    if (profile == nullptr) {
      return DataLossError(gw + "/profileId: no profile " + std::to_string(gi.profile_id.value()) +
                           " on " + model.key);
    }
    if (gi.id.value() >= kMaxGiIds || !gi_ids.insert(gi.id.value()).second) {
      return DataLossError(gw + "/id: duplicate or out of range 0..14");
    }
    if (i > 0 && gpu.gpu_instances[i - 1].id >= gi.id) {
      return DataLossError(gw + "/id: GPU instances must be sorted by id");
    }
    if (gi.serial == 0 || gi.serial > s.serial) {
      return DataLossError(gw + "/serial: must be in 1../serial");
    }
    if (Status st = layout.Add(*profile, gi.placement); !st.ok()) {
      return DataLossError(gw + ": illegal layout: " + std::string(st.message()));
    }
    MIGD_RETURN_IF_ERROR(ValidateCis(s, gi, *profile, gw, uuids));
  }
  return OkStatus();
}

// The event log: at most kMaxEvents entries, seqs increasing up to
// eventSeq, each on a GPU of the state.
Status ValidateEvents(const SimState& s) {
  if (s.events.size() > kMaxEvents) {
    return DataLossError("/events: more than " + std::to_string(kMaxEvents) + " entries");
  }
  uint64_t last = 0;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const SimEvent& e = s.events[i];
    const std::string where = "/events/" + std::to_string(i);
    if (e.seq <= last || e.seq > s.event_seq) {
      return DataLossError(where + "/seq: must increase and be at most /eventSeq");
    }
    if (e.gpu >= s.gpus.size()) return DataLossError(where + "/gpu: no such GPU");
    if (e.type == 0 || (e.type & (e.type - 1)) != 0) {
      return DataLossError(where + "/type: must be one event type bit");
    }
    last = e.seq;
  }
  return OkStatus();
}

}  // namespace

Status ValidateState(const SimState& s, const mig::Catalog& catalog) {
  if (s.schema_version != kStateSchemaVersion) {
    return DataLossError("/schemaVersion: unsupported version " + std::to_string(s.schema_version));
  }
  std::set<std::string> uuids;
  std::set<uint32_t> minors;
  for (size_t g = 0; g < s.gpus.size(); ++g) {
    const SimGpu& gpu = s.gpus[g];
    const std::string where = "/gpus/" + std::to_string(g);
    if (gpu.index.value() != g) {
      return DataLossError(where + "/index: expected " + std::to_string(g));
    }
    const mig::GpuModel* model = catalog.FindModel(gpu.model_key);
    if (model == nullptr) {
      return DataLossError(where + "/model: unknown model '" + gpu.model_key + "'");
    }
    if (!IsValidGpuUuid(gpu.uuid.value())) return DataLossError(where + "/uuid: not a GPU UUID");
    if (!uuids.insert(gpu.uuid.value()).second) return DataLossError(where + "/uuid: duplicate");
    if (!minors.insert(gpu.minor).second) return DataLossError(where + "/minor: duplicate");
    if (gpu.minor > 31) return DataLossError(where + "/minor: must be 0..31");
    if (!gpu.mig_current && !gpu.gpu_instances.empty()) {
      return DataLossError(where + ": GPU instances exist while MIG mode is disabled");
    }
    MIGD_RETURN_IF_ERROR(ValidateGis(s, gpu, *model, uuids));
  }
  return ValidateEvents(s);
}

StatusOr<SimState> ParseState(std::string_view json, const mig::Catalog& catalog,
                              std::string_view source) {
  MIGD_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json, source, StatusCode::kDataLoss));
  MIGD_ASSIGN_OR_RETURN(SimState s,
                        ReadState(JsonReader(doc, std::string(source), StatusCode::kDataLoss)));
  MIGD_RETURN_IF_ERROR(ValidateState(s, catalog).WithContext(source));
  return s;
}

}  // namespace migd::sim
