#include "cli/catalog_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace migd::cli {
namespace {

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08X", v);
  return buf;
}

std::string ProfileLabel(uint32_t id, const std::string& name) {
  std::string s = "profile id " + std::to_string(id);
  if (!name.empty()) s += " (" + name + ")";
  return s;
}

}  // namespace

std::string FormatPlacements(std::vector<mig::Placement> placements) {
  if (placements.empty()) return "{}";
  std::sort(placements.begin(), placements.end(), [](const auto& a, const auto& b) {
    return a.size != b.size ? a.size < b.size : a.start < b.start;
  });
  std::string out;
  size_t i = 0;
  while (i < placements.size()) {
    const uint32_t size = placements[i].size;
    if (!out.empty()) out += ' ';
    out += '{';
    bool first = true;
    for (; i < placements.size() && placements[i].size == size; ++i) {
      if (!first) out += ',';
      out += std::to_string(placements[i].start);
      first = false;
    }
    out += "}:" + std::to_string(size);
  }
  return out;
}

CatalogComparison CompareWithCatalog(const mig::Catalog& catalog, const driver::GpuInfo& gpu,
                                     const std::vector<driver::GiProfileInfo>& profiles) {
  CatalogComparison c;
  const mig::GpuModel* model = nullptr;
  if (gpu.pci_device_id != 0) model = catalog.FindModelByPciDeviceId(gpu.pci_device_id);
  if (model != nullptr) {
    c.matched_by = "pci_device_id";
  } else if (!gpu.name.empty()) {
    model = catalog.FindModelByName(gpu.name);
    if (model != nullptr) c.matched_by = "name";
  }
  if (model == nullptr) {
    c.differences.push_back("no catalogue model matches PCI device id " +
                            Hex(gpu.pci_device_id) + " or name \"" + gpu.name + "\"");
    return c;
  }
  c.model_key = model->key;

  std::map<uint32_t, const driver::GiProfileInfo*> reported;
  for (const driver::GiProfileInfo& p : profiles) reported[p.id.value()] = &p;

  std::set<uint32_t> ids;
  for (const auto& [id, p] : reported) ids.insert(id);
  for (const mig::GiProfile& p : model->gi_profiles) ids.insert(p.id.value());

  for (uint32_t id : ids) {
    auto it = reported.find(id);
    const driver::GiProfileInfo* n = it == reported.end() ? nullptr : it->second;
    const mig::GiProfile* k = model->FindProfileById(GiProfileId(id));
    if (k == nullptr) {
      c.differences.push_back(ProfileLabel(id, n->name) +
                              ": reported by NVML, not in the catalogue");
      continue;
    }
    if (n == nullptr) {
      c.differences.push_back(ProfileLabel(id, k->name) +
                              ": in the catalogue, not reported by NVML");
      continue;
    }
    const std::string label = ProfileLabel(id, k->name);
    if (n->index != k->index) {
      c.differences.push_back(label + ": index " + std::to_string(n->index.value()) +
                              " (NVML) vs " + std::to_string(k->index.value()) + " (catalogue)");
    }
    if (n->slice_count != k->slice_count) {
      c.differences.push_back(label + ": slice count " + std::to_string(n->slice_count) +
                              " (NVML) vs " + std::to_string(k->slice_count) + " (catalogue)");
    }
    if (n->instance_count != k->instance_count) {
      c.differences.push_back(label + ": instance count " + std::to_string(n->instance_count) +
                              " (NVML) vs " + std::to_string(k->instance_count) +
                              " (catalogue)");
    }
    const double diff = std::fabs(static_cast<double>(n->memory_mib) -
                                  static_cast<double>(k->memory_mib));
    if (diff > 0.01 * static_cast<double>(k->memory_mib)) {
      c.differences.push_back(label + ": memory " + std::to_string(n->memory_mib) +
                              " MiB (NVML) vs " + std::to_string(k->memory_mib) +
                              " MiB (catalogue), more than 1% apart");
    }
    std::vector<mig::Placement> a = n->placements;
    std::vector<mig::Placement> b = k->placements;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) {
      c.differences.push_back(label + ": placements " + FormatPlacements(a) + " (NVML) vs " +
                              FormatPlacements(b) + " (catalogue)");
    }
  }
  return c;
}

}  // namespace migd::cli
