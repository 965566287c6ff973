// The DRA device model: names, and the counters as an exact encoding of
// mig::Layout's legality rules on every catalogue model.
#include "k8s/dra/device_table.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "mig/catalog.h"
#include "mig/layout.h"

namespace migd::k8s::dra {
namespace {

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

TEST(DeviceTableTest, SlugsAndNames) {
  EXPECT_EQ(ProfileSlug("1g.10gb"), "1g10gb");
  EXPECT_EQ(ProfileSlug("1g.10gb+me"), "1g10gb-me");
  EXPECT_EQ(ProfileSlug("1g.24gb+me.all"), "1g24gb-meall");
  EXPECT_EQ(ProfileSlug("2g.48gb-me"), "2g48gb-me");
  const mig::GpuModel* h100 = mig::Catalog::Default().FindModel("h100-80gb");
  ASSERT_NE(h100, nullptr);
  const mig::GiProfile* p = h100->FindProfileByName("3g.40gb");
  EXPECT_EQ(DeviceName(GpuIndex(0), *p, {4, 4}), "gpu-0-3g40gb-9-4");
  EXPECT_EQ(CounterSetName(GpuIndex(3)), "gpu-3");
}

TEST(DeviceTableTest, EveryModelHasUniqueDnsLabelNamesAndCounterNames) {
  for (const mig::GpuModel& m : mig::Catalog::Default().models()) {
    for (uint32_t g : {0u, 15u}) {
      const DeviceTable t = BuildDeviceTable(GpuIndex(g), m);
      std::set<std::string> names;
      size_t expected = 0;
      for (const mig::GiProfile& p : m.gi_profiles) expected += p.placements.size();
      EXPECT_EQ(t.devices.size(), expected) << m.key;
      for (const TableDevice& d : t.devices) {
        EXPECT_TRUE(IsDnsLabel(d.name)) << d.name;
        EXPECT_TRUE(names.insert(d.name).second) << d.name;
        EXPECT_EQ(t.Find(d.name), &d);
        EXPECT_EQ(t.Find(d.profile->id, d.placement), &d);
        for (const auto& [c, v] : d.consumes) {
          EXPECT_TRUE(t.capacity.count(c)) << c;
          EXPECT_GT(v, 0);
        }
      }
      EXPECT_TRUE(IsDnsLabel(t.counter_set));
      // 1.35+: at most 32 counters per counter set; 1.34: 32 per slice.
      EXPECT_LE(t.capacity.size(), 32u) << m.key;
      for (const auto& [c, v] : t.capacity) EXPECT_TRUE(IsDnsLabel(c)) << c;
      EXPECT_EQ(t.Find("gpu-99-nothing-1-0"), nullptr);
    }
  }
}

TEST(DeviceTableTest, MemorySlicesAndEnginesAreTheCounters) {
  const mig::GpuModel* a100 = mig::Catalog::Default().FindModel("a100-40gb");
  const DeviceTable t = BuildDeviceTable(GpuIndex(0), *a100);
  for (uint32_t i = 0; i < a100->memory_slices; ++i) {
    EXPECT_EQ(t.capacity.at(MemorySliceCounter(i)), 1);
  }
  EXPECT_EQ(t.capacity.at("ofa-engines"), 1);
  EXPECT_EQ(t.capacity.at("jpeg-engines"), 1);
  EXPECT_EQ(t.capacity.count("encoders"), 0u);  // no A100 profile needs one
  const TableDevice* me = t.Find(a100->FindProfileByName("1g.5gb+me")->id, {3, 1});
  ASSERT_NE(me, nullptr);
  EXPECT_EQ(me->consumes.at("ofa-engines"), 1);
  EXPECT_EQ(me->consumes.at("memory-slice-3"), 1);
  EXPECT_EQ(me->consumes.count("memory-slice-4"), 0u);
}

// Any set of devices fits into the counter set exactly when mig::Layout
// accepts it: random sequences of adds on every model.
TEST(DeviceTableTest, CountersFitExactlyWhenLayoutIsLegal) {
  std::mt19937 rng(17);
  for (const mig::GpuModel& m : mig::Catalog::Default().models()) {
    const DeviceTable t = BuildDeviceTable(GpuIndex(0), m);
    for (int round = 0; round < 300; ++round) {
      mig::Layout layout(m);
      Counters available = t.capacity;
      for (int step = 0; step < 12; ++step) {
        const TableDevice& d = t.devices[rng() % t.devices.size()];
        const bool legal = layout.CanAdd(*d.profile, d.placement).ok();
        ASSERT_EQ(Fits(available, d.consumes), legal)
            << m.key << " " << layout.ToString() << " + " << d.name;
        if (legal) {
          ASSERT_TRUE(layout.Add(*d.profile, d.placement).ok());
          Subtract(available, d.consumes);
        }
      }
    }
  }
}

TEST(DeviceTableTest, InstanceCountCounterOnlyWhereItBinds) {
  // A model whose 1g profile allows two instances though four fit.
  mig::GpuModel m = *mig::Catalog::Default().FindModel("a30-24gb");
  for (mig::GiProfile& p : m.gi_profiles) {
    if (p.name == "1g.6gb") p.instance_count = 2;
  }
  const DeviceTable t = BuildDeviceTable(GpuIndex(0), m);
  const mig::GiProfile* one = m.FindProfileByName("1g.6gb");
  const std::string cap = "gi-" + std::to_string(one->id.value()) + "-instances";
  ASSERT_EQ(t.capacity.count(cap), 1u);
  EXPECT_EQ(t.capacity.at(cap), 2);
  Counters available = t.capacity;
  int placed = 0;
  for (const TableDevice& d : t.devices) {
    if (d.profile != one || !Fits(available, d.consumes)) continue;
    Subtract(available, d.consumes);
    ++placed;
  }
  EXPECT_EQ(placed, 2);
  const DeviceTable plain =
      BuildDeviceTable(GpuIndex(0), *mig::Catalog::Default().FindModel("a30-24gb"));
  for (const auto& [c, v] : plain.capacity) EXPECT_EQ(c.find("instances"), std::string::npos) << c;
}

}  // namespace
}  // namespace migd::k8s::dra
