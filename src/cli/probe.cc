#include "cli/probe.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "base/status_macros.h"

namespace migd::cli {
namespace {

using nlohmann::json;

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08X", v);
  return buf;
}

std::string ModeName(driver::MigMode m) {
  return m == driver::MigMode::kEnabled ? "enabled" : "disabled";
}

json PlacementJson(const mig::Placement& p) { return json{{"start", p.start}, {"size", p.size}}; }

json StatusJson(const Status& s) {
  return json{{"code", std::string(StatusCodeName(s.code()))},
              {"message", std::string(s.message())}};
}

std::string ProfileName(const ProbeGpu& gpu, GiProfileId id) {
  for (const auto& p : gpu.profiles) {
    if (p.id == id) return p.name;
  }
  return "";
}

// A minimal left-aligned text table.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& os, const std::string& indent) const {
    std::vector<size_t> width;
    for (const auto& r : rows_) {
      if (width.size() < r.size()) width.resize(r.size(), 0);
      for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    }
    for (const auto& r : rows_) {
      std::string line = indent;
      for (size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
      }
      os << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace

StatusOr<ProbeReport> CollectProbe(driver::GpuDriver& driver, driver::NvmlDriver* nvml,
                                   bool hardware_check) {
  ProbeReport report;
  if (nvml != nullptr) {
    report.library_path = nvml->library().path();
    report.bindings = nvml->Bindings();
  }
  MIGD_ASSIGN_OR_RETURN(report.versions, driver.GetVersions());
  MIGD_ASSIGN_OR_RETURN(std::vector<driver::GpuInfo> gpus, driver.ListGpus());
  for (driver::GpuInfo& info : gpus) {
    ProbeGpu g;
    g.info = std::move(info);
    const bool mig_on = g.info.mig.supported && g.info.mig.current == driver::MigMode::kEnabled;
    if (mig_on) {
      StatusOr<std::vector<driver::GiProfileInfo>> profiles = driver.GetGiProfiles(g.info.index);
      if (profiles.ok()) {
        g.profiles = *std::move(profiles);
      } else {
        g.profiles_status = profiles.status();
      }
      StatusOr<std::vector<driver::GpuInstanceInfo>> gis = driver.ListGpuInstances(g.info.index);
      if (gis.ok()) {
        g.instances = *std::move(gis);
      } else {
        g.instances_status = gis.status();
      }
      if (hardware_check && nvml != nullptr) {
        StatusOr<driver::MigDeviceObservations> seen = nvml->ObserveMigDevices(g.info.index);
        if (seen.ok()) {
          g.mig_devices = *std::move(seen);
        } else {
          g.mig_devices_status = seen.status();
        }
      }
    } else {
      const std::string why =
          g.info.mig.supported
              ? "MIG mode is disabled (pending: " + ModeName(g.info.mig.pending) + ")"
              : "the GPU does not support MIG";
      g.instances_status = FailedPreconditionError(why);
      if (nvml != nullptr && g.info.mig.supported) {
        StatusOr<std::vector<driver::GiProfileInfo>> profiles =
            nvml->GetGiProfilesWithoutMig(g.info.index);
        if (profiles.ok()) {
          g.profiles = *std::move(profiles);
          g.profiles_without_mig = true;
        } else {
          g.profiles_status = profiles.status();
        }
      } else {
        g.profiles_status = FailedPreconditionError(why);
      }
    }
    report.gpus.push_back(std::move(g));
  }
  return report;
}

bool CompareReportWithCatalog(const mig::Catalog& catalog, ProbeReport* report) {
  bool identical = true;
  for (ProbeGpu& g : report->gpus) {
    CatalogComparison c = CompareWithCatalog(catalog, g.info, g.profiles);
    if (!g.profiles_status.ok()) {
      // Nothing reliable to compare: say so, and do not call it identical.
      c.differences.insert(c.differences.begin(),
                           "cannot compare: " + g.profiles_status.ToString());
    }
    identical = identical && c.identical();
    g.catalog = std::move(c);
  }
  return identical;
}

namespace {

json OptionalId(const std::optional<uint32_t>& v) { return v ? json(*v) : json(nullptr); }

// gpus[].hardware_check (docs/probe.md).
json MigDevicesJson(const driver::MigDeviceObservations& o) {
  json walk = json::array();
  for (const driver::MigIndexObservation& w : o.walk) {
    walk.push_back(json{{"index", w.index},
                        {"result", w.result},
                        {"gi_id", OptionalId(w.gi_id)},
                        {"ci_id", OptionalId(w.ci_id)},
                        {"mig_uuid", w.mig_uuid.empty() ? json(nullptr) : json(w.mig_uuid)}});
  }
  json cis = json::array();
  for (const driver::CiObservation& c : o.compute_instances) {
    cis.push_back(json{
        {"gi_id", c.gi_id},
        {"ci_id", c.ci_id},
        {"mig_uuid", c.mig_uuid.empty() ? json(nullptr) : json(c.mig_uuid)},
        {"walk_hits", c.walk_hits},
        {"ci_info_device_uuid", c.ci_info_device_uuid},
        {"ci_info_device_is_parent", c.ci_info_device_uuid == o.gpu_uuid},
        {"gi_info_device_uuid", c.gi_info_device_uuid},
        {"gi_info_device_is_parent", c.gi_info_device_uuid == o.gpu_uuid},
        {"handle_by_uuid", c.handle_by_uuid.empty() ? json(nullptr) : json(c.handle_by_uuid)},
        {"handle_by_uuid_matches", c.handle_by_uuid_matches},
        {"handle_by_legacy_uuid",
         c.handle_by_legacy_uuid.empty() ? json(nullptr) : json(c.handle_by_legacy_uuid)},
    });
  }
  return json{{"max_mig_device_count", o.max_mig_devices},
              {"walk", walk},
              {"second_walk_identical", o.second_walk_identical},
              {"parent_gpu_instance_id", o.parent_gpu_instance_id},
              {"parent_compute_instance_id", o.parent_compute_instance_id},
              {"compute_instances", cis}};
}

json ProfilesJson(const ProbeGpu& g) {
  json profiles = json::array();
  for (const driver::GiProfileInfo& p : g.profiles) {
    json placements = json::array();
    for (const mig::Placement& pl : p.placements) placements.push_back(PlacementJson(pl));
    profiles.push_back(json{
        {"name", p.name},
        {"index", p.index.value()},
        {"id", p.id.value()},
        {"slices", p.slice_count},
        {"instances", p.instance_count},
        {"memory_mib", p.memory_mib},
        {"sms", p.multiprocessor_count},
        {"engines", json{{"copy", p.copy_engines},
                         {"decoders", p.decoders},
                         {"encoders", p.encoders},
                         {"jpeg", p.jpeg},
                         {"ofa", p.ofa}}},
        {"p2p", p.p2p_supported},
        {"gfx", p.gfx_capable},
        {"info_version", p.info_version},
        {"placements", placements},
        {"placements_text", FormatPlacements(p.placements)},
    });
  }
  return profiles;
}

json InstancesJson(const ProbeGpu& g) {
  json instances = json::array();
  for (const driver::GpuInstanceInfo& gi : g.instances) {
    json cis = json::array();
    for (const driver::ComputeInstanceInfo& ci : gi.compute_instances) {
      cis.push_back(json{{"ci_id", ci.id.value()},
                         {"profile_id", ci.profile_id.value()},
                         {"placement", PlacementJson(ci.placement)},
                         {"mig_uuid", ci.mig_uuid.value()}});
    }
    instances.push_back(json{{"gi_id", gi.id.value()},
                             {"profile_id", gi.profile_id.value()},
                             {"profile_name", ProfileName(g, gi.profile_id)},
                             {"placement", PlacementJson(gi.placement)},
                             {"compute_instances", cis}});
  }
  return instances;
}

// The symbols that are not bound to their preferred variant.
void SymbolsTable(std::ostream& os, const ProbeReport& report) {
  if (!report.bindings.empty()) {
    // Only what deviates from the preferred symbol; `-o json` lists them all.
    Table t({"FUNCTION", "BOUND", "NOTE"});
    size_t preferred = 0;
    for (const driver::NvmlBinding& b : report.bindings) {
      if (b.bound == b.function) {
        ++preferred;
        continue;
      }
      t.Add({b.function, b.bound.empty() ? "-" : b.bound,
             b.bound.empty() ? (b.required ? "MISSING (required)" : "absent (optional)")
                             : "fallback"});
    }
    os << "NVML symbols:   " << preferred << " of " << report.bindings.size()
       << " functions bound to their preferred symbol";
    if (preferred == report.bindings.size()) {
      os << "\n";
    } else {
      os << "; the others:\n";
      t.Print(os, "  ");
    }
  }
}

void ProfilesTable(std::ostream& os, const ProbeGpu& g) {
  if (!g.profiles_status.ok()) {
    os << "  GI profiles: unavailable: " << g.profiles_status.ToString() << "\n";
  } else {
    os << "  GI profiles"
       << (g.profiles_without_mig ? " (MIG mode is off; as NVML reports them without MIG)" : "")
       << ":\n";
    Table t({"NAME", "INDEX", "ID", "SLICES", "INST", "MEM_MIB", "SMS", "CE/DEC/ENC/JPG/OFA", "VER",
             "PLACEMENTS"});
    for (const driver::GiProfileInfo& p : g.profiles) {
      char idx[8];
      std::snprintf(idx, sizeof(idx), "0x%X", p.index.value());
      t.Add({p.name.empty() ? "-" : p.name, idx, std::to_string(p.id.value()),
             std::to_string(p.slice_count), std::to_string(p.instance_count),
             std::to_string(p.memory_mib), std::to_string(p.multiprocessor_count),
             std::to_string(p.copy_engines) + "/" + std::to_string(p.decoders) + "/" +
                 std::to_string(p.encoders) + "/" + std::to_string(p.jpeg) + "/" +
                 std::to_string(p.ofa),
             "v" + std::to_string(p.info_version), FormatPlacements(p.placements)});
    }
    t.Print(os, "    ");
  }
}

void InstancesTable(std::ostream& os, const ProbeGpu& g) {
  if (!g.instances_status.ok()) {
    os << "  Instances: unavailable: " << g.instances_status.ToString() << "\n";
  } else if (g.instances.empty()) {
    os << "  Instances: none\n";
  } else {
    os << "  Instances:\n";
    Table t({"GI", "PROFILE", "PLACEMENT", "CI", "CI_PROFILE", "CI_PLACEMENT", "MIG_UUID"});
    for (const driver::GpuInstanceInfo& gi : g.instances) {
      std::string profile = std::to_string(gi.profile_id.value());
      const std::string name = ProfileName(g, gi.profile_id);
      if (!name.empty()) profile += " (" + name + ")";
      const std::string placement =
          std::to_string(gi.placement.start) + ":" + std::to_string(gi.placement.size);
      if (gi.compute_instances.empty()) {
        t.Add({std::to_string(gi.id.value()), profile, placement, "-", "-", "-",
               "(no compute instance)"});
      }
      for (const driver::ComputeInstanceInfo& ci : gi.compute_instances) {
        t.Add({std::to_string(gi.id.value()), profile, placement, std::to_string(ci.id.value()),
               std::to_string(ci.profile_id.value()),
               ci.placement.size == 0
                   ? "?"
                   : std::to_string(ci.placement.start) + ":" + std::to_string(ci.placement.size),
               ci.mig_uuid.value()});
      }
    }
    t.Print(os, "    ");
  }
}

void HardwareCheckTable(std::ostream& os, const ProbeGpu& g) {
  if (g.mig_devices) {
    const driver::MigDeviceObservations& o = *g.mig_devices;
    os << "  Hardware check: " << o.max_mig_devices << " MIG device indices, "
       << (o.second_walk_identical ? "a second walk saw the same"
                                   : "a second walk saw something else")
       << "; GetGpuInstanceId on the GPU: " << o.parent_gpu_instance_id << "\n";
    Table t({"INDEX", "RESULT", "GI", "CI", "MIG_UUID"});
    for (const driver::MigIndexObservation& w : o.walk) {
      t.Add({std::to_string(w.index), w.result, w.gi_id ? std::to_string(*w.gi_id) : "-",
             w.ci_id ? std::to_string(*w.ci_id) : "-", w.mig_uuid.empty() ? "-" : w.mig_uuid});
    }
    t.Print(os, "    ");
  } else if (!g.mig_devices_status.ok()) {
    os << "  Hardware check: unavailable: " << g.mig_devices_status.ToString() << "\n";
  }
}

void CatalogLines(std::ostream& os, const ProbeGpu& g) {
  if (g.catalog) {
    os << "  Catalogue: ";
    if (g.catalog->model_key.empty()) {
      os << "no matching model\n";
    } else {
      os << g.catalog->model_key << " (matched by " << g.catalog->matched_by << "): "
         << (g.catalog->identical()
                 ? std::string("identical")
                 : std::to_string(g.catalog->differences.size()) + " difference(s)")
         << "\n";
    }
    for (const std::string& d : g.catalog->differences) os << "    - " << d << "\n";
  }
}

}  // namespace

json ProbeToJson(const ProbeReport& report) {
  json doc;
  doc["schema_version"] = 1;
  doc["library"] = report.library_path;
  doc["driver_version"] = report.versions.driver;
  doc["nvml_version"] = report.versions.nvml;
  json symbols = json::array();
  for (const driver::NvmlBinding& b : report.bindings) {
    symbols.push_back(json{{"function", b.function},
                           {"bound", b.bound.empty() ? json(nullptr) : json(b.bound)},
                           {"required", b.required},
                           {"fallback", !b.bound.empty() && b.bound != b.function}});
  }
  doc["symbols"] = symbols;
  json gpus = json::array();
  for (const ProbeGpu& g : report.gpus) {
    json j;
    j["index"] = g.info.index.value();
    j["uuid"] = g.info.uuid.value();
    j["name"] = g.info.name;
    j["minor"] = g.info.minor;
    j["pci_bus_id"] = g.info.pci_bus_id;
    j["pci_device_id"] = Hex(g.info.pci_device_id);
    j["memory_total_mib"] = g.info.memory_total_mib;
    j["mig"] = json{{"supported", g.info.mig.supported},
                    {"current", ModeName(g.info.mig.current)},
                    {"pending", ModeName(g.info.mig.pending)}};
    j["profiles"] = ProfilesJson(g);
    j["profiles_without_mig"] = g.profiles_without_mig;
    j["profiles_error"] = g.profiles_status.ok() ? json(nullptr) : StatusJson(g.profiles_status);
    j["instances"] = InstancesJson(g);
    j["instances_error"] = g.instances_status.ok() ? json(nullptr) : StatusJson(g.instances_status);
    if (g.mig_devices) {
      j["hardware_check"] = MigDevicesJson(*g.mig_devices);
    } else if (!g.mig_devices_status.ok()) {
      j["hardware_check"] = json{{"error", StatusJson(g.mig_devices_status)}};
    }
    if (g.catalog) {
      j["catalog"] =
          json{{"model", g.catalog->model_key.empty() ? json(nullptr) : json(g.catalog->model_key)},
               {"matched_by", g.catalog->matched_by},
               {"identical", g.catalog->identical()},
               {"differences", g.catalog->differences}};
    }
    gpus.push_back(std::move(j));
  }
  doc["gpus"] = gpus;
  return doc;
}

std::string ProbeToTable(const ProbeReport& report) {
  std::ostringstream os;
  os << "NVML library:   " << (report.library_path.empty() ? "-" : report.library_path) << "\n";
  os << "Driver version: " << (report.versions.driver.empty() ? "-" : report.versions.driver)
     << "\n";
  os << "NVML version:   " << (report.versions.nvml.empty() ? "-" : report.versions.nvml) << "\n";
  SymbolsTable(os, report);
  if (report.gpus.empty()) os << "\nNo GPUs.\n";
  for (const ProbeGpu& g : report.gpus) {
    os << "\nGPU " << g.info.index.value() << "  " << g.info.uuid.value() << "  " << g.info.name
       << "\n";
    os << "  minor " << g.info.minor << "  pci " << g.info.pci_bus_id << " ("
       << Hex(g.info.pci_device_id) << ")  memory " << g.info.memory_total_mib << " MiB\n";
    if (g.info.mig.supported) {
      os << "  MIG mode: current " << ModeName(g.info.mig.current) << ", pending "
         << ModeName(g.info.mig.pending) << "\n";
    } else {
      os << "  MIG: not supported\n";
    }
    ProfilesTable(os, g);
    InstancesTable(os, g);
    HardwareCheckTable(os, g);
    CatalogLines(os, g);
  }
  return os.str();
}

int RunProbe(const ProbeOptions& options, std::ostream& out, std::ostream& err) {
  if (options.output != "table" && options.output != "json") {
    err << "migctl probe: unknown output format '" << options.output << "' (want table or json)\n";
    return kExitUsage;
  }
  StatusOr<std::unique_ptr<driver::NvmlDriver>> nvml =
      driver::NvmlDriver::Open(options.nvml_library);
  if (!nvml.ok()) {
    err << "migctl probe: NVML unavailable: " << nvml.status().message() << "\n";
    return kExitNvmlUnavailable;
  }
  StatusOr<ProbeReport> report = CollectProbe(**nvml, nvml->get(), options.hardware_check);
  if (!report.ok()) {
    err << "migctl probe: " << report.status().ToString() << "\n";
    return kExitNvmlUnavailable;
  }
  bool identical = true;
  if (options.compare_catalog) {
    identical = CompareReportWithCatalog(mig::Catalog::Default(), &*report);
  }
  if (options.output == "json") {
    out << ProbeToJson(*report).dump(2) << "\n";
  } else {
    out << ProbeToTable(*report);
  }
  return identical ? kExitOk : kExitCatalogMismatch;
}

}  // namespace migd::cli
