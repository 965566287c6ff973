// MapHealth: GPU and instance verdicts onto DRA devices.
#include "k8s/dra/health_reporter.h"

#include <gtest/gtest.h>

#include "mig/catalog.h"

namespace migd::k8s::dra {
namespace {

class MapHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const mig::GpuModel* m = mig::Catalog::Default().FindModel("a100-40gb");
    tables_ = {BuildDeviceTable(GpuIndex(0), *m), BuildDeviceTable(GpuIndex(1), *m)};
    three_g_ = m->FindProfileByName("3g.20gb");
    instances_ = {{MigUuid("MIG-a"), GpuIndex(0), three_g_->id, {4, 4}},
                  {MigUuid("MIG-b"), GpuIndex(1), three_g_->id, {0, 4}}};
  }
  const DeviceHealthReport& Of(const std::vector<DeviceHealthReport>& r, const std::string& name) {
    for (const DeviceHealthReport& x : r) {
      if (x.device == name) return x;
    }
    ADD_FAILURE() << "no device " << name;
    static DeviceHealthReport none;
    return none;
  }
  std::vector<DeviceTable> tables_;
  const mig::GiProfile* three_g_ = nullptr;
  std::vector<InstanceLocation> instances_;
};

TEST_F(MapHealthTest, EverythingHealthyByDefaultAndListComplete) {
  const auto r = MapHealth(tables_, instances_, {}, "pool-a", 1000);
  EXPECT_EQ(r.size(), tables_[0].devices.size() * 2);
  for (const DeviceHealthReport& x : r) {
    EXPECT_EQ(x.health, Health::kHealthy);
    EXPECT_EQ(x.pool, "pool-a");
    EXPECT_EQ(x.updated_unix_s, 1000);
  }
}

TEST_F(MapHealthTest, UnhealthyGpuMarksAllItsDevices) {
  HealthSnapshot h;
  h.gpus[GpuIndex(1)] = {Health::kUnhealthy, "XID 79: fell off the bus", 900};
  const auto r = MapHealth(tables_, instances_, h, "p", 1000);
  for (const DeviceHealthReport& x : r) {
    const bool on1 = x.device.rfind("gpu-1-", 0) == 0;
    EXPECT_EQ(x.health, on1 ? Health::kUnhealthy : Health::kHealthy) << x.device;
    if (on1) {
      EXPECT_EQ(x.message, "GPU 1: XID 79: fell off the bus");
      EXPECT_EQ(x.updated_unix_s, 900);
    }
  }
}

TEST_F(MapHealthTest, UnhealthyInstanceMarksOnlyItsDevice) {
  HealthSnapshot h;
  h.instances[MigUuid("MIG-a")] = {Health::kUnhealthy, "ECC error", 0};
  h.instances[MigUuid("MIG-unknown")] = {Health::kUnhealthy, "not ours", 0};
  const auto r = MapHealth(tables_, instances_, h, "p", 1000);
  int unhealthy = 0;
  for (const DeviceHealthReport& x : r) unhealthy += x.health == Health::kUnhealthy;
  EXPECT_EQ(unhealthy, 1);
  const DeviceHealthReport& d = Of(r, DeviceName(GpuIndex(0), *three_g_, {4, 4}));
  EXPECT_EQ(d.health, Health::kUnhealthy);
  EXPECT_EQ(d.message, "ECC error");
  EXPECT_EQ(d.updated_unix_s, 1000);  // no time given: now
  EXPECT_EQ(Of(r, DeviceName(GpuIndex(1), *three_g_, {0, 4})).health, Health::kHealthy);
}

TEST_F(MapHealthTest, GpuVerdictWinsOverInstanceAndUnknownPropagates) {
  HealthSnapshot h;
  h.gpus[GpuIndex(0)] = {Health::kUnknown, "monitor lost NVML", 5};
  h.instances[MigUuid("MIG-a")] = {Health::kUnhealthy, "ECC error", 6};
  const auto r = MapHealth(tables_, instances_, h, "p", 1000);
  const DeviceHealthReport& d = Of(r, DeviceName(GpuIndex(0), *three_g_, {4, 4}));
  EXPECT_EQ(d.health, Health::kUnknown);
  EXPECT_EQ(d.message, "GPU 0: monitor lost NVML");
}

}  // namespace
}  // namespace migd::k8s::dra
