// Reconciler: its victim selection (pure), and its passes and thread through
// the Manager over the in-process simulator.
#include "engine/reconciler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "engine/manager_testing.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::engine::testing::LiveLayout;
using ::migd::engine::testing::OpaqueReq;
using ::migd::engine::testing::Spec;
using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Method = driver::FaultInjectingDriver::Method;

class ReconcilerTest : public testing::FakeHardwareTest {};

// Idle instances for the selection functions, by (profile, GPU, last use).
class SelectionTest : public ::testing::Test {
 protected:
  TrackedInstance* Add(const std::string& profile, uint32_t gpu, int last_used_s, uint32_t start) {
    auto inst = std::make_unique<TrackedInstance>();
    inst->id.gpu_uuid = GpuUuid("GPU-00000000-0000-0000-0000-00000000000" + std::to_string(gpu));
    inst->id.placement = {.start = start, .size = 1};
    inst->gpu = GpuIndex(gpu);
    inst->profile = profile;
    inst->state = InstanceState::kIdle;
    inst->last_used = Clock::TimePoint(std::chrono::seconds(last_used_s));
    all_.push_back(std::move(inst));
    return all_.back().get();
  }
  std::vector<TrackedInstance*> All() {
    std::vector<TrackedInstance*> out;
    for (auto& i : all_) out.push_back(i.get());
    return out;
  }
  std::vector<std::unique_ptr<TrackedInstance>> all_;
};

TEST_F(SelectionTest, ExpiredAreTheIdleUnusedForTheTtlOldestFirst) {
  TrackedInstance* old = Add("1g.5gb", 0, 100, 0);
  TrackedInstance* older = Add("1g.5gb", 0, 50, 1);
  Add("1g.5gb", 0, 950, 2);  // used 50 s ago
  ManagerPolicy p;
  EXPECT_TRUE(SelectExpired(All(), p, Clock::TimePoint(std::chrono::seconds(1000))).empty())
      << "no TTL, nothing expires";
  p.idle_ttl = std::chrono::seconds(100);
  EXPECT_THAT(SelectExpired(All(), p, Clock::TimePoint(std::chrono::seconds(1000))),
              ElementsAre(older, old));
}

TEST_F(SelectionTest, ExpiredKeepTheWarmPoolMinimumOfEachProfile) {
  TrackedInstance* a = Add("1g.5gb", 0, 10, 0);
  Add("1g.5gb", 0, 20, 1);
  Add("2g.10gb", 0, 30, 2);
  ManagerPolicy p;
  p.idle_ttl = std::chrono::seconds(1);
  p.warm_pool["1g.5gb"] = 1;
  p.warm_pool["2g.10gb"] = 1;
  EXPECT_THAT(SelectExpired(All(), p, Clock::TimePoint(std::chrono::hours(1))), ElementsAre(a));
}

TEST_F(SelectionTest, OverCapAreTheLeastRecentlyUsedBeyondTheCapOfEachGpu) {
  TrackedInstance* g0_old = Add("1g.5gb", 0, 10, 0);
  Add("1g.5gb", 0, 20, 1);
  TrackedInstance* g1_a = Add("1g.5gb", 1, 5, 0);
  TrackedInstance* g1_b = Add("1g.5gb", 1, 5, 1);  // same last use: the key decides
  Add("1g.5gb", 1, 30, 2);
  EXPECT_THAT(SelectOverCap(All(), 1), ElementsAre(g0_old, g1_a, g1_b));
  EXPECT_TRUE(SelectOverCap(All(), 3).empty());
}

TEST_F(ReconcilerTest, IdleTtlReclaimsOnlyExpiredIdle) {
  Machine("a100-40gb:1");
  opts_.idle_ttl = std::chrono::minutes(10);
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("old", {Spec("1g.5gb")})).status());
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("new", {Spec("1g.5gb")})).status());
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("active", {Spec("1g.5gb")})).status());
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

TEST_F(ReconcilerTest, MaxIdlePerGpuReclaimsLeastRecentlyUsed) {
  Machine("a100-40gb:1");
  opts_.max_idle_per_gpu = 1;
  Start();
  std::vector<MigUuid> uuids;
  for (int i = 0; i < 3; ++i) {
    const std::string id = "r" + std::to_string(i);
    MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq(id, {Spec("1g.5gb")})));
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

TEST_F(ReconcilerTest, WarmPoolKeepsIdleReadyOnlyInFreeSpace) {
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
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("big", {Spec("4g.20gb")})).status());
  MIGD_ASSERT_OK_AND_ASSIGN(r, mgr_->ReconcileOnce());
  EXPECT_EQ(CountState(InstanceState::kActive), 1u);
  const size_t idle = CountState(InstanceState::kIdle);
  EXPECT_LE(idle, 2u);
  // A request never loses to the pool: the pool's instances are reclaimable.
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("b2", {Spec("3g.20gb")})).status());
  Consistent();
}

TEST_F(ReconcilerTest, DriftIsDetectedAndNeverDestroysForeign) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation a, mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb", 0, mig::Placement{0, 1})})));
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
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("x", {Spec("3g.20gb", 0, mig::Placement{4, 4})})).ok());
  Consistent();
}

TEST_F(ReconcilerTest, NvmlErrorsFailClosedIntoErrorAndReconcilerRetries) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("3g.20gb", 0, mig::Placement{4, 4})})));
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  faults_->FailAlways(Method::kDestroyGi, FailedPreconditionError("NVML_ERROR_GPU_IS_LOST"));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult rr, mgr_->Reclaim({}));
  ASSERT_EQ(rr.failed.size(), 1u);
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kError);
  // Not reused, its slices stay blocked.
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("r2", {Spec("3g.20gb", 0, mig::Placement{4, 4})})).ok());
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

TEST_F(ReconcilerTest, ProcessOnIdleInstanceKeepsItInError) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("1g.5gb")})));
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  ENGINE_ASSERT_OK(fake_->AttachProcess(a.instances[0].mig_uuid, 77, 1 << 20));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult rr, mgr_->Reclaim({}));
  EXPECT_EQ(rr.failed.size(), 1u);
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kError);
  ENGINE_ASSERT_OK(fake_->DetachProcess(a.instances[0].mig_uuid, 77));
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_TRUE(LiveLayout(*fake_).empty());
}

// An hour's interval: StopReconciler must wake the waiting thread at once
// (or this test hangs), and no pass runs in between.
TEST_F(ReconcilerTest, ReconcilerThreadStartsAndStopsPromptly) {
  Machine("a100-40gb:1");
  opts_.reconcile_interval = std::chrono::hours(1);
  Start();
  mgr_->StartReconciler();
  mgr_->StartReconciler();  // idempotent
  mgr_->StopReconciler();
  mgr_->StopReconciler();
  EXPECT_EQ(mgr_->counters().reconcile_runs, 0u);
  EXPECT_EQ(obs_.reconciles(), 0);
}

// The thread runs whole passes until stopped, and can be started again.
TEST_F(ReconcilerTest, ReconcilerThreadRunsWholePassesUntilStopped) {
  Machine("a100-40gb:1");
  opts_.reconcile_interval = std::chrono::microseconds(1);
  Start();
  mgr_->StartReconciler();
  // Generous deadline: a safety net against a hang, not a timing.
  ASSERT_TRUE(obs_.WaitForReconciles(3, std::chrono::minutes(5)));
  mgr_->StopReconciler();
  const uint64_t runs = mgr_->counters().reconcile_runs;
  EXPECT_GE(runs, 3u);
  // Stop joined the thread: every pass it began has ended (each pass retries
  // the observer's queue exactly once).
  EXPECT_EQ(runs, static_cast<uint64_t>(obs_.reconciles()));
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_EQ(mgr_->counters().reconcile_runs, runs + 1) << "no thread is running passes";
  mgr_->StartReconciler();
  ASSERT_TRUE(obs_.WaitForReconciles(static_cast<int>(runs) + 3, std::chrono::minutes(5)));
  mgr_->StopReconciler();
  EXPECT_EQ(mgr_->counters().reconcile_runs, static_cast<uint64_t>(obs_.reconciles()));
}

}  // namespace
}  // namespace migd::engine
