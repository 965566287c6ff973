// EngineHealthSource: the engine's health marks as DRA health verdicts, and
// which engine callbacks wake the plugin's health streams.
#include "k8s/dra/engine_health_source.h"

#include <gtest/gtest.h>

namespace migd::k8s::dra {
namespace {

engine::GpuView Gpu(uint32_t index, bool unhealthy, const std::string& reason = "") {
  engine::GpuView g;
  g.info.index = GpuIndex(index);
  g.unhealthy = unhealthy;
  g.health_reason = reason;
  return g;
}

engine::InstanceView Instance(const std::string& mig, bool unhealthy,
                              const std::string& reason = "") {
  engine::InstanceView i;
  i.mig_uuid = MigUuid(mig);
  i.unhealthy = unhealthy;
  i.health_reason = reason;
  return i;
}

TEST(HealthFromViewsTest, OnlyUnhealthyGpusAndInstancesWithAMigUuidGetAVerdict) {
  const HealthSnapshot s = HealthFromViews(
      {Gpu(0, false), Gpu(1, true, "GPU 1: xid 79")},
      {Instance("MIG-a", false), Instance("MIG-b", true, "xid 94"), Instance("", true, "xid 94")});
  ASSERT_EQ(s.gpus.size(), 1u);
  EXPECT_EQ(s.gpus.at(GpuIndex(1)), (HealthVerdict{Health::kUnhealthy, "GPU 1: xid 79", 0}));
  ASSERT_EQ(s.instances.size(), 1u);
  EXPECT_EQ(s.instances.at(MigUuid("MIG-b")), (HealthVerdict{Health::kUnhealthy, "xid 94", 0}));
}

TEST(HealthFromViewsTest, AllHealthyIsAnEmptySnapshot) {
  EXPECT_EQ(HealthFromViews({Gpu(0, false)}, {Instance("MIG-a", false)}), HealthSnapshot{});
}

TEST(EngineHealthSourceTest, WithoutAManagerTheSnapshotIsEmpty) {
  EngineHealthSource source;
  EXPECT_EQ(source.Snapshot(), HealthSnapshot{});
}

TEST(EngineHealthSourceTest, HealthChangesAndUnhealthyInstanceEventsWakeListenersOthersDoNot) {
  EngineHealthSource source;
  int calls = 0;
  const uint64_t handle = source.AddListener([&] { ++calls; });
  engine::InstanceEvent healthy;
  healthy.instance = Instance("MIG-a", false);
  source.OnInstanceEvent(healthy);  // an allocation of a healthy instance
  EXPECT_EQ(calls, 0);
  engine::InstanceEvent destroyed;
  destroyed.reason = engine::EventReason::kDestroy;
  destroyed.instance = Instance("MIG-b", true, "xid 94");
  source.OnInstanceEvent(destroyed);  // the device is free (healthy) again
  EXPECT_EQ(calls, 1);
  engine::InstanceEvent marked;
  marked.reason = engine::EventReason::kMarkedUnhealthy;
  source.OnInstanceEvent(marked);
  EXPECT_EQ(calls, 2);
  source.OnHealthChange(engine::HealthChange{});
  EXPECT_EQ(calls, 3);
  source.RemoveListener(handle);
  source.OnHealthChange(engine::HealthChange{});
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(source.notifications(), 4u);
}

TEST(EngineHealthSourceTest, SettingTheManagerWakesListeners) {
  EngineHealthSource source;
  int calls = 0;
  source.AddListener([&] { ++calls; });
  source.SetManager(nullptr);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(source.Snapshot(), HealthSnapshot{});
}

}  // namespace
}  // namespace migd::k8s::dra
