#include "cli/catalog_compare.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace migd::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// What a faithful NVML would report for a catalogue model.
std::vector<driver::GiProfileInfo> ProfilesOf(const mig::GpuModel& m) {
  std::vector<driver::GiProfileInfo> out;
  for (const mig::GiProfile& p : m.gi_profiles) {
    driver::GiProfileInfo i;
    i.index = p.index;
    i.id = p.id;
    i.name = p.name;
    i.slice_count = p.slice_count;
    i.instance_count = p.instance_count;
    i.memory_mib = p.memory_mib;
    i.placements = p.placements;
    out.push_back(i);
  }
  return out;
}

driver::GpuInfo GpuOf(const mig::GpuModel& m) {
  driver::GpuInfo g;
  g.name = m.names.at(0);
  g.pci_device_id = m.pci_device_ids.at(0);
  return g;
}

class CatalogCompareTest : public ::testing::Test {
 protected:
  const mig::Catalog& cat_ = mig::Catalog::Default();
  const mig::GpuModel& a100_ = *cat_.FindModel("a100-40gb");
};

TEST_F(CatalogCompareTest, IdenticalWhenNvmlMatchesEveryModel) {
  for (const mig::GpuModel& m : cat_.models()) {
    CatalogComparison c = CompareWithCatalog(cat_, GpuOf(m), ProfilesOf(m));
    EXPECT_EQ(c.model_key, m.key);
    EXPECT_EQ(c.matched_by, "pci_device_id");
    EXPECT_THAT(c.differences, IsEmpty()) << m.key;
    EXPECT_TRUE(c.identical());
  }
}

TEST_F(CatalogCompareTest, MatchesByNameWhenPciIdIsUnknown) {
  driver::GpuInfo g = GpuOf(a100_);
  g.pci_device_id = 0x12345678;
  CatalogComparison c = CompareWithCatalog(cat_, g, ProfilesOf(a100_));
  EXPECT_EQ(c.model_key, "a100-40gb");
  EXPECT_EQ(c.matched_by, "name");
  EXPECT_TRUE(c.identical());
}

TEST_F(CatalogCompareTest, NoModelIsADifference) {
  driver::GpuInfo g;
  g.name = "NVIDIA Tesla T4";
  g.pci_device_id = 0x1EB810DE;
  CatalogComparison c = CompareWithCatalog(cat_, g, {});
  EXPECT_EQ(c.model_key, "");
  EXPECT_FALSE(c.identical());
  EXPECT_THAT(c.differences, ElementsAre(HasSubstr("no catalogue model matches PCI device id "
                                                   "0x1EB810DE or name \"NVIDIA Tesla T4\"")));
}

TEST_F(CatalogCompareTest, MemoryWithinOnePercentIsTheSame) {
  auto profiles = ProfilesOf(a100_);
  for (auto& p : profiles) p.memory_mib = p.memory_mib * 1005 / 1000;  // +0.5%
  EXPECT_TRUE(CompareWithCatalog(cat_, GpuOf(a100_), profiles).identical());
  for (auto& p : profiles) {
    if (p.id == GiProfileId(9)) p.memory_mib = 19968 * 102 / 100;  // +2%
  }
  CatalogComparison c = CompareWithCatalog(cat_, GpuOf(a100_), profiles);
  EXPECT_THAT(c.differences,
              ElementsAre(HasSubstr("profile id 9 (3g.20gb): memory 20367 MiB (NVML) vs 19968")));
}

TEST_F(CatalogCompareTest, ReportsEachKindOfDifference) {
  auto profiles = ProfilesOf(a100_);
  // Drop 7g (id 0); change 3g's placements, instance count, slices and index;
  // add an unknown profile.
  profiles.erase(std::remove_if(profiles.begin(), profiles.end(),
                                [](const auto& p) { return p.id == GiProfileId(0); }),
                 profiles.end());
  for (auto& p : profiles) {
    if (p.id == GiProfileId(9)) {
      p.placements = {{0, 4}};
      p.instance_count = 1;
      p.slice_count = 4;
      p.index = GiProfileIndex(3);
    }
  }
  driver::GiProfileInfo extra;
  extra.id = GiProfileId(99);
  extra.name = "9g.99gb";
  profiles.push_back(extra);
  CatalogComparison c = CompareWithCatalog(cat_, GpuOf(a100_), profiles);
  EXPECT_THAT(c.differences,
              ElementsAre(HasSubstr("profile id 0 (7g.40gb): in the catalogue, not reported"),
                          HasSubstr("profile id 9 (3g.20gb): index 3 (NVML) vs 2 (catalogue)"),
                          HasSubstr("profile id 9 (3g.20gb): slice count 4 (NVML) vs 3"),
                          HasSubstr("profile id 9 (3g.20gb): instance count 1 (NVML) vs 2"),
                          HasSubstr("placements {0}:4 (NVML) vs {0,4}:4 (catalogue)"),
                          HasSubstr("profile id 99 (9g.99gb): reported by NVML, not in the "
                                    "catalogue")));
}

TEST(FormatPlacementsTest, NvidiaSmiNotation) {
  EXPECT_EQ(FormatPlacements({}), "{}");
  EXPECT_EQ(FormatPlacements({{4, 2}, {0, 2}, {2, 2}}), "{0,2,4}:2");
  EXPECT_EQ(FormatPlacements({{0, 8}}), "{0}:8");
  EXPECT_EQ(FormatPlacements({{0, 1}, {0, 4}, {4, 4}}), "{0}:1 {0,4}:4");
}

}  // namespace
}  // namespace migd::cli
