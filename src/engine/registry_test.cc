#include "engine/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mig/catalog.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kGpu[] = "GPU-00000000-0000-0000-0000-000000000000";

class Recorder final : public EngineListener {
 public:
  void OnInstanceEvent(const InstanceEvent& e) override {
    seen.push_back(std::to_string(e.sequence) + ":" + std::string(InstanceStateName(e.from)) + ">" +
                   std::string(InstanceStateName(e.to)) + ":" +
                   std::string(EventReasonName(e.reason)) + ":" + e.instance.mig_uuid.value());
  }
  void OnAllocation(const AllocationOutcome&) override {}
  void OnReclaim(EventReason, const InstanceView&) override {}
  std::vector<std::string> seen;  // called with the registry lock held
};

TrackedInstance Instance(uint32_t start, const std::string& mig, InstanceState state) {
  TrackedInstance t;
  t.id.gpu_uuid = GpuUuid(kGpu);
  t.id.profile_id = GiProfileId(19);
  t.id.placement = {.start = start, .size = 1};
  t.id.mig_uuid = MigUuid(mig);
  t.gpu = GpuIndex(0);
  t.profile = "1g.5gb";
  t.state = state;
  return t;
}

class RegistryTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  Recorder recorder_;
  Registry registry_{clock_, &recorder_};
};

TEST_F(RegistryTest, TransitionsFollowTheTableAndEmitOneEventEach) {
  MutexLock lock(registry_.mu());
  TrackedInstance t = Instance(0, "", InstanceState::kNone);
  ASSERT_TRUE(registry_.Transition(t, InstanceState::kCreating, EventReason::kAllocate).ok());
  EXPECT_THAT(registry_.Transition(t, InstanceState::kIdle, EventReason::kRelease),
              StatusIs(StatusCode::kInternal, HasSubstr("refused transition Creating -> Idle")));
  EXPECT_EQ(t.state, InstanceState::kCreating) << "a refused transition changes nothing";
  t.id.mig_uuid = MigUuid("MIG-1");
  ASSERT_TRUE(registry_.Transition(t, InstanceState::kActive, EventReason::kAllocate).ok());
  EXPECT_THAT(recorder_.seen,
              ElementsAre("1:None>Creating:allocate:", "2:Creating>Active:allocate:MIG-1"));
}

TEST_F(RegistryTest, LoadAnnouncesAndFindLooksUpByKeyAndUuid) {
  MutexLock lock(registry_.mu());
  registry_.Load(Instance(3, "MIG-3", InstanceState::kIdle), EventReason::kRecovery);
  registry_.Load(Instance(1, "MIG-1", InstanceState::kError), EventReason::kRecovery);
  EXPECT_THAT(recorder_.seen,
              ElementsAre("1:None>Idle:recovery:MIG-3", "2:None>Error:recovery:MIG-1"));
  ASSERT_NE(registry_.FindByUuid("MIG-3"), nullptr);
  EXPECT_EQ(registry_.FindByUuid("MIG-3")->key().placement.start, 3u);
  EXPECT_EQ(registry_.FindByUuid(""), nullptr);
  EXPECT_EQ(registry_.FindByUuid("MIG-9"), nullptr);
  const store::RecordKey key = Instance(1, "", InstanceState::kNone).key();
  ASSERT_NE(registry_.Find(key), nullptr);
  registry_.Erase(key);
  EXPECT_EQ(registry_.Find(key), nullptr);
}

TEST_F(RegistryTest, AllocationsGrowAndShrinkByKey) {
  MutexLock lock(registry_.mu());
  TrackedInstance a = Instance(0, "MIG-0", InstanceState::kActive);
  a.request_id = "req";
  TrackedInstance b = Instance(1, "MIG-1", InstanceState::kActive);
  b.request_id = "req";
  TrackedInstance lone = Instance(2, "MIG-2", InstanceState::kActive);  // no request id
  for (const auto* t : {&a, &b, &lone}) registry_.AddToAllocation(*t);
  ASSERT_EQ(registry_.allocations().size(), 2u);
  EXPECT_EQ(registry_.allocations().at("req").keys.size(), 2u);
  EXPECT_EQ(registry_.allocations().count("instance:MIG-2"), 1u);
  registry_.RemoveFromAllocation("req", a.key());
  EXPECT_EQ(registry_.allocations().at("req").keys, std::vector<store::RecordKey>{b.key()});
  registry_.RemoveFromAllocation("req", b.key());
  EXPECT_EQ(registry_.allocations().count("req"), 0u) << "an empty allocation goes";
  registry_.RemoveFromAllocation("unknown", b.key());
}

TEST_F(RegistryTest, SnapshotSortsByGpuAndPlacementAndListsForeignOfManagedGpus) {
  GpuTable gpus;
  driver::GpuInfo info;
  info.index = GpuIndex(0);
  info.uuid = GpuUuid(kGpu);
  gpus.Init({info}, {});
  gpus.Manage(0, info, *mig::Catalog::Default().FindModel("a100-40gb"));
  MutexLock lock(registry_.mu());
  registry_.Load(Instance(5, "MIG-5", InstanceState::kIdle), EventReason::kRecovery);
  registry_.Load(Instance(2, "MIG-2", InstanceState::kActive), EventReason::kRecovery);
  driver::GpuInstanceInfo gi;
  gi.id = NvmlGiId(7);
  gi.profile_id = GiProfileId(9);  // 3g.20gb
  gi.placement = {.start = 4, .size = 4};
  registry_.foreign()[0].push_back(gi);
  registry_.foreign()[3].push_back(gi);  // GPU 3 is not managed: not listed
  const ManagerSnapshot s = registry_.Snapshot(gpus);
  ASSERT_EQ(s.instances.size(), 2u);
  EXPECT_EQ(s.instances[0].mig_uuid, MigUuid("MIG-2"));
  EXPECT_EQ(s.instances[1].mig_uuid, MigUuid("MIG-5"));
  ASSERT_EQ(s.foreign.size(), 1u);
  EXPECT_EQ(s.foreign[0].gpu_uuid, GpuUuid(kGpu));
  EXPECT_EQ(s.foreign[0].profile, "3g.20gb");
  EXPECT_EQ(s.foreign[0].gi_id, NvmlGiId(7));
}

}  // namespace
}  // namespace migd::engine
