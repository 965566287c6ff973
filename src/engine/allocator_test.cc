// Allocator through the Manager over the in-process simulator: create, reuse,
// release, rollback, idempotent replay, dry-run plans and the demand mix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/gpu_driver_wrapper.h"
#include "engine/manager_testing.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::engine::testing::LiveLayout;
using ::migd::engine::testing::OpaqueReq;
using ::migd::engine::testing::Spec;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using Method = driver::FaultInjectingDriver::Method;

class AllocatorTest : public testing::FakeHardwareTest {};

// Reports the parent GPU's UUID as the MIG UUID of every CI it creates: what
// a driver that read NVML's "Parent device" field would do.
class ParentUuidDriver final : public driver::GpuDriverWrapper {
 public:
  using GpuDriverWrapper::GpuDriverWrapper;
  StatusOr<driver::ComputeInstanceInfo> CreateCi(GpuIndex gpu, NvmlGiId gi) override {
    StatusOr<driver::ComputeInstanceInfo> ci = GpuDriverWrapper::CreateCi(gpu, gi);
    if (!ci.ok()) return ci;
    StatusOr<std::vector<driver::GpuInfo>> gpus = ListGpus();
    if (!gpus.ok()) return gpus.status();
    ci->mig_uuid = MigUuid((*gpus)[gpu.value()].uuid.value());
    return ci;
  }
};

TEST_F(AllocatorTest, AllocateCreatesActiveInstanceAndPublishes) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("3g.20gb")})));
  ASSERT_EQ(a.instances.size(), 1u);
  EXPECT_EQ(a.instances[0].state, InstanceState::kActive);
  EXPECT_EQ(a.stages[0], planner::Stage::kFree);
  EXPECT_FALSE(a.instances[0].mig_uuid.value().empty());
  EXPECT_EQ(obs_.publishes(), 1);
  EXPECT_EQ(obs_.published().count(a.instances[0].mig_uuid.value()), 1u);
  EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
  Consistent();
}

TEST_F(AllocatorTest, ReleaseMakesIdleAndLeavesGiCiAndCdiUntouched) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("2g.10gb")})));
  const auto before = LiveLayout(*fake_);
  int driver_calls = 0;
  for (int m = 0; m < driver::FaultInjectingDriver::kMethodCount; ++m) {
    driver_calls += faults_->CallCount(static_cast<Method>(m));
  }
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  int after_calls = 0;
  for (int m = 0; m < driver::FaultInjectingDriver::kMethodCount; ++m) {
    after_calls += faults_->CallCount(static_cast<Method>(m));
  }
  EXPECT_EQ(after_calls, driver_calls) << "release must not call the driver";
  EXPECT_EQ(LiveLayout(*fake_), before);
  const InstanceView v = Get(a.instances[0].mig_uuid);
  EXPECT_EQ(v.state, InstanceState::kIdle);
  EXPECT_TRUE(v.owner.empty());
  EXPECT_EQ(obs_.unpublishes(), 0);
  EXPECT_EQ(obs_.published().count(v.mig_uuid.value()), 1u);
  EXPECT_THAT(mgr_->Release("r1"), StatusIs(StatusCode::kNotFound, HasSubstr("r1")));
  Consistent();
}

TEST_F(AllocatorTest, SameGpuProfilePlacementReusesIdleInstanceAndMigUuid) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("2g.10gb", 0, mig::Placement{2, 2})})));
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  const int creates = faults_->CallCount(Method::kCreateGi);
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation b, mgr_->Allocate(OpaqueReq("r2", {Spec("2g.10gb", 0, mig::Placement{2, 2})})));
  EXPECT_EQ(b.stages[0], planner::Stage::kReuse);
  EXPECT_EQ(b.instances[0].mig_uuid, a.instances[0].mig_uuid);
  EXPECT_EQ(b.instances[0].gi_id, a.instances[0].gi_id);
  EXPECT_EQ(faults_->CallCount(Method::kCreateGi), creates);
  EXPECT_EQ(Get(b.instances[0].mig_uuid).owner, store::Owner::Opaque("owner-r2"));
  EXPECT_EQ(mgr_->counters().reuses, 1u);
  Consistent();
}

TEST_F(AllocatorTest, RequestWithoutPlacementReusesIdleOfThatProfile) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("1g.5gb")})));
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(OpaqueReq("r2", {Spec("1g.5gb")})));
  EXPECT_EQ(b.instances[0].mig_uuid, a.instances[0].mig_uuid);
}

TEST_F(AllocatorTest, SchedulerPlacementOverlappingIdleDestroysOnlyThose) {
  Machine("a100-40gb:1");
  Start();
  std::map<uint32_t, MigUuid> idle;
  for (uint32_t s = 0; s < 7; ++s) {
    const std::string id = "r" + std::to_string(s);
    MIGD_ASSERT_OK_AND_ASSIGN(
        Allocation a, mgr_->Allocate(OpaqueReq(id, {Spec("1g.5gb", 0, mig::Placement{s, 1})})));
    idle[s] = a.instances[0].mig_uuid;
    ENGINE_ASSERT_OK(mgr_->Release(id));
  }
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation big, mgr_->Allocate(OpaqueReq("big", {Spec("3g.20gb", 0, mig::Placement{4, 4})})));
  EXPECT_EQ(big.stages[0], planner::Stage::kReclaim);
  EXPECT_EQ(big.instances[0].placement, (mig::Placement{4, 4}));
  for (uint32_t s = 0; s < 7; ++s) {
    const InstanceView v = Get(idle[s]);
    if (s >= 4) {
      EXPECT_EQ(v.state, InstanceState::kNone) << "slot " << s << " should be destroyed";
    } else {
      EXPECT_EQ(v.state, InstanceState::kIdle) << "slot " << s << " must survive";
    }
  }
  EXPECT_EQ(obs_.unpublishes(), 3);
  Consistent();
}

TEST_F(AllocatorTest, FailedAllocationDestroysCreatedAndReturnsReusedToIdle) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("1g.5gb", 0, mig::Placement{0, 1})})));
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  const auto before = LiveLayout(*fake_);
  // Two creates and one reuse; the second CI create fails.
  faults_->FailNthCall(Method::kCreateCi, 2, InternalError("injected CI failure"));
  auto r = mgr_->Allocate(OpaqueReq(
      "r2", {Spec("1g.5gb", 0, mig::Placement{0, 1}), Spec("1g.5gb", 0, mig::Placement{1, 1}),
             Spec("1g.5gb", 0, mig::Placement{2, 1})}));
  EXPECT_THAT(r.status(), StatusIs(StatusCode::kInternal, HasSubstr("injected")));
  EXPECT_EQ(LiveLayout(*fake_), before);
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kIdle);
  EXPECT_EQ(mgr_->List().instances.size(), 1u);
  EXPECT_EQ(mgr_->counters().rollbacks, 1u);
  Consistent();
  // The request id is free again.
  MIGD_EXPECT_OK(
      mgr_->Allocate(OpaqueReq("r2", {Spec("1g.5gb", 0, mig::Placement{0, 1})})).status());
}

TEST_F(AllocatorTest, FailedPublishRollsBack) {
  Machine("a100-40gb:1");
  Start();
  obs_.FailPublish(UnavailableError("cdi dir missing"));
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("r1", {Spec("2g.10gb")})).status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("cdi")));
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  Consistent();
}

TEST_F(AllocatorTest, AllocateIsIdempotentByRequestId) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("1g.5gb")})));
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(OpaqueReq("r1", {Spec("1g.5gb")})));
  EXPECT_TRUE(b.replayed);
  EXPECT_EQ(b.instances[0].mig_uuid, a.instances[0].mig_uuid);
  EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
  AllocateRequest other = OpaqueReq("r1", {Spec("1g.5gb")});
  other.owner = store::Owner::Opaque("someone-else");
  EXPECT_THAT(mgr_->Allocate(other).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("r1")));
  // Same owner and count, another profile / placement: also a different request.
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("r1", {Spec("2g.10gb")})).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("use a new request id")));
  const mig::Placement elsewhere{a.instances[0].placement.start == 0 ? 1u : 0u, 1};
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("r1", {Spec("1g.5gb", 0, elsewhere)})).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("r1")));
  // An alias or a pin that matches what was allocated is the same request.
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation c, mgr_->Allocate(OpaqueReq("r1", {Spec("1g.5gb", 0, a.instances[0].placement)})));
  EXPECT_TRUE(c.replayed);
}

TEST_F(AllocatorTest, ReplayAfterRestartAnswersInRequestOrder) {
  Machine("a100-40gb:1");
  Start();
  // Record keys sort by placement; the request order differs from it.
  const std::vector<InstanceSpec> specs = {Spec("3g.20gb"), Spec("1g.5gb"), Spec("2g.10gb")};
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("multi", specs)));
  Restart();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(OpaqueReq("multi", specs)));
  EXPECT_TRUE(b.replayed);
  ASSERT_EQ(b.instances.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(b.instances[i].mig_uuid, a.instances[i].mig_uuid) << i;
    EXPECT_EQ(b.instances[i].profile, specs[i].profile) << i;
  }
  // A different profile set under the same id is still refused.
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("multi", {Spec("3g.20gb"), Spec("1g.5gb"), Spec("1g.5gb")}))
                  .status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("multi")));
}

TEST_F(AllocatorTest, PodOwnerIsRecorded) {
  Machine("a100-40gb:1");
  Start();
  AllocateRequest r = OpaqueReq("r1", {Spec("1g.5gb")});
  r.owner = store::Owner::Pod("ns", "pod", PodUid("uid-1"), "c0");
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(r));
  auto loaded = store_->LoadAll();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->records.size(), 1u);
  EXPECT_EQ(loaded->records[0].owner, r.owner);
  EXPECT_EQ(loaded->records[0].request_id, "r1");
  EXPECT_EQ(loaded->records[0].mig_uuid, a.instances[0].mig_uuid);
}

TEST_F(AllocatorTest, InvalidRequestsAreRejected) {
  Machine("a100-40gb:1");
  Start();
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("", {Spec("1g.5gb")})).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("request id")));
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("r", {})).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no instance")));
  AllocateRequest r = OpaqueReq("r", {Spec("1g.5gb")});
  r.owner = store::Owner();
  EXPECT_THAT(mgr_->Allocate(r).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("owner")));
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("r", {Spec("9g.99gb")})).ok());
}

TEST_F(AllocatorTest, MultiInstanceAllocationIsAllOrNothing) {
  Machine("a100-40gb:2");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(OpaqueReq("r1", {Spec("4g.20gb"), Spec("4g.20gb")})));
  EXPECT_EQ(a.instances.size(), 2u);
  EXPECT_NE(a.instances[0].gpu, a.instances[1].gpu);
  EXPECT_FALSE(
      mgr_->Allocate(OpaqueReq("r2", {Spec("3g.20gb"), Spec("3g.20gb"), Spec("1g.5gb")})).ok());
  EXPECT_EQ(LiveLayout(*fake_).size(), 2u);
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  EXPECT_EQ(CountState(InstanceState::kIdle), 2u);
}

TEST_F(AllocatorTest, ReleaseInstanceByMigUuid) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(OpaqueReq("r1", {Spec("1g.5gb"), Spec("1g.5gb")})));
  ENGINE_ASSERT_OK(mgr_->ReleaseInstance(a.instances[0].mig_uuid));
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kIdle);
  EXPECT_EQ(Get(a.instances[1].mig_uuid).state, InstanceState::kActive);
  MIGD_EXPECT_OK(mgr_->ReleaseInstance(a.instances[0].mig_uuid));  // already Idle
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  EXPECT_EQ(CountState(InstanceState::kIdle), 2u);
  EXPECT_THAT(mgr_->ReleaseInstance(MigUuid("MIG-00000000-0000-0000-0000-000000000000")),
              StatusIs(StatusCode::kNotFound, HasSubstr("MIG-")));
  Consistent();
}

TEST_F(AllocatorTest, PlanIsADryRun) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan p, mgr_->Plan({Spec("3g.20gb")}));
  EXPECT_EQ(p.instances.size(), 1u);
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  EXPECT_TRUE(mgr_->List().instances.empty());
  EXPECT_TRUE(mgr_->DemandWeights().empty());
}

// The engine holds one model object per GPU; the planner still sees one
// table on a node of identical GPUs, so its node term applies: with GPU 0
// full, a 1g on GPU 1 takes the node's last place for the 7g already asked
// for, and the plan says so.
TEST_F(AllocatorTest, NodeTermAppliesAcrossGpusOfOneModel) {
  Machine("a100-40gb:2");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("big", {Spec("7g.40gb", 0)})).status());
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan p, mgr_->Plan({Spec("1g.5gb")}));
  ASSERT_EQ(p.instances.size(), 1u);
  EXPECT_EQ(p.instances[0].gpu, GpuIndex(1));
  EXPECT_GT(p.score.node_loss, 0);
}

TEST_F(AllocatorTest, DemandMixIsLearnedWithDecay) {
  Machine("a100-40gb:1");
  opts_.demand_half_life_seconds = 60;
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb")})).status());
  clock_.Advance(std::chrono::seconds(60));
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("b", {Spec("2g.10gb")})).status());
  auto w = mgr_->DemandWeights();
  EXPECT_DOUBLE_EQ(w["2g.10gb"], 1.0);
  EXPECT_NEAR(w["1g.5gb"], 0.5, 1e-9);
}

// A MIG UUID that is its parent's UUID never becomes an instance: the commit
// refuses it naming both values and the allocation rolls back.
TEST_F(AllocatorTest, AParentGpuUuidAsMigUuidFailsTheAllocationAndRollsBack) {
  Machine("a100-40gb:1");
  ParentUuidDriver lying(faults_.get());
  UseDrivers(&lying, fake_.get());
  Start();
  const std::string gpu = fake_->ListGpus()->at(0).uuid.value();
  EXPECT_THAT(
      mgr_->Allocate(OpaqueReq("r1", {Spec("1g.5gb")})).status(),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("MIG UUID '" + gpu + "' is the UUID of its parent GPU '" + gpu + "'")));
  EXPECT_TRUE(LiveLayout(*fake_).empty()) << "the GI and CI were destroyed";
  EXPECT_TRUE(mgr_->List().instances.empty());
  EXPECT_EQ(mgr_->counters().rollbacks, 1u);
  Consistent();
  mgr_.reset();  // before `lying` goes
}

}  // namespace
}  // namespace migd::engine
