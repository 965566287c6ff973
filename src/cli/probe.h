// File: cli/probe.h
//
// `migctl probe`: a READ-ONLY inventory of what NVML reports on this node,
// safe on any real GPU. It calls only ListGpus, GetVersions, GetGiProfiles,
// ListGpuInstances (and, with MIG off, NvmlDriver::GetGiProfilesWithoutMig;
// with --hardware-check, NvmlDriver::ObserveMigDevices): never a create, a
// destroy or SetMigMode. The JSON form (stable field names,
// docs/probe.md) doubles as a recording of a real GPU's MIG state.
//
// Data flow: RunProbe opens an NvmlDriver -> CollectProbe fills a
// ProbeReport -> optional CompareWithCatalog per GPU -> ProbeToJson or
// ProbeToTable.
//
// Exit codes of RunProbe: 0 ok; 2 NVML unavailable (the message says what is
// missing and how to fix it); 3 --compare-catalog found differences.
//
// Thread-safety: functions without shared state.
#ifndef MIGD_CLI_PROBE_H_
#define MIGD_CLI_PROBE_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "cli/catalog_compare.h"
#include "cli/exit_codes.h"
#include "driver/gpu_driver.h"
#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_library.h"

namespace migd::cli {

struct ProbeGpu {
  driver::GpuInfo info;
  // MIG on: GetGiProfiles. MIG off: what NVML answers without MIG mode
  // (profiles_without_mig = true). profiles_status says why it is empty.
  std::vector<driver::GiProfileInfo> profiles;
  bool profiles_without_mig = false;
  Status profiles_status;
  std::vector<driver::GpuInstanceInfo> instances;
  Status instances_status;  // kFailedPrecondition when MIG is off
  std::optional<CatalogComparison> catalog;  // set by --compare-catalog
  // --hardware-check, MIG on: the raw MIG-device answers (or why not).
  std::optional<driver::MigDeviceObservations> mig_devices;
  Status mig_devices_status;
};

struct ProbeReport {
  std::string library_path;
  std::vector<driver::NvmlBinding> bindings;
  driver::DriverVersions versions;
  std::vector<ProbeGpu> gpus;
};

// Collects the report through read-only calls. `nvml` (nullable) adds the
// library path, the symbol bindings and the MIG-off profile listing, and,
// with `hardware_check`, the MIG-device observations of every GPU with MIG
// on. Fails only if ListGpus or GetVersions fails; per-GPU failures are kept
// in the report.
StatusOr<ProbeReport> CollectProbe(driver::GpuDriver& driver, driver::NvmlDriver* nvml,
                                   bool hardware_check = false);

// Runs CompareWithCatalog for every GPU; returns true if all are identical.
bool CompareReportWithCatalog(const mig::Catalog& catalog, ProbeReport* report);

// The JSON document of docs/probe.md (schema_version 1).
nlohmann::json ProbeToJson(const ProbeReport& report);
// Human-readable tables.
std::string ProbeToTable(const ProbeReport& report);

struct ProbeOptions {
  std::string nvml_library;  // empty: libnvidia-ml.so.1
  std::string output = "table";  // "table" or "json"
  bool compare_catalog = false;
  bool hardware_check = false;  // add gpus[].hardware_check (docs/probe.md)
};

// The whole subcommand: writes the report to `out`, errors to `err`; returns
// the exit code.
int RunProbe(const ProbeOptions& options, std::ostream& out, std::ostream& err);

}  // namespace migd::cli

#endif  // MIGD_CLI_PROBE_H_
