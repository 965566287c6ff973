// File: cli/catalog_compare.h
//
// Compares the GI profiles NVML reports for one GPU with the compiled-in
// catalogue (mig::Catalog, data/mig-profiles.json), for
// `migctl probe --compare-catalog`. The catalogue drives the simulator; on a
// real GPU migd takes everything from NVML, so a difference is a fact to
// record in the catalogue (or a driver change), not an error of migd.
//
// Matching: the catalogue model is found by PCI device id, then by device
// name. Profiles are compared by profile id: index, slice count, instance
// count, memory (within 1% of the catalogue value) and the placement list;
// profiles present on one side only are differences too.
//
// Thread-safety: pure functions.
#ifndef MIGD_CLI_CATALOG_COMPARE_H_
#define MIGD_CLI_CATALOG_COMPARE_H_

#include <string>
#include <vector>

#include "driver/gpu_driver.h"
#include "mig/catalog.h"

namespace migd::cli {

struct CatalogComparison {
  std::string model_key;  // empty when no catalogue model matches
  std::string matched_by;  // "pci_device_id", "name" or "" (no match)
  std::vector<std::string> differences;  // human sentences, stable order
  bool identical() const { return !model_key.empty() && differences.empty(); }
};

// REQUIRES: `profiles` are the GPU's profiles as NVML reports them (any
// order).
CatalogComparison CompareWithCatalog(const mig::Catalog& catalog, const driver::GpuInfo& gpu,
                                     const std::vector<driver::GiProfileInfo>& profiles);

// "{0,2,4}:2", the `nvidia-smi mig -lgipp` notation; placements of different
// sizes are grouped per size, groups separated by a space; "{}" when empty.
std::string FormatPlacements(std::vector<mig::Placement> placements);

}  // namespace migd::cli

#endif  // MIGD_CLI_CATALOG_COMPARE_H_
