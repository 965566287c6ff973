// engine::Manager as a whole over the in-process simulator (FakeGpuDriver)
// and FaultInjectingDriver: the tables it builds, operator reclaim, faults at
// every mutating call site, concurrency and the identity of what it hands
// out. Each delegate has its own test file; NVML call budgets are measured
// in manager_sim_test.cc.
#include "engine/manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "engine/manager_testing.h"
#include "mig/catalog.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::engine::testing::LiveLayout;
using ::migd::engine::testing::OpaqueReq;
using ::migd::engine::testing::Spec;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using Method = driver::FaultInjectingDriver::Method;
using Timing = driver::FaultInjectingDriver::Timing;

class ManagerTest : public testing::FakeHardwareTest {};

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

// Every instance handed out is a MIG device of its GPU: its UUID starts with
// MIG- and is not the parent GPU's UUID (what a driver reading NVML's
// "Parent device" field would report), on every GPU and for every profile.
TEST_F(ManagerTest, AllocatedMigUuidsNameMigDevicesNotTheirParents) {
  Machine("a100-40gb:1,h100-80gb:1");
  Start();
  std::set<MigUuid> seen;
  int n = 0;
  for (const char* profile : {"1g.5gb", "2g.10gb", "3g.20gb", "1g.10gb", "2g.20gb", "3g.40gb"}) {
    const std::string id = "r" + std::to_string(n++);
    MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq(id, {Spec(profile)})));
    ASSERT_EQ(a.instances.size(), 1u);
    testing::ExpectMigIdentity(a.instances[0].gpu_uuid, a.instances[0].mig_uuid);
    EXPECT_TRUE(seen.insert(a.instances[0].mig_uuid).second) << "MIG UUIDs are unique";
    ENGINE_ASSERT_OK(mgr_->Release(id));
  }
  Restart();
  testing::ExpectMigIdentities(mgr_->List().instances);
  Consistent();
}

TEST_F(ManagerTest, ActiveIsNeverReclaimed) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(
      Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("1g.5gb", 0, mig::Placement{4, 1})})));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult r, mgr_->Reclaim({}));
  EXPECT_TRUE(r.destroyed.empty());
  // A request whose placement overlaps the Active instance is refused.
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("r2", {Spec("3g.20gb", 0, mig::Placement{4, 4})})).status(),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("")));
  // A full-GPU request too.
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("r3", {Spec("7g.40gb")})).ok());
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kActive);
  EXPECT_EQ(LiveLayout(*fake_).size(), 1u);
  EXPECT_EQ(faults_->CallCount(Method::kDestroyGi), 0);
  Consistent();
}

TEST_F(ManagerTest, ReclaimByGpuAndProfile) {
  Machine("a100-40gb:2");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb", 0)})).status());
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("b", {Spec("2g.10gb", 0)})).status());
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("c", {Spec("1g.5gb", 1)})).status());
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
                   std::to_string(nth) + (fc.timing == Timing::kAfterCall ? " after" : " instead"));
      NewStateDir();
      Machine("a100-40gb:1");
      Start();
      // Baseline: an Active and an Idle instance.
      MIGD_ASSERT_OK_AND_ASSIGN(
          Allocation act,
          mgr_->Allocate(OpaqueReq("act", {Spec("1g.5gb", 0, mig::Placement{0, 1})})));
      ENGINE_ASSERT_OK(
          mgr_->Allocate(OpaqueReq("idle", {Spec("1g.5gb", 0, mig::Placement{5, 1})})).status());
      ENGINE_ASSERT_OK(mgr_->Release("idle"));
      faults_->FailNthCall(fc.method, nth, fc.status, fc.timing);
      // allocate (reclaim + create) / release / reclaim / restart (recovery).
      auto a = mgr_->Allocate(OpaqueReq("x", {Spec("3g.20gb", 0, mig::Placement{4, 4}),
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
        auto a = mgr_->Allocate(OpaqueReq(id, specs));
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
