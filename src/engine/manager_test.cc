// engine::Manager against the in-process simulator (FakeGpuDriver) and
// FaultInjectingDriver: the seed rules, recovery, reconciler, faults and
// concurrency. NVML call budgets are measured in manager_sim_test.cc.
#include "engine/manager.h"

#include <random>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/fault_injecting_driver.h"
#include "engine/engine_test_util.h"
#include "engine/manager_test_fixture.h"
#include "engine/gpu_model_builder.h"
#include "mig/catalog.h"
#include "sim/fake_gpu_driver.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::engine {
namespace {

using ::migd::engine::testing::CountingObserver;
using ::migd::engine::testing::ExpectConsistent;
using ::migd::engine::testing::LiveLayout;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using Method = driver::FaultInjectingDriver::Method;
using Timing = driver::FaultInjectingDriver::Timing;

TEST_F(ManagerTest, ModelBuiltFromNvmlMatchesCatalogue) {
  Machine("a100-40gb:1,h100-80gb:1");
  Start();
  for (uint32_t g : {0u, 1u}) {
    const mig::GpuModel* built = mgr_->ModelOf(GpuIndex(g));
    ASSERT_NE(built, nullptr);
    const mig::GpuModel* cat =
        mig::Catalog::Default().FindModel(g == 0 ? "a100-40gb" : "h100-80gb");
    ASSERT_NE(cat, nullptr);
    EXPECT_EQ(built->memory_slices, cat->memory_slices);
    EXPECT_EQ(built->engine_totals, cat->engine_totals);
    for (const auto& p : cat->gi_profiles) {
      const mig::GiProfile* b = built->FindProfileById(p.id);
      ASSERT_NE(b, nullptr) << p.name;
      EXPECT_EQ(b->name, p.name);
      EXPECT_EQ(b->placements, p.placements) << p.name;
      EXPECT_EQ(b->instance_count, p.instance_count) << p.name;
      EXPECT_EQ(b->engines, p.engines) << p.name;
    }
  }
}

TEST_F(ManagerTest, AllocateCreatesActiveInstanceAndPublishes) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("r1", {Spec("3g.20gb")})));
  ASSERT_EQ(a.instances.size(), 1u);
  EXPECT_EQ(a.instances[0].state, InstanceState::kActive);
  EXPECT_EQ(a.stages[0], planner::Stage::kFree);
  EXPECT_FALSE(a.instances[0].mig_uuid.value().empty());
  EXPECT_EQ(obs_.publishes(), 1);
  EXPECT_EQ(obs_.published().count(a.instances[0].mig_uuid.value()), 1u);
  EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
  Consistent();
}

TEST_F(ManagerTest, ActiveIsNeverReclaimed) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(Req("r1", {Spec("1g.5gb", 0, mig::Placement{4, 1})})));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult r, mgr_->Reclaim({}));
  EXPECT_TRUE(r.destroyed.empty());
  // A request whose placement overlaps the Active instance is refused.
  EXPECT_THAT(mgr_->Allocate(Req("r2", {Spec("3g.20gb", 0, mig::Placement{4, 4})})).status(),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("")));
  // A full-GPU request too.
  EXPECT_FALSE(mgr_->Allocate(Req("r3", {Spec("7g.40gb")})).ok());
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kActive);
  EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
  EXPECT_EQ(faults_->CallCount(Method::kDestroyGi), 0);
  Consistent();
}

TEST_F(ManagerTest, ReleaseMakesIdleAndLeavesGiCiAndCdiUntouched) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("r1", {Spec("2g.10gb")})));
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

TEST_F(ManagerTest, SameGpuProfilePlacementReusesIdleInstanceAndMigUuid) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(Req("r1", {Spec("2g.10gb", 0, mig::Placement{2, 2})})));
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  const int creates = faults_->CallCount(Method::kCreateGi);
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b,
                            mgr_->Allocate(Req("r2", {Spec("2g.10gb", 0, mig::Placement{2, 2})})));
  EXPECT_EQ(b.stages[0], planner::Stage::kReuse);
  EXPECT_EQ(b.instances[0].mig_uuid, a.instances[0].mig_uuid);
  EXPECT_EQ(b.instances[0].gi_id, a.instances[0].gi_id);
  EXPECT_EQ(faults_->CallCount(Method::kCreateGi), creates);
  EXPECT_EQ(Get(b.instances[0].mig_uuid).owner, store::Owner::Opaque("owner-r2"));
  EXPECT_EQ(mgr_->counters().reuses, 1u);
  Consistent();
}

TEST_F(ManagerTest, RequestWithoutPlacementReusesIdleOfThatProfile) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("r1", {Spec("1g.5gb")})));
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(Req("r2", {Spec("1g.5gb")})));
  EXPECT_EQ(b.instances[0].mig_uuid, a.instances[0].mig_uuid);
}

TEST_F(ManagerTest, SchedulerPlacementOverlappingIdleDestroysOnlyThose) {
  Machine("a100-40gb:1");
  Start();
  std::map<uint32_t, MigUuid> idle;
  for (uint32_t s = 0; s < 7; ++s) {
    const std::string id = "r" + std::to_string(s);
    MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                              mgr_->Allocate(Req(id, {Spec("1g.5gb", 0, mig::Placement{s, 1})})));
    idle[s] = a.instances[0].mig_uuid;
    ENGINE_ASSERT_OK(mgr_->Release(id));
  }
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation big,
                            mgr_->Allocate(Req("big", {Spec("3g.20gb", 0, mig::Placement{4, 4})})));
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

TEST_F(ManagerTest, FailedAllocationDestroysCreatedAndReturnsReusedToIdle) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(Req("r1", {Spec("1g.5gb", 0, mig::Placement{0, 1})})));
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  const auto before = LiveLayout(*fake_);
  // Two creates and one reuse; the second CI create fails.
  faults_->FailNthCall(Method::kCreateCi, 2, InternalError("injected CI failure"));
  auto r = mgr_->Allocate(Req("r2", {Spec("1g.5gb", 0, mig::Placement{0, 1}),
                                     Spec("1g.5gb", 0, mig::Placement{1, 1}),
                                     Spec("1g.5gb", 0, mig::Placement{2, 1})}));
  EXPECT_THAT(r.status(), StatusIs(StatusCode::kInternal, HasSubstr("injected")));
  EXPECT_EQ(LiveLayout(*fake_), before);
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kIdle);
  EXPECT_EQ(mgr_->List().instances.size(), 1u);
  EXPECT_EQ(mgr_->counters().rollbacks, 1u);
  Consistent();
  // The request id is free again.
  MIGD_EXPECT_OK(mgr_->Allocate(Req("r2", {Spec("1g.5gb", 0, mig::Placement{0, 1})})).status());
}

TEST_F(ManagerTest, FailedPublishRollsBack) {
  Machine("a100-40gb:1");
  Start();
  obs_.FailPublish(UnavailableError("cdi dir missing"));
  EXPECT_THAT(mgr_->Allocate(Req("r1", {Spec("2g.10gb")})).status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("cdi")));
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  Consistent();
}

TEST_F(ManagerTest, NvmlErrorsFailClosedIntoErrorAndReconcilerRetries) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(Req("r1", {Spec("3g.20gb", 0, mig::Placement{4, 4})})));
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  faults_->FailAlways(Method::kDestroyGi, FailedPreconditionError("NVML_ERROR_GPU_IS_LOST"));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult rr, mgr_->Reclaim({}));
  ASSERT_EQ(rr.failed.size(), 1u);
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kError);
  // Not reused, its slices stay blocked.
  EXPECT_FALSE(mgr_->Allocate(Req("r2", {Spec("3g.20gb", 0, mig::Placement{4, 4})})).ok());
  auto loaded = store_->LoadAll();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->records.size(), 1u);
  EXPECT_EQ(loaded->records[0].state, store::RecordState::kError);
  MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport rep, mgr_->ReconcileOnce());
  EXPECT_EQ(rep.errors_remaining, 1u);
  EXPECT_EQ(obs_.unpublishes(), 0) << "CDI entry goes only after the destroy";
  faults_->ClearAll();
  MIGD_ASSERT_OK_AND_ASSIGN(rep, mgr_->ReconcileOnce());
  EXPECT_EQ(rep.errors_cleaned, 1u);
  EXPECT_TRUE(mgr_->List().instances.empty());
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  EXPECT_EQ(obs_.unpublishes(), 1);
  Consistent();
}

TEST_F(ManagerTest, ProcessOnIdleInstanceKeepsItInError) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("r1", {Spec("1g.5gb")})));
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  ENGINE_ASSERT_OK(fake_->AttachProcess(a.instances[0].mig_uuid, 77, 1 << 20));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult rr, mgr_->Reclaim({}));
  EXPECT_EQ(rr.failed.size(), 1u);
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kError);
  ENGINE_ASSERT_OK(fake_->DetachProcess(a.instances[0].mig_uuid, 77));
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_TRUE(LiveLayout(*fake_).empty());
}

TEST_F(ManagerTest, AllocateIsIdempotentByRequestId) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("r1", {Spec("1g.5gb")})));
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(Req("r1", {Spec("1g.5gb")})));
  EXPECT_TRUE(b.replayed);
  EXPECT_EQ(b.instances[0].mig_uuid, a.instances[0].mig_uuid);
  EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
  AllocateRequest other = Req("r1", {Spec("1g.5gb")});
  other.owner = store::Owner::Opaque("someone-else");
  EXPECT_THAT(mgr_->Allocate(other).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("r1")));
  // Same owner and count, another profile / placement: also a different request.
  EXPECT_THAT(mgr_->Allocate(Req("r1", {Spec("2g.10gb")})).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("use a new request id")));
  const mig::Placement elsewhere{a.instances[0].placement.start == 0 ? 1u : 0u, 1};
  EXPECT_THAT(mgr_->Allocate(Req("r1", {Spec("1g.5gb", 0, elsewhere)})).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("r1")));
  // An alias or a pin that matches what was allocated is the same request.
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation c, mgr_->Allocate(Req("r1", {Spec("1g.5gb", 0, a.instances[0].placement)})));
  EXPECT_TRUE(c.replayed);
}

TEST_F(ManagerTest, ReplayAfterRestartAnswersInRequestOrder) {
  Machine("a100-40gb:1");
  Start();
  // Record keys sort by placement; the request order differs from it.
  const std::vector<InstanceSpec> specs = {Spec("3g.20gb"), Spec("1g.5gb"), Spec("2g.10gb")};
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("multi", specs)));
  Restart();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(Req("multi", specs)));
  EXPECT_TRUE(b.replayed);
  ASSERT_EQ(b.instances.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(b.instances[i].mig_uuid, a.instances[i].mig_uuid) << i;
    EXPECT_EQ(b.instances[i].profile, specs[i].profile) << i;
  }
  // A different profile set under the same id is still refused.
  EXPECT_THAT(mgr_->Allocate(Req("multi", {Spec("3g.20gb"), Spec("1g.5gb"), Spec("1g.5gb")}))
                  .status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("multi")));
}

TEST_F(ManagerTest, PodOwnerIsRecorded) {
  Machine("a100-40gb:1");
  Start();
  AllocateRequest r = Req("r1", {Spec("1g.5gb")});
  r.owner = store::Owner::Pod("ns", "pod", PodUid("uid-1"), "c0");
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(r));
  auto loaded = store_->LoadAll();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->records.size(), 1u);
  EXPECT_EQ(loaded->records[0].owner, r.owner);
  EXPECT_EQ(loaded->records[0].request_id, "r1");
  EXPECT_EQ(loaded->records[0].mig_uuid, a.instances[0].mig_uuid);
}

TEST_F(ManagerTest, InvalidRequestsAreRejected) {
  Machine("a100-40gb:1");
  Start();
  EXPECT_THAT(mgr_->Allocate(Req("", {Spec("1g.5gb")})).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("request id")));
  EXPECT_THAT(mgr_->Allocate(Req("r", {})).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no instance")));
  AllocateRequest r = Req("r", {Spec("1g.5gb")});
  r.owner = store::Owner();
  EXPECT_THAT(mgr_->Allocate(r).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("owner")));
  EXPECT_FALSE(mgr_->Allocate(Req("r", {Spec("9g.99gb")})).ok());
}

TEST_F(ManagerTest, MultiInstanceAllocationIsAllOrNothing) {
  Machine("a100-40gb:2");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(Req("r1", {Spec("4g.20gb"), Spec("4g.20gb")})));
  EXPECT_EQ(a.instances.size(), 2u);
  EXPECT_NE(a.instances[0].gpu, a.instances[1].gpu);
  EXPECT_FALSE(mgr_->Allocate(Req("r2", {Spec("3g.20gb"), Spec("3g.20gb"), Spec("1g.5gb")})).ok());
  EXPECT_EQ(LiveLayout(*fake_).size(), 2u);
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  EXPECT_EQ(CountState(InstanceState::kIdle), 2u);
}

TEST_F(ManagerTest, ReleaseInstanceByMigUuid) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(Req("r1", {Spec("1g.5gb"), Spec("1g.5gb")})));
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

TEST_F(ManagerTest, ReclaimByGpuAndProfile) {
  Machine("a100-40gb:2");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("a", {Spec("1g.5gb", 0)})).status());
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("b", {Spec("2g.10gb", 0)})).status());
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("c", {Spec("1g.5gb", 1)})).status());
  for (const char* id : {"a", "b", "c"}) ENGINE_ASSERT_OK(mgr_->Release(id));
  ReclaimFilter f;
  f.gpu = GpuIndex(0);
  f.profile = "1g.5gb";
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult r, mgr_->Reclaim(f));
  EXPECT_EQ(r.destroyed.size(), 1u);
  EXPECT_EQ(CountState(InstanceState::kIdle), 2u);
  MIGD_ASSERT_OK_AND_ASSIGN(r, mgr_->Reclaim({}));
  EXPECT_EQ(r.destroyed.size(), 2u);
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  Consistent();
}

TEST_F(ManagerTest, PlanIsADryRun) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan p, mgr_->Plan({Spec("3g.20gb")}));
  EXPECT_EQ(p.instances.size(), 1u);
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  EXPECT_TRUE(mgr_->List().instances.empty());
  EXPECT_TRUE(mgr_->DemandWeights().empty());
}

TEST_F(ManagerTest, DemandMixIsLearnedWithDecay) {
  Machine("a100-40gb:1");
  opts_.demand_half_life_seconds = 60;
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("a", {Spec("1g.5gb")})).status());
  clock_.Advance(std::chrono::seconds(60));
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("b", {Spec("2g.10gb")})).status());
  auto w = mgr_->DemandWeights();
  EXPECT_DOUBLE_EQ(w["2g.10gb"], 1.0);
  EXPECT_NEAR(w["1g.5gb"], 0.5, 1e-9);
}

// ---- Recovery ----

TEST_F(ManagerTest, CleanRestartRestoresActiveAndIdleWithMigUuids) {
  Machine("a100-40gb:2");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", {Spec("3g.20gb", 0)})));
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(Req("b", {Spec("2g.10gb", 1)})));
  ENGINE_ASSERT_OK(mgr_->Release("b"));
  const auto before = mgr_->List().instances;
  const auto layout = LiveLayout(*fake_);
  Restart();
  const auto after = mgr_->List().instances;
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].mig_uuid, before[i].mig_uuid);
    EXPECT_EQ(after[i].state, before[i].state);
    EXPECT_EQ(after[i].owner, before[i].owner);
    EXPECT_EQ(after[i].gi_id, before[i].gi_id);
  }
  EXPECT_EQ(LiveLayout(*fake_), layout);
  EXPECT_EQ(mgr_->recovery_summary().active, 1u);
  EXPECT_EQ(mgr_->recovery_summary().idle, 1u);
  // Idempotency and release survive the restart.
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation again, mgr_->Allocate(Req("a", {Spec("3g.20gb", 0)})));
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(again.instances[0].mig_uuid, a.instances[0].mig_uuid);
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  // The Idle one is reused after the restart.
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation c, mgr_->Allocate(Req("c", {Spec("2g.10gb", 1)})));
  EXPECT_EQ(c.instances[0].mig_uuid, b.instances[0].mig_uuid);
  Consistent();
}

TEST_F(ManagerTest, RecordsOfAnotherBootAreDiscarded) {
  Machine("a100-40gb:1");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("a", {Spec("1g.5gb")})).status());
  mgr_.reset();
  fake_->Reboot();  // instances gone
  opts_.boot_id = "boot-2";
  store_.reset();
  store::RecordStoreOptions so;
  so.boot_id = "boot-2";
  auto st = store::RecordStore::Open(dir_->Join("state"), clock_, so);
  ASSERT_TRUE(st.ok());
  store_ = std::move(*st);
  Start();
  EXPECT_EQ(mgr_->recovery_summary().other_boot_discarded, 1u);
  EXPECT_TRUE(mgr_->List().instances.empty());
  auto loaded = store_->LoadAll();
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded->records.empty());
}

TEST_F(ManagerTest, UnknownInstancesArePreservedAsForeign) {
  Machine("a100-40gb:1");
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(9), {0, 4}));
  ENGINE_ASSERT_OK(fake_->CreateCi(GpuIndex(0), gi.id).status());
  const auto layout = LiveLayout(*fake_);
  Start();
  ASSERT_EQ(mgr_->List().foreign.size(), 1u);
  EXPECT_TRUE(mgr_->List().instances.empty());
  // It blocks its slices and is never reclaimed.
  EXPECT_FALSE(mgr_->Allocate(Req("r", {Spec("3g.20gb", 0, mig::Placement{0, 4})})).ok());
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("r2", {Spec("3g.20gb")})));
  EXPECT_EQ(a.instances[0].placement, (mig::Placement{4, 4}));
  ENGINE_ASSERT_OK(mgr_->Reclaim({}).status());
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_EQ(LiveLayout(*fake_).size(), 2u);
  Consistent();
}

TEST_F(ManagerTest, AdoptFlagClaimsUnknownPairsAsIdle) {
  Machine("a100-40gb:1");
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(9), {0, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, fake_->CreateCi(GpuIndex(0), gi.id));
  opts_.adopt_existing_mig_instances = true;
  Start();
  EXPECT_TRUE(mgr_->List().foreign.empty());
  EXPECT_EQ(Get(ci.mig_uuid).state, InstanceState::kIdle);
  EXPECT_EQ(mgr_->recovery_summary().adopted, 1u);
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(Req("r", {Spec("3g.20gb", 0, mig::Placement{0, 4})})));
  EXPECT_EQ(a.instances[0].mig_uuid, ci.mig_uuid);
  Consistent();
}

TEST_F(ManagerTest, OrphanGisAreDestroyedOnlyOnIdleGpus) {
  Machine("a100-40gb:2");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("busy", {Spec("1g.5gb", 0, mig::Placement{0, 1})})).status());
  mgr_.reset();
  ENGINE_ASSERT_OK(fake_->CreateGi(GpuIndex(0), GiProfileId(9), {4, 4}).status());  // no CI
  ENGINE_ASSERT_OK(fake_->CreateGi(GpuIndex(1), GiProfileId(9), {4, 4}).status());  // no CI
  opts_.adopt_existing_mig_instances = true;
  Restart();
  EXPECT_EQ(mgr_->recovery_summary().orphan_gis_destroyed, 1u);
  ASSERT_EQ(mgr_->List().foreign.size(), 1u);
  EXPECT_EQ(mgr_->List().foreign[0].gpu, GpuIndex(0));
  EXPECT_EQ(fake_->ListGpuInstances(GpuIndex(1))->size(), 0u);
  EXPECT_EQ(fake_->ListGpuInstances(GpuIndex(0))->size(), 2u);
}

TEST_F(ManagerTest, WithoutAdoptFlagOrphanGisArePreserved) {
  Machine("a100-40gb:1");
  ENGINE_ASSERT_OK(fake_->CreateGi(GpuIndex(0), GiProfileId(9), {4, 4}).status());
  Start();
  EXPECT_EQ(mgr_->List().foreign.size(), 1u);
  EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
}

TEST_F(ManagerTest, ContradictingRecordStopsStartupWithHardwareUntouched) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", {Spec("1g.5gb")})));
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("b", {Spec("2g.10gb")})).status());
  ENGINE_ASSERT_OK(mgr_->Release("b"));
  mgr_.reset();
  // Rewrite a's record with a wrong CI id.
  auto loaded = store_->LoadAll();
  ASSERT_TRUE(loaded.ok());
  store::Record bad;
  for (const auto& r : loaded->records) {
    if (r.mig_uuid == a.instances[0].mig_uuid) bad = r;
  }
  bad.ci_id = NvmlCiId(5);
  ENGINE_ASSERT_OK(store_->Put(bad).status());
  const auto layout = LiveLayout(*fake_);
  const int destroys = faults_->CallCount(Method::kDestroyGi) + faults_->CallCount(Method::kDestroyCi);
  const int creates = faults_->CallCount(Method::kCreateGi) + faults_->CallCount(Method::kCreateCi);
  store_.reset();
  OpenStore();
  auto m = Make();
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status(), StatusIs(StatusCode::kFailedPrecondition,
                                   HasSubstr("CI id 5")));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(a.instances[0].gpu_uuid.value()));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(a.instances[0].mig_uuid.value()));
  EXPECT_EQ(LiveLayout(*fake_), layout);
  EXPECT_EQ(faults_->CallCount(Method::kDestroyGi) + faults_->CallCount(Method::kDestroyCi),
            destroys);
  EXPECT_EQ(faults_->CallCount(Method::kCreateGi) + faults_->CallCount(Method::kCreateCi),
            creates);
}

TEST_F(ManagerTest, ActiveRecordWhoseInstanceVanishedStopsStartup) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", {Spec("1g.5gb")})));
  mgr_.reset();
  ENGINE_ASSERT_OK(fake_->DestroyCi(GpuIndex(0), a.instances[0].gi_id, a.instances[0].ci_id));
  ENGINE_ASSERT_OK(fake_->DestroyGi(GpuIndex(0), a.instances[0].gi_id));
  store_.reset();
  OpenStore();
  auto m = Make();
  EXPECT_THAT(m.status(), StatusIs(StatusCode::kFailedPrecondition,
                                   HasSubstr(a.instances[0].mig_uuid.value())));
}

TEST_F(ManagerTest, IntentWithLiveGiIsDestroyedOrAdopted) {
  for (bool adopt : {false, true}) {
    SCOPED_TRACE(adopt ? "adopt" : "destroy");
    dir_ = std::make_unique<migd::testing::TempDir>();
    Machine("a100-40gb:1");
    // Simulate a crash after CreateGi/CreateCi, before the commit.
    store::Record intent;
    MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, fake_->ListGpus());
    intent.key = {gpus[0].uuid, GiProfileId(14), {2, 2}};
    intent.phase = store::RecordPhase::kIntent;
    intent.state = store::RecordState::kCreating;
    intent.profile_name = "2g.10gb";
    ENGINE_ASSERT_OK(store_->Put(intent).status());
    MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(14), {2, 2}));
    ENGINE_ASSERT_OK(fake_->CreateCi(GpuIndex(0), gi.id).status());
    store_.reset();
    OpenStore();
    opts_.adopt_complete_intents = adopt;
    Start();
    if (adopt) {
      EXPECT_EQ(mgr_->recovery_summary().intents_adopted, 1u);
      EXPECT_EQ(CountState(InstanceState::kIdle), 1u);
      EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
    } else {
      EXPECT_EQ(mgr_->recovery_summary().intents_destroyed, 1u);
      EXPECT_TRUE(LiveLayout(*fake_).empty());
    }
    Consistent();
    mgr_.reset();
    store_.reset();
  }
}

TEST_F(ManagerTest, IntentWithoutGiIsRemoved) {
  Machine("a100-40gb:1");
  store::Record intent;
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, fake_->ListGpus());
  intent.key = {gpus[0].uuid, GiProfileId(14), {2, 2}};
  intent.phase = store::RecordPhase::kIntent;
  intent.state = store::RecordState::kCreating;
  intent.profile_name = "2g.10gb";
  ENGINE_ASSERT_OK(store_->Put(intent).status());
  Start();
  EXPECT_EQ(mgr_->recovery_summary().intents_removed, 1u);
  Consistent();
}

// An owner source like the Kubernetes ones: reports owners by MIG UUID.
class FakeOwnerSource final : public OwnerSource {
 public:
  std::string_view name() const override { return "fake-k8s"; }
  StatusOr<std::vector<OwnedInstance>> ActiveOwners(const std::vector<store::Record>&) override {
    if (!status.ok()) return status;
    return owned;
  }
  std::vector<OwnedInstance> owned;
  Status status;
};

TEST_F(ManagerTest, OwnerSourceDecidesActiveAndAdoptsUnrecordedOwnedInstances) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation gone, mgr_->Allocate(Req("gone", {Spec("1g.5gb", 0, mig::Placement{0, 1})})));
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation kept,
                            mgr_->Allocate(Req("kept", {Spec("2g.10gb", 0, mig::Placement{2, 2})})));
  mgr_.reset();
  // An instance realised by someone else (e.g. HAMi) for a live pod.
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(9), {4, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, fake_->CreateCi(GpuIndex(0), gi.id));
  FakeOwnerSource k8s;
  OwnedInstance o1;
  o1.mig_uuid = kept.instances[0].mig_uuid;
  o1.owner = store::Owner::Pod("ns", "p1", PodUid("u1"), "c");
  o1.request_id = "kept";
  OwnedInstance o2;
  o2.mig_uuid = ci.mig_uuid;
  o2.owner = store::Owner::Pod("ns", "p2", PodUid("u2"), "c");
  o2.placement = mig::Placement{4, 4};
  o2.gi_id = gi.id;
  k8s.owned = {o1, o2};
  store_.reset();
  OpenStore();
  MIGD_ASSERT_OK_AND_ASSIGN(mgr_, Manager::Create(opts_, *faults_, *store_, clock_, k8s, &obs_));
  EXPECT_EQ(Get(gone.instances[0].mig_uuid).state, InstanceState::kIdle);  // pod gone
  EXPECT_EQ(Get(kept.instances[0].mig_uuid).state, InstanceState::kActive);
  EXPECT_EQ(Get(kept.instances[0].mig_uuid).owner, o1.owner);
  EXPECT_EQ(Get(ci.mig_uuid).state, InstanceState::kActive);
  EXPECT_EQ(mgr_->recovery_summary().adopted, 1u);
  Consistent();
}

TEST_F(ManagerTest, OwnerSourceErrorsAndMismatchesStopStartup) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", {Spec("1g.5gb")})));
  mgr_.reset();
  FakeOwnerSource k8s;
  k8s.status = UnavailableError("API server unreachable");
  EXPECT_THAT(Manager::Create(opts_, *faults_, *store_, clock_, k8s, &obs_).status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("fake-k8s")));
  k8s.status = OkStatus();
  OwnedInstance o;
  o.mig_uuid = a.instances[0].mig_uuid;
  o.owner = store::Owner::Opaque("x");
  o.placement = mig::Placement{0, 1};  // wrong on purpose unless it really is at 0
  if (a.instances[0].placement == *o.placement) o.placement = mig::Placement{1, 1};
  k8s.owned = {o};
  const auto layout = LiveLayout(*fake_);
  EXPECT_THAT(Manager::Create(opts_, *faults_, *store_, clock_, k8s, &obs_).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("owner says placement")));
  OwnedInstance missing;
  missing.mig_uuid = MigUuid("MIG-11111111-2222-3333-4444-555555555555");
  missing.owner = store::Owner::Opaque("y");
  k8s.owned = {missing};
  EXPECT_THAT(Manager::Create(opts_, *faults_, *store_, clock_, k8s, &obs_).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("no such MIG device")));
  EXPECT_EQ(LiveLayout(*fake_), layout);
}

// ---- Reconciler ----

TEST_F(ManagerTest, IdleTtlReclaimsOnlyExpiredIdle) {
  Machine("a100-40gb:1");
  opts_.idle_ttl = std::chrono::minutes(10);
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("old", {Spec("1g.5gb")})).status());
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("new", {Spec("1g.5gb")})).status());
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("active", {Spec("1g.5gb")})).status());
  ENGINE_ASSERT_OK(mgr_->Release("old"));
  clock_.Advance(std::chrono::minutes(6));
  ENGINE_ASSERT_OK(mgr_->Release("new"));
  MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.ttl_reclaimed, 0u);
  clock_.Advance(std::chrono::minutes(5));
  MIGD_ASSERT_OK_AND_ASSIGN(r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.ttl_reclaimed, 1u);
  EXPECT_EQ(CountState(InstanceState::kIdle), 1u);
  clock_.Advance(std::chrono::hours(1));
  MIGD_ASSERT_OK_AND_ASSIGN(r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.ttl_reclaimed, 1u);
  EXPECT_EQ(CountState(InstanceState::kActive), 1u);
  EXPECT_EQ(CountState(InstanceState::kIdle), 0u);
  Consistent();
}

TEST_F(ManagerTest, MaxIdlePerGpuReclaimsLeastRecentlyUsed) {
  Machine("a100-40gb:1");
  opts_.max_idle_per_gpu = 1;
  Start();
  std::vector<MigUuid> uuids;
  for (int i = 0; i < 3; ++i) {
    const std::string id = "r" + std::to_string(i);
    MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req(id, {Spec("1g.5gb")})));
    uuids.push_back(a.instances[0].mig_uuid);
  }
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(std::chrono::seconds(10));
    ENGINE_ASSERT_OK(mgr_->Release("r" + std::to_string(i)));
  }
  MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.cap_reclaimed, 2u);
  EXPECT_EQ(Get(uuids[2]).state, InstanceState::kIdle);
  EXPECT_EQ(Get(uuids[0]).state, InstanceState::kNone);
  EXPECT_EQ(Get(uuids[1]).state, InstanceState::kNone);
  Consistent();
}

TEST_F(ManagerTest, WarmPoolKeepsIdleReadyOnlyInFreeSpace) {
  Machine("a100-40gb:1");
  opts_.warm_pool["2g.10gb"] = 2;
  opts_.idle_ttl = std::chrono::seconds(1);
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.warm_created, 2u);
  EXPECT_EQ(CountState(InstanceState::kIdle), 2u);
  // TTL keeps the pool's minimum.
  clock_.Advance(std::chrono::hours(1));
  MIGD_ASSERT_OK_AND_ASSIGN(r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.ttl_reclaimed, 0u);
  // A request takes pool instances; the pool refills only where space is free.
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("big", {Spec("4g.20gb")})).status());
  MIGD_ASSERT_OK_AND_ASSIGN(r, mgr_->ReconcileOnce());
  EXPECT_EQ(CountState(InstanceState::kActive), 1u);
  const size_t idle = CountState(InstanceState::kIdle);
  EXPECT_LE(idle, 2u);
  // A request never loses to the pool: the pool's instances are reclaimable.
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("b2", {Spec("3g.20gb")})).status());
  Consistent();
}

TEST_F(ManagerTest, DriftIsDetectedAndNeverDestroysForeign) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(Req("a", {Spec("1g.5gb", 0, mig::Placement{0, 1})})));
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  // Someone destroys our Idle instance and creates their own.
  ENGINE_ASSERT_OK(fake_->DestroyCi(GpuIndex(0), a.instances[0].gi_id, a.instances[0].ci_id));
  ENGINE_ASSERT_OK(fake_->DestroyGi(GpuIndex(0), a.instances[0].gi_id));
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(9), {4, 4}));
  ENGINE_ASSERT_OK(fake_->CreateCi(GpuIndex(0), gi.id).status());
  MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.drift_vanished, 1u);
  EXPECT_EQ(r.drift_foreign_appeared, 1u);
  EXPECT_EQ(mgr_->counters().drift_vanished, 1u);
  EXPECT_TRUE(mgr_->List().instances.empty());
  EXPECT_EQ(mgr_->List().foreign.size(), 1u);
  MIGD_ASSERT_OK_AND_ASSIGN(r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.drift_foreign_appeared, 0u);
  EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
  EXPECT_FALSE(mgr_->Allocate(Req("x", {Spec("3g.20gb", 0, mig::Placement{4, 4})})).ok());
  Consistent();
}

TEST_F(ManagerTest, ReconcilerThreadStartsAndStopsPromptly) {
  Machine("a100-40gb:1");
  opts_.reconcile_interval = std::chrono::hours(1);
  Start();
  mgr_->StartReconciler();
  mgr_->StartReconciler();  // idempotent
  mgr_->StopReconciler();   // wakes the thread at once, well before an hour
  mgr_->StopReconciler();
  SUCCEED();
}

// ---- Fault injection at every mutating call site ----

struct FaultCase {
  Method method;
  Status status;
  Timing timing;
};

TEST_F(ManagerTest, FaultInjectionAtEveryMutatingCallSite) {
  const std::vector<FaultCase> cases = {
      {Method::kCreateGi, ResourceExhaustedError("NVML_ERROR_INSUFFICIENT_RESOURCES"),
       Timing::kInsteadOfCall},
      {Method::kCreateGi, UnknownError("NVML_ERROR_UNKNOWN (lost reply)"), Timing::kAfterCall},
      {Method::kCreateCi, ResourceExhaustedError("NVML_ERROR_INSUFFICIENT_RESOURCES"),
       Timing::kInsteadOfCall},
      {Method::kCreateCi, UnknownError("NVML_ERROR_UNKNOWN (lost reply)"), Timing::kAfterCall},
      {Method::kDestroyCi, FailedPreconditionError("NVML_ERROR_IN_USE"), Timing::kInsteadOfCall},
      {Method::kDestroyCi, UnknownError("NVML_ERROR_UNKNOWN (lost reply)"), Timing::kAfterCall},
      {Method::kDestroyGi, FailedPreconditionError("NVML_ERROR_IN_USE"), Timing::kInsteadOfCall},
      {Method::kDestroyGi, UnknownError("NVML_ERROR_GPU_IS_LOST"), Timing::kAfterCall},
      {Method::kListGpuInstances, UnknownError("NVML_ERROR_UNKNOWN"), Timing::kInsteadOfCall},
  };
  int scenario_runs = 0;
  for (const FaultCase& fc : cases) {
    for (int nth = 1; nth <= 4; ++nth) {
      SCOPED_TRACE(std::string(driver::FaultInjectingDriver::MethodName(fc.method)) + " call " +
                   std::to_string(nth) +
                   (fc.timing == Timing::kAfterCall ? " after" : " instead"));
      mgr_.reset();
      store_.reset();
      dir_ = std::make_unique<migd::testing::TempDir>();
      Machine("a100-40gb:1");
      Start();
      // Baseline: an Active and an Idle instance.
      MIGD_ASSERT_OK_AND_ASSIGN(
          Allocation act, mgr_->Allocate(Req("act", {Spec("1g.5gb", 0, mig::Placement{0, 1})})));
      ENGINE_ASSERT_OK(mgr_->Allocate(Req("idle", {Spec("1g.5gb", 0, mig::Placement{5, 1})}))
                         .status());
      ENGINE_ASSERT_OK(mgr_->Release("idle"));
      faults_->FailNthCall(fc.method, nth, fc.status, fc.timing);
      // allocate (reclaim + create) / release / reclaim / restart (recovery).
      auto a = mgr_->Allocate(Req("x", {Spec("3g.20gb", 0, mig::Placement{4, 4}),
                                        Spec("1g.5gb", 0, mig::Placement{1, 1})}));
      if (a.ok()) {
        MIGD_EXPECT_OK(mgr_->Release("x"));
      }
      auto rr = mgr_->Reclaim({});
      (void)rr;
      auto rec = mgr_->ReconcileOnce();
      (void)rec;
      // The Active instance is never destroyed.
      EXPECT_EQ(Get(act.instances[0].mig_uuid).state, InstanceState::kActive);
      // No GI/CI without a record: every live GI is tracked (records match).
      faults_->ClearAll();
      ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
      EXPECT_EQ(CountState(InstanceState::kError), 0u) << "Error cleaned once the fault clears";
      Consistent();
      Restart();
      EXPECT_TRUE(mgr_->List().foreign.empty());
      EXPECT_EQ(Get(act.instances[0].mig_uuid).state, InstanceState::kActive);
      Consistent();
      ++scenario_runs;
    }
  }
  EXPECT_EQ(scenario_runs, static_cast<int>(cases.size()) * 4);
}

TEST_F(ManagerTest, FaultDuringRecoveryDestroyKeepsErrorAndRetries) {
  Machine("a100-40gb:1");
  store::Record intent;
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, fake_->ListGpus());
  intent.key = {gpus[0].uuid, GiProfileId(14), {2, 2}};
  intent.phase = store::RecordPhase::kIntent;
  intent.state = store::RecordState::kCreating;
  intent.profile_name = "2g.10gb";
  ENGINE_ASSERT_OK(store_->Put(intent).status());
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, fake_->CreateGi(GpuIndex(0), GiProfileId(14), {2, 2}));
  faults_->FailAlways(Method::kDestroyGi, UnknownError("NVML_ERROR_UNKNOWN"));
  Start();
  EXPECT_EQ(CountState(InstanceState::kError), 1u);
  faults_->ClearAll();
  MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.errors_cleaned, 1u);
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  Consistent();
}

// ---- Concurrency ----

TEST_F(ManagerTest, ConcurrentAllocateAndReleaseKeepInvariants) {
  Machine("a100-40gb:4");
  Start();
  constexpr int kThreads = 8;
  constexpr int kOps = 60;
  const std::vector<std::string> profiles = {"1g.5gb", "2g.10gb", "3g.20gb", "1g.5gb"};
  std::atomic<int> ok{0};
  std::atomic<int> exhausted{0};
  std::atomic<int> other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      std::vector<std::string> held;
      for (int i = 0; i < kOps; ++i) {
        if (!held.empty() && (rng() % 2 == 0)) {
          const size_t pick = rng() % held.size();
          Status rs = mgr_->Release(held[pick]);
          if (!rs.ok()) {
            ++other;
            ADD_FAILURE() << rs;
          }
          held.erase(held.begin() + static_cast<long>(pick));
          continue;
        }
        const std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
        std::vector<InstanceSpec> specs = {Spec(profiles[rng() % profiles.size()])};
        if (rng() % 4 == 0) specs.push_back(Spec("1g.5gb"));
        auto a = mgr_->Allocate(Req(id, specs));
        if (a.ok()) {
          ++ok;
          held.push_back(id);
        } else if (a.status().code() == StatusCode::kResourceExhausted) {
          ++exhausted;
        } else {
          ++other;
          ADD_FAILURE() << a.status();
        }
        if (i % 20 == 0 && t == 0) {
          auto r = mgr_->ReconcileOnce();
          (void)r;
        }
      }
      for (const auto& id : held) {
        if (!mgr_->Release(id).ok()) ++other;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(CountState(InstanceState::kActive), 0u);
  EXPECT_EQ(CountState(InstanceState::kError), 0u);
  Consistent();
  ENGINE_ASSERT_OK(mgr_->Reclaim({}).status());
  EXPECT_TRUE(LiveLayout(*fake_).empty());
}

}  // namespace
}  // namespace migd::engine
