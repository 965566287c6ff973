#include "sim/proc_files.h"

#include <filesystem>
#include <set>
#include <system_error>
#include <vector>

#include "base/file_util.h"
#include "base/status_macros.h"

namespace migd::sim {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kCapGpus = 32;
constexpr uint32_t kCapGis = 15;
constexpr uint32_t kCapCis = 8;

Status WriteFile(const std::string& path, const std::string& content) {
  const std::string dir = fs::path(path).parent_path().string();
  MIGD_RETURN_IF_ERROR(MakeDirectories(dir));
  AtomicWriteOptions options;
  options.sync = false;  // derived data: rebuilt from the state at every init
  options.mode = 0444;
  return AtomicWriteFile(path, content, options);
}

Status RemoveTree(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) return InternalError("removing " + p.string() + ": " + ec.message());
  return OkStatus();
}

// Entries of `dir` named <prefix>... that are not in `keep` (none if `dir`
// does not exist). Collected before any removal.
std::vector<fs::path> StaleEntries(const fs::path& dir, std::string_view prefix,
                                   const std::set<std::string>& keep) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(prefix) && !keep.contains(name)) out.push_back(it->path());
  }
  return out;
}

std::string CapabilitiesDir(const SimState& state) {
  return state.proc_root + "/driver/nvidia/capabilities";
}

}  // namespace

uint32_t GiAccessMinor(uint32_t gpu_minor, uint32_t gi_id) {
  return 3 + 135 * gpu_minor + 9 * gi_id;
}

uint32_t CiAccessMinor(uint32_t gpu_minor, uint32_t gi_id, uint32_t ci_id) {
  return GiAccessMinor(gpu_minor, gi_id) + 1 + ci_id;
}

std::string CapabilityFileContent(uint32_t minor, uint32_t mode, uint32_t modify) {
  return "DeviceFileMinor: " + std::to_string(minor) + "\nDeviceFileMode: " + std::to_string(mode) +
         "\nDeviceFileModify: " + std::to_string(modify) + "\n";
}

std::string MigMinorsContent() {
  std::string out = "config 1\nmonitor 2\n";
  for (uint32_t g = 0; g < kCapGpus; ++g) {
    for (uint32_t i = 0; i < kCapGis; ++i) {
      const std::string gi = "gpu" + std::to_string(g) + "/gi" + std::to_string(i);
      out += gi + "/access " + std::to_string(GiAccessMinor(g, i)) + "\n";
      for (uint32_t c = 0; c < kCapCis; ++c) {
        out += gi + "/ci" + std::to_string(c) + "/access " +
               std::to_string(CiAccessMinor(g, i, c)) + "\n";
      }
    }
  }
  return out;
}

Status WriteStaticProcFiles(const SimState& state, const mig::Catalog& catalog) {
  if (state.proc_root.empty()) return OkStatus();
  const std::string& root = state.proc_root;
  MIGD_RETURN_IF_ERROR(WriteFile(root + "/devices",
                                 "Character devices:\n"
                                 "  1 mem\n"
                                 "  4 /dev/vc/0\n"
                                 "  5 /dev/tty\n"
                                 "195 nvidia-frontend\n"
                                 "508 nvidia-caps\n"
                                 "511 nvidia-uvm\n"
                                 "\n"
                                 "Block devices:\n"
                                 "  8 sd\n"
                                 "259 blkext\n"));
  MIGD_RETURN_IF_ERROR(WriteFile(root + "/driver/nvidia-caps/mig-minors", MigMinorsContent()));
  MIGD_RETURN_IF_ERROR(WriteFile(root + "/driver/nvidia-caps/nvlink-minors", "fabric-mgmt 0\n"));
  MIGD_RETURN_IF_ERROR(
      WriteFile(CapabilitiesDir(state) + "/mig/config", CapabilityFileContent(1, kConfigMode, 1)));
  MIGD_RETURN_IF_ERROR(
      WriteFile(CapabilitiesDir(state) + "/mig/monitor", CapabilityFileContent(2, kAccessMode, 1)));
  for (const SimGpu& gpu : state.gpus) {
    const mig::GpuModel* model = catalog.FindModel(gpu.model_key);
    // The directory name is the bus id with a 4-digit domain, lower-case.
    std::string bus = gpu.pci_bus_id.size() > 4 ? gpu.pci_bus_id.substr(4) : gpu.pci_bus_id;
    for (char& ch : bus) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    MIGD_RETURN_IF_ERROR(WriteFile(
        root + "/driver/nvidia/gpus/" + bus + "/information",
        "Model: \t\t " + (model && !model->names.empty() ? model->names[0] : gpu.model_key) +
            "\nGPU UUID: \t " + gpu.uuid.value() + "\nBus Type: \t PCIe\nBus Location: \t " + bus +
            "\nDevice Minor: \t " + std::to_string(gpu.minor) + "\nGPU Excluded:\t No\n"));
  }
  return OkStatus();
}

Status SyncInstanceProcFiles(const SimState& state) {
  if (state.proc_root.empty()) return OkStatus();
  for (const SimGpu& gpu : state.gpus) {
    const fs::path mig_dir =
        fs::path(CapabilitiesDir(state)) / ("gpu" + std::to_string(gpu.minor)) / "mig";
    // Desired: gi<I> -> {ci<C>...}.
    std::set<std::string> want_gis;
    for (const SimGi& gi : gpu.gpu_instances) {
      const std::string gi_name = "gi" + std::to_string(gi.id.value());
      want_gis.insert(gi_name);
      const fs::path gi_dir = mig_dir / gi_name;
      std::error_code ec;
      if (!fs::exists(gi_dir / "access", ec)) {
        MIGD_RETURN_IF_ERROR(WriteFile(
            (gi_dir / "access").string(),
            CapabilityFileContent(GiAccessMinor(gpu.minor, gi.id.value()), kAccessMode, 1)));
      }
      std::set<std::string> want_cis;
      for (const SimCi& ci : gi.compute_instances) {
        const std::string ci_name = "ci" + std::to_string(ci.id.value());
        want_cis.insert(ci_name);
        if (!fs::exists(gi_dir / ci_name / "access", ec)) {
          MIGD_RETURN_IF_ERROR(WriteFile(
              (gi_dir / ci_name / "access").string(),
              CapabilityFileContent(CiAccessMinor(gpu.minor, gi.id.value(), ci.id.value()),
                                    kAccessMode, 1)));
        }
      }
      for (const fs::path& stale : StaleEntries(gi_dir, "ci", want_cis)) {
        MIGD_RETURN_IF_ERROR(RemoveTree(stale));
      }
    }
    for (const fs::path& stale : StaleEntries(mig_dir, "gi", want_gis)) {
      MIGD_RETURN_IF_ERROR(RemoveTree(stale));
    }
  }
  return OkStatus();
}

}  // namespace migd::sim
