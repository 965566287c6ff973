// engine::Manager through the production NvmlDriver loading
// libnvidia-ml-sim.so by path: the seed rules, exact NVML call budgets from
// the simulator's own counters, and recovery with the hardware compared
// before and after.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>
#include <string>

#include "engine/health_monitor.h"
#include "engine/manager_testing.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using driver::sim_testing::CallCounts;
using ::migd::engine::testing::Describe;
using ::migd::engine::testing::ExpectConsistent;
using ::migd::engine::testing::LiveLayout;
using ::migd::engine::testing::Total;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

using ::migd::engine::testing::Req;
using ::migd::engine::testing::Spec;

class EngineSimTest : public testing::SimHardwareTest {
 protected:
  void Init(const std::string& gpus, const std::map<std::string, std::string>& env = {}) {
    SimHardwareTest::Init(MIGD_SIM_LIBRARY, gpus, env);
  }
};

TEST_F(EngineSimTest, NvmlCallBudgetAndOneSessionPerProcess) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Init("a100-40gb:1");
  Start();
  StatusOr<Allocation> a = InvalidArgumentError("unset");
  const CallCounts first_create = Measure([&] { a = mgr_->Allocate(Req("a", {Spec("1g.5gb")})); });
  ASSERT_TRUE(a.ok()) << a.status();
  testing::ExpectMigIdentities(a->instances);
  StatusOr<Allocation> b = InvalidArgumentError("unset");
  const CallCounts create = Measure([&] { b = mgr_->Allocate(Req("b", {Spec("1g.5gb")})); });
  ASSERT_TRUE(b.ok()) << b.status();
  const CallCounts release = Measure([&] { ASSERT_TRUE(mgr_->Release("b").ok()); });
  StatusOr<Allocation> c = InvalidArgumentError("unset");
  const CallCounts reuse = Measure([&] { c = mgr_->Allocate(Req("c", {Spec("1g.5gb")})); });
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->instances[0].mig_uuid, b->instances[0].mig_uuid);
  ASSERT_TRUE(mgr_->Release("c").ok());
  const CallCounts destroy = Measure([&] { ASSERT_TRUE(mgr_->Reclaim({}).ok()); });
  std::cout << "NVML calls: first create " << Total(first_create) << " (" << Describe(first_create)
            << ")\n  create " << Total(create) << " (" << Describe(create) << ")\n  release "
            << Total(release) << "\n  reuse " << Total(reuse) << " (" << Describe(reuse)
            << ")\n  destroy " << Total(destroy) << " (" << Describe(destroy) << ")\n";
  // A create is 2 (GI) + 5 (CI) + the MIG-device walk: 7 indices on an A100
  // and 2 id reads per CI then on the GPU (NvmlDriver, nvml_driver.h). The
  // first create of a GI profile on a GPU also reads its default CI profile
  // and the GPU's MIG device count once (both cached): 16 + 2 with 1 CI, then
  // 18 with 2 CIs.
  EXPECT_EQ(Total(first_create), 18u) << Describe(first_create);
  EXPECT_LE(Total(create), 18u) << Describe(create);
  EXPECT_EQ(Total(create), 18u) << Describe(create);
  EXPECT_EQ(Total(release), 0u) << Describe(release);
  EXPECT_LE(Total(reuse), 2u) << Describe(reuse);
  EXPECT_EQ(Total(destroy), 5u) << Describe(destroy);
  // A restarted Manager in the same process reuses the session.
  mgr_.reset();
  Start();
  EXPECT_EQ(mgr_->recovery_summary().active, 1u);
  mgr_.reset();
  driver_.reset();  // nvmlShutdown
  EXPECT_EQ(sim_->Count("nvmlInit_v2", "SUCCESS"), 1u);
  EXPECT_EQ(sim_->Count("nvmlShutdown", "SUCCESS"), 1u);
}

// The counts without the monitor thread's own calls (its bounded waits).
CallCounts WithoutEventWaits(CallCounts c) {
  std::erase_if(c, [](const auto& e) { return e.first.first == "nvmlEventSetWait_v2"; });
  return c;
}

// Health costs nothing on the allocation path: with the monitor running
// (and seeing the allocation's own MIG changes), a first create on GPU 1
// makes exactly the NVML calls of a first create on GPU 0 without it.
TEST_F(EngineSimTest, AllocateCostsTheSameNvmlCallsWithTheHealthMonitorRunning) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Init("a100-40gb:2");
  Start();
  StatusOr<Allocation> a = InvalidArgumentError("unset");
  const CallCounts without =
      Measure([&] { a = mgr_->Allocate(Req("a", {Spec("1g.5gb", 0)})); });
  ASSERT_TRUE(a.ok()) << a.status();
  HealthOptions options;
  options.wait = std::chrono::milliseconds(5);
  MIGD_ASSERT_OK_AND_ASSIGN(auto monitor,
                            HealthMonitor::Start(*driver_, {GpuIndex(0), GpuIndex(1)}, options,
                                                 mgr_->health_sink()));
  StatusOr<Allocation> b = InvalidArgumentError("unset");
  const CallCounts with = Measure([&] { b = mgr_->Allocate(Req("b", {Spec("1g.5gb", 1)})); });
  ASSERT_TRUE(b.ok()) << b.status();
  monitor->WaitForEvents(2);  // the GI and CI creates
  monitor->Stop();
  // The budget itself is pinned by NvmlCallBudgetAndOneSessionPerProcess; it
  // differs between the simulator variants (tests/sim_variants), the equality not.
  EXPECT_GT(Total(without), 0u) << Describe(without);
  EXPECT_EQ(WithoutEventWaits(with), without) << Describe(with);
  EXPECT_EQ(mgr_->drift_checks().requested, 2u);
  EXPECT_EQ(mgr_->drift_checks().passes, 0u);  // nothing ran on the monitor's thread
}

// Through the production NvmlDriver: every instance handed out is a MIG
// device of its GPU (MIG-…, not the parent GPU's UUID, unique), before and
// after a restart. This would have caught a driver that reads NVML's
// "Parent device" field as the instance's identity.
TEST_F(EngineSimTest, AllocatedMigUuidsNameMigDevicesNotTheirParents) {
  Init("a100-40gb:1,h100-80gb:1");
  Start();
  std::set<MigUuid> seen;
  const std::vector<std::string> profiles = {"1g.5gb", "2g.10gb", "3g.20gb", "1g.10gb", "2g.20gb"};
  for (size_t i = 0; i < profiles.size(); ++i) {
    MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                              mgr_->Allocate(Req("r" + std::to_string(i), {Spec(profiles[i])})));
    ASSERT_EQ(a.instances.size(), 1u);
    testing::ExpectMigIdentity(a.instances[0].gpu_uuid, a.instances[0].mig_uuid);
    EXPECT_TRUE(seen.insert(a.instances[0].mig_uuid).second) << a.instances[0].mig_uuid;
  }
  ExpectConsistent(*mgr_, *driver_, *store_);
  mgr_.reset();
  OpenStore();
  Start();
  EXPECT_EQ(mgr_->recovery_summary().active, profiles.size());
  testing::ExpectMigIdentities(mgr_->List().instances);
}

TEST_F(EngineSimTest, ActiveIsNeverReclaimed) {
  Init("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", {Spec("7g.40gb")})));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult r, mgr_->Reclaim({}));
  EXPECT_TRUE(r.destroyed.empty());
  EXPECT_THAT(mgr_->Allocate(Req("b", {Spec("1g.5gb")})).status(),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("1g.5gb")));
  EXPECT_EQ(sim_->GiCount(), 1);
  EXPECT_EQ(sim_->Count("nvmlGpuInstanceDestroy", "SUCCESS"), 0u);
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kActive);
}

TEST_F(EngineSimTest, ReleaseMakesIdleWithGiCiUntouchedAndObserverKept) {
  Init("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", {Spec("3g.20gb")})));
  const auto layout = LiveLayout(*driver_);
  const CallCounts calls = Measure([&] { ASSERT_TRUE(mgr_->Release("a").ok()); });
  EXPECT_EQ(Total(calls), 0u);
  EXPECT_EQ(LiveLayout(*driver_), layout);
  EXPECT_EQ(sim_->GiCount(), 1);
  EXPECT_EQ(sim_->CiCount(), 1);
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kIdle);
  EXPECT_EQ(obs_.unpublishes(), 0);
  ExpectConsistent(*mgr_, *driver_, *store_);
}

TEST_F(EngineSimTest, SamePlacementReusesIdleInstanceAndMigUuid) {
  Init("h100-80gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(Req("a", {Spec("2g.20gb", 0, mig::Placement{2, 2})})));
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  StatusOr<Allocation> b = InvalidArgumentError("unset");
  const CallCounts calls = Measure([&] {
    b = mgr_->Allocate(Req("b", {Spec("2g.20gb", 0, mig::Placement{2, 2})}));
  });
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_LE(Total(calls), 2u);
  EXPECT_EQ(b->instances[0].mig_uuid, a.instances[0].mig_uuid);
  EXPECT_EQ(b->stages[0], planner::Stage::kReuse);
  EXPECT_EQ(sim_->Count("nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS"), 1u);
}

TEST_F(EngineSimTest, ScheduledPlacementDestroysOnlyOverlappingIdle) {
  Init("a100-40gb:1");
  Start();
  std::vector<MigUuid> idle;
  for (uint32_t s = 0; s < 7; ++s) {
    const std::string id = "r" + std::to_string(s);
    MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                              mgr_->Allocate(Req(id, {Spec("1g.5gb", 0, mig::Placement{s, 1})})));
    idle.push_back(a.instances[0].mig_uuid);
    ENGINE_ASSERT_OK(mgr_->Release(id));
  }
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation big,
                            mgr_->Allocate(Req("big", {Spec("3g.20gb", 0, mig::Placement{0, 4})})));
  EXPECT_EQ(big.instances[0].placement, (mig::Placement{0, 4}));
  EXPECT_EQ(sim_->Count("nvmlGpuInstanceDestroy", "SUCCESS"), 4u);
  for (uint32_t s = 0; s < 7; ++s) {
    EXPECT_EQ(Get(idle[s]).state, s < 4 ? InstanceState::kNone : InstanceState::kIdle) << s;
  }
  ExpectConsistent(*mgr_, *driver_, *store_);
}

TEST_F(EngineSimTest, FailedAllocationDestroysWhatItCreatedAndReturnsReusedToIdle) {
  MIGD_RUN_IN_FRESH_PROCESS();
  // The third CI create of this process fails.
  Init("a100-40gb:1",
       {{"MIGD_SIM_FAULTS", "nvmlGpuInstanceCreateComputeInstance=INSUFFICIENT_RESOURCES@3"}});
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a,
                            mgr_->Allocate(Req("a", {Spec("2g.10gb", 0, mig::Placement{0, 2})})));
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  const auto layout = LiveLayout(*driver_);
  auto r = mgr_->Allocate(
      Req("b", {Spec("2g.10gb", 0, mig::Placement{0, 2}), Spec("2g.10gb", 0, mig::Placement{2, 2}),
                Spec("3g.20gb", 0, mig::Placement{4, 4})}));
  EXPECT_THAT(r.status(), StatusIs(StatusCode::kResourceExhausted,
                                   HasSubstr("NVML_ERROR_INSUFFICIENT_RESOURCES")));
  EXPECT_EQ(LiveLayout(*driver_), layout);
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kIdle);
  ExpectConsistent(*mgr_, *driver_, *store_);
}

TEST_F(EngineSimTest, NvmlErrorsFailClosedAndTheReconcilerRetries) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Init("a100-40gb:1", {{"MIGD_SIM_FAULTS", "nvmlGpuInstanceDestroy=UNKNOWN@1"}});
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", {Spec("4g.20gb")})));
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult r, mgr_->Reclaim({}));
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_EQ(Get(a.instances[0].mig_uuid).state, InstanceState::kError);
  EXPECT_FALSE(mgr_->Allocate(Req("b", {Spec("4g.20gb")})).ok()) << "Error is never reused";
  // Restart keeps it in Error (record says Error).
  mgr_.reset();
  Start();
  EXPECT_EQ(mgr_->recovery_summary().error, 1u);
  MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport rep, mgr_->ReconcileOnce());
  EXPECT_EQ(rep.errors_cleaned, 1u);
  EXPECT_EQ(sim_->GiCount(), 0);
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("b", {Spec("4g.20gb")})).status());
  ExpectConsistent(*mgr_, *driver_, *store_);
}

TEST_F(EngineSimTest, ProcessOnReclaimedInstanceKeepsItInError) {
  Init("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", {Spec("1g.5gb")})));
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  ASSERT_EQ(driver::sim_testing::AttachProcess(MIGD_SIM_LIBRARY, a.instances[0].mig_uuid.value(),
                                               4242, 1 << 20),
            NVML_SUCCESS);
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult r, mgr_->Reclaim({}));
  EXPECT_EQ(r.failed.size(), 1u);
  EXPECT_EQ(sim_->GiCount(), 1);
  ASSERT_EQ(
      driver::sim_testing::DetachProcess(MIGD_SIM_LIBRARY, a.instances[0].mig_uuid.value(), 4242),
      NVML_SUCCESS);
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_EQ(sim_->GiCount(), 0);
}

TEST_F(EngineSimTest, CleanRestartRestoresActiveAndIdleExactly) {
  Init("a100-40gb:2");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("a", {Spec("3g.20gb", 0), Spec("1g.5gb", 1)})).status());
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("b", {Spec("2g.10gb", 1)})).status());
  ENGINE_ASSERT_OK(mgr_->Release("b"));
  const auto before = mgr_->List().instances;
  const auto layout = LiveLayout(*driver_);
  mgr_.reset();
  store_.reset();
  OpenStore();
  Start();
  const auto after = mgr_->List().instances;
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].mig_uuid, before[i].mig_uuid);
    EXPECT_EQ(after[i].state, before[i].state);
    EXPECT_EQ(after[i].owner, before[i].owner);
  }
  EXPECT_EQ(LiveLayout(*driver_), layout);
  ExpectConsistent(*mgr_, *driver_, *store_);
}

TEST_F(EngineSimTest, ContradictingRecordStopsStartupAndLeavesHardwareUntouched) {
  Init("a100-40gb:1");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("a", {Spec("1g.5gb", 0, mig::Placement{0, 1})})).status());
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b,
                            mgr_->Allocate(Req("b", {Spec("2g.10gb", 0, mig::Placement{2, 2})})));
  ENGINE_ASSERT_OK(mgr_->Release("b"));
  mgr_.reset();
  // b's record now claims another GI id.
  MIGD_ASSERT_OK_AND_ASSIGN(store::LoadResult loaded, store_->LoadAll());
  for (store::Record r : loaded.records) {
    if (r.mig_uuid != b.instances[0].mig_uuid) continue;
    r.gi_id = NvmlGiId(r.gi_id->value() + 1);
    ENGINE_ASSERT_OK(store_->Put(r).status());
  }
  const auto layout = LiveLayout(*driver_);
  const uint64_t mutations_before =
      sim_->Count("nvmlGpuInstanceDestroy", "SUCCESS") +
      sim_->Count("nvmlComputeInstanceDestroy", "SUCCESS") +
      sim_->Count("nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS") +
      sim_->Count("nvmlGpuInstanceCreateComputeInstance", "SUCCESS");
  auto m = Make();
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status(), StatusIs(StatusCode::kFailedPrecondition, HasSubstr("record says GI")));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(sim_->GpuUuid()));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(b.instances[0].mig_uuid.value()));
  EXPECT_EQ(LiveLayout(*driver_), layout);
  EXPECT_EQ(sim_->Count("nvmlGpuInstanceDestroy", "SUCCESS") +
                sim_->Count("nvmlComputeInstanceDestroy", "SUCCESS") +
                sim_->Count("nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS") +
                sim_->Count("nvmlGpuInstanceCreateComputeInstance", "SUCCESS"),
            mutations_before);
}

TEST_F(EngineSimTest, OtherBootRecordsAreDiscardedAfterReboot) {
  Init("a100-40gb:1");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(Req("a", {Spec("1g.5gb")})).status());
  mgr_.reset();
  ASSERT_EQ(reinterpret_cast<nvmlReturn_t (*)()>(
                driver::sim_testing::LoadedSymbol(MIGD_SIM_LIBRARY, "migdSimReboot"))(),
            NVML_SUCCESS);
  opts_.boot_id = "another-boot";
  Start();
  EXPECT_EQ(mgr_->recovery_summary().other_boot_discarded, 1u);
  EXPECT_TRUE(mgr_->List().instances.empty());
}

// Rediscovery through the production NvmlDriver: a one-shot NVML fault at
// startup (MIGD_SIM_FAULTS) drops the GPU; the first reconcile takes it over.
TEST_F(EngineSimTest, GpuDroppedByOneShotMigModeFaultIsRediscovered) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Init("a100-40gb:1", {{"MIGD_SIM_FAULTS", "nvmlDeviceGetMigMode=NOT_SUPPORTED@1"}});
  Start();
  ASSERT_EQ(mgr_->Gpus().size(), 1u);
  EXPECT_EQ(mgr_->Gpus()[0].model, nullptr);
  EXPECT_FALSE(mgr_->Gpus()[0].info.mig.supported);
  MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.gpus_discovered, 1u);
  EXPECT_NE(mgr_->Gpus()[0].model, nullptr);
  EXPECT_TRUE(mgr_->Gpus()[0].info.mig.supported);
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", {Spec("1g.5gb")})));
  EXPECT_FALSE(a.instances[0].mig_uuid.value().empty());
  ExpectConsistent(*mgr_, *driver_, *store_);
  // Managed: the next pass does not probe it.
  const CallCounts pass = Measure([&] { ASSERT_TRUE(mgr_->ReconcileOnce().ok()); });
  EXPECT_EQ(driver::sim_testing::Get(pass, "nvmlDeviceGetMigMode", "SUCCESS"), 0u)
      << Describe(pass);
}

TEST_F(EngineSimTest, GpuSkippedByOneShotNoPermissionIsRediscovered) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Init("a100-40gb:1", {{"MIGD_SIM_FAULTS", "nvmlDeviceGetHandleByIndex_v2=NO_PERMISSION@1"}});
  Start();
  EXPECT_TRUE(mgr_->Gpus().empty());
  MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport r, mgr_->ReconcileOnce());
  EXPECT_EQ(r.gpus_discovered, 1u);
  ASSERT_EQ(mgr_->Gpus().size(), 1u);
  EXPECT_EQ(mgr_->Gpus()[0].info.uuid.value(), sim_->GpuUuid());
  EXPECT_NE(mgr_->Gpus()[0].model, nullptr);
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", {Spec("1g.5gb")})));
  EXPECT_FALSE(a.instances[0].mig_uuid.value().empty());
  ExpectConsistent(*mgr_, *driver_, *store_);
}

// The cost of a GPU that truly cannot be managed: one NVML call per pass.
TEST_F(EngineSimTest, UnmanageableGpusCostOneNvmlCallPerReconcilePass) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Init("a100-40gb:1,a30-24gb:1:mig-off,a30-24gb:1:no-permission");
  Start();
  ASSERT_EQ(mgr_->Gpus().size(), 2u);       // the no-permission one is not listed
  ASSERT_TRUE(mgr_->ReconcileOnce().ok());  // first pass: logs the new outcome
  const CallCounts pass = Measure([&] {
    MIGD_ASSERT_OK_AND_ASSIGN(ReconcileReport r, mgr_->ReconcileOnce());
    EXPECT_EQ(r.gpus_discovered, 0u);
    EXPECT_EQ(r.gpus_unmanaged, 2u);
  });
  // mig-off: one nvmlDeviceGetMigMode (handle cached); no-permission: one
  // refused nvmlDeviceGetHandleByIndex_v2. Nothing else for either GPU.
  EXPECT_EQ(driver::sim_testing::Get(pass, "nvmlDeviceGetMigMode", "SUCCESS"), 1u)
      << Describe(pass);
  EXPECT_EQ(driver::sim_testing::Get(pass, "nvmlDeviceGetHandleByIndex_v2", "ERROR_NO_PERMISSION"),
            1u)
      << Describe(pass);
  EXPECT_EQ(driver::sim_testing::Get(pass, "nvmlDeviceGetCount_v2", "SUCCESS"), 0u)
      << Describe(pass);
  EXPECT_EQ(driver::sim_testing::Get(pass, "nvmlDeviceGetGpuInstanceProfileInfoV", "SUCCESS") +
                driver::sim_testing::Get(pass, "nvmlDeviceGetGpuInstanceProfileInfoV",
                                         "ERROR_NOT_SUPPORTED"),
            0u)
      << Describe(pass);
}

}  // namespace
}  // namespace migd::engine
