// The engine's health rules (engine/engine_health.h) over the in-process
// simulator: what an Unhealthy instance or GPU may still be used for, and
// the HealthMonitor feeding them from injected events.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/mutex.h"
#include "engine/events.h"
#include "engine/health_monitor.h"
#include "engine/manager.h"
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

// Records health changes and GPU events as compact strings.
class HealthListener final : public EngineListener {
 public:
  void OnInstanceEvent(const InstanceEvent& e) override {
    if (e.reason != EventReason::kMarkedUnhealthy && e.reason != EventReason::kHealthCleared) {
      return;
    }
    MutexLock lock(&mu_);
    marks_.push_back(std::string(e.reason == EventReason::kHealthCleared ? "cleared " : "") +
                     std::string(InstanceStateName(e.from)) + ">" +
                     std::string(InstanceStateName(e.to)) + ":" + e.instance.profile +
                     (e.instance.unhealthy ? "!" : "?"));
  }
  std::vector<std::string> marks() {
    MutexLock lock(&mu_);
    return marks_;
  }
  void OnAllocation(const AllocationOutcome&) override {}
  void OnReclaim(EventReason, const InstanceView&) override {}
  void OnGpuEvent(const driver::GpuEvent& e, std::string_view action) override {
    MutexLock lock(&mu_);
    gpu_events_.push_back(driver::DescribeGpuEvent(e) + ": " + std::string(action));
  }
  void OnHealthChange(const HealthChange& c) override {
    MutexLock lock(&mu_);
    std::string s = std::string(c.cleared ? "cleared " : "") + "gpu " +
                    std::to_string(c.gpu.value()) + (c.gpu_changed ? " unhealthy" : "");
    for (const InstanceView& v : c.instances) {
      s += " " + v.profile + (v.unhealthy ? "!" : "?") + "(" + v.health_reason + ")";
    }
    changes_.push_back(s);
  }
  std::vector<std::string> changes() {
    MutexLock lock(&mu_);
    return changes_;
  }
  std::vector<std::string> gpu_events() {
    MutexLock lock(&mu_);
    return gpu_events_;
  }

 private:
  Mutex mu_;
  std::vector<std::string> changes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> gpu_events_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> marks_ ABSL_GUARDED_BY(mu_);
};

class HealthRulesTest : public testing::FakeHardwareTest {
 protected:
  HealthRulesTest() { opts_.listener = &listener_; }
  HealthListener listener_;
  // Allocates one 1g.5gb on `gpu` as request `id`.
  InstanceView One(const std::string& id, std::optional<uint32_t> gpu = 0) {
    StatusOr<Allocation> a = mgr_->Allocate(OpaqueReq(id, {Spec("1g.5gb", gpu)}));
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? a->instances[0] : InstanceView{};
  }
  void MarkInstance(const InstanceView& v, uint64_t xid = 48) {
    mgr_->health_sink().MarkInstanceUnhealthy(v.gpu, v.gi_id, v.ci_id, xid);
  }
};

TEST_F(HealthRulesTest, AnUnhealthyIdleInstanceIsNeverReused) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView first = One("r1");
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  MarkInstance(first);
  const InstanceView second = One("r2");
  EXPECT_NE(second.mig_uuid, first.mig_uuid);
  EXPECT_EQ(Get(first.mig_uuid).state, InstanceState::kIdle);  // until reclaimed
  Consistent();
}

TEST_F(HealthRulesTest, AnUnhealthyActiveInstanceStaysActiveAndIsDestroyedOnRelease) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView v = One("r1");
  MarkInstance(v);
  EXPECT_EQ(Get(v.mig_uuid).state, InstanceState::kActive);  // its workload decides
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  EXPECT_EQ(Get(v.mig_uuid).state, InstanceState::kNone);
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  Consistent();
}

TEST_F(HealthRulesTest, AnUnhealthyIdleInstanceIsReclaimedByTheReconciler) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView v = One("r1");
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  MarkInstance(v);
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_EQ(Get(v.mig_uuid).state, InstanceState::kNone);
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  Consistent();
}

// The reclaim does not wait for the periodic pass: a mark that hits an Idle
// instance asks the reconciler for a pass (one pending per GPU); a mark of an
// Active instance asks for nothing.
TEST_F(HealthRulesTest, MarkingAnIdleInstanceRequestsAReclaimPassAtOnce) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView active = One("r1");
  MarkInstance(active);
  EXPECT_EQ(mgr_->drift_checks().requested, 0u);
  const InstanceView idle = One("r2");
  ENGINE_ASSERT_OK(mgr_->Release("r2"));
  MarkInstance(idle);
  EXPECT_EQ(mgr_->drift_checks().requested, 1u);
  EXPECT_EQ(mgr_->drift_checks().pending, 1u);
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_EQ(Get(idle.mig_uuid).state, InstanceState::kNone);
  EXPECT_EQ(mgr_->drift_checks().pending, 0u);
  Consistent();
}

TEST_F(HealthRulesTest, MarkingAGpuWithAnIdleInstanceRequestsAReclaimPass) {
  Machine("a100-40gb:1");
  Start();
  One("r1");
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  EXPECT_EQ(mgr_->drift_checks().requested, 1u);
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");  // nothing new
  EXPECT_EQ(mgr_->drift_checks().requested, 1u);
}

TEST_F(HealthRulesTest, AnUnhealthyGpuTakesNoNewAllocation) {
  Machine("a100-40gb:2");
  Start();
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("pinned", {Spec("1g.5gb", 0)})).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("GPU 0 is unhealthy (GPU 0: xid 79)")));
  const InstanceView v = One("free", std::nullopt);
  EXPECT_EQ(v.gpu, GpuIndex(1));
  Consistent();
}

TEST_F(HealthRulesTest, AnUnhealthyGpuMarksEveryInstanceOnIt) {
  Machine("a100-40gb:2");
  Start();
  const InstanceView on0 = One("a", 0);
  const InstanceView on1 = One("b", 1);
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: gpu-lost");
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  ENGINE_ASSERT_OK(mgr_->Release("b"));
  EXPECT_EQ(Get(on0.mig_uuid).state, InstanceState::kNone);
  EXPECT_EQ(Get(on1.mig_uuid).state, InstanceState::kIdle);
  Consistent();
}

TEST_F(HealthRulesTest, AnXidOnAnotherInstanceLeavesThisOneAlone) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView a = One("a");
  const InstanceView b = One("b");
  MarkInstance(a);
  ENGINE_ASSERT_OK(mgr_->Release("b"));
  EXPECT_EQ(Get(b.mig_uuid).state, InstanceState::kIdle);
  Consistent();
}

TEST_F(HealthRulesTest, AMigConfigChangeRunsTheDriftCheck) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView v = One("r1");
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  // Another NVML client destroys the Idle instance behind migd's back.
  fake_->WithMachine([&](sim::Machine& m) {
    ASSERT_TRUE(m.DestroyCi(v.gpu, v.gi_id, v.ci_id).ok());
    ASSERT_TRUE(m.DestroyGi(v.gpu, v.gi_id).ok());
  });
  mgr_->health_sink().OnMigConfigChange(v.gpu);
  // The reconciler thread is woken at once (not after its interval).
  mgr_->StartReconciler();
  mgr_->WaitForDriftPasses(1);
  mgr_->StopReconciler();
  EXPECT_EQ(Get(v.mig_uuid).state, InstanceState::kNone);
  Consistent();
}

TEST_F(HealthRulesTest, MigConfigChangesCoalesceIntoOnePendingDriftCheckPerGpu) {
  Machine("a100-40gb:2");
  Start();
  const uint64_t runs = mgr_->counters().reconcile_runs;
  for (int i = 0; i < 20; ++i) mgr_->health_sink().OnMigConfigChange(GpuIndex(0));
  for (int i = 0; i < 5; ++i) mgr_->health_sink().OnMigConfigChange(GpuIndex(1));
  DriftCheckCounters c = mgr_->drift_checks();
  EXPECT_EQ(c.requested, 25u);
  EXPECT_EQ(c.coalesced, 23u);
  EXPECT_EQ(c.pending, 2u);
  EXPECT_EQ(c.passes, 0u);
  EXPECT_EQ(mgr_->counters().reconcile_runs, runs);  // nothing ran on the caller's thread
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  c = mgr_->drift_checks();
  EXPECT_EQ(c.passes, 1u);
  EXPECT_EQ(c.pending, 0u);
  EXPECT_EQ(mgr_->counters().reconcile_runs, runs + 1);
  // A pass with nothing pending serves no drift check.
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_EQ(mgr_->drift_checks().passes, 1u);
}

TEST_F(HealthRulesTest, MigdsOwnCreatesAndDestroysQueueAtMostOneDriftCheck) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(
      auto monitor, HealthMonitor::Start(*fake_, {GpuIndex(0)}, {}, mgr_->health_sink()));
  // Each allocation creates one GI and one CI; the release of an unhealthy
  // one destroys both: every one of them is a MIG configuration change.
  for (const char* id : {"a", "b", "c"}) One(id);
  const InstanceView d = One("d");
  MarkInstance(d);
  ENGINE_ASSERT_OK(mgr_->Release("d"));
  monitor->WaitForEvents(10);
  monitor->Stop();
  const DriftCheckCounters c = mgr_->drift_checks();
  EXPECT_EQ(c.requested, 10u);
  EXPECT_EQ(c.coalesced, 9u);
  EXPECT_EQ(c.pending, 1u);
  EXPECT_EQ(c.passes, 0u);
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_EQ(mgr_->drift_checks().passes, 1u);
  Consistent();
}

TEST_F(HealthRulesTest, InjectedXidsReachTheEngineThroughTheMonitor) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView v = One("r1");
  MIGD_ASSERT_OK_AND_ASSIGN(
      auto monitor, HealthMonitor::Start(*fake_, {GpuIndex(0)}, {}, mgr_->health_sink()));
  const std::string spec = "xid=94@0/" + std::to_string(v.gi_id.value()) + "/" +
                           std::to_string(v.ci_id.value());
  ENGINE_ASSERT_OK(fake_->InjectEvents(spec));
  monitor->WaitForEvents(1);
  monitor->Stop();  // before the release: its MIG changes need no drift pass
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  EXPECT_EQ(Get(v.mig_uuid).state, InstanceState::kNone);
  Consistent();
}


TEST_F(HealthRulesTest, ANewMarkIsAnnouncedOnceWithTheInstancesItMarked) {
  Machine("a100-40gb:2");
  Start();
  const InstanceView v = One("r1", 1);
  MarkInstance(v, 94);
  MarkInstance(v, 95);  // already unhealthy: nothing new
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: lost");
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: lost");
  EXPECT_THAT(listener_.changes(),
              ElementsAre("gpu 1 1g.5gb!(xid 94)", "gpu 0 unhealthy"));
  // Watch and metrics hear one marked-unhealthy event per marked instance.
  EXPECT_THAT(listener_.marks(), ElementsAre("Active>Active:1g.5gb!"));
}

TEST_F(HealthRulesTest, MarkingAGpuAnnouncesItsInstancesAndGpusShowsIt) {
  Machine("a100-40gb:2");
  Start();
  One("r1", 0);
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  EXPECT_THAT(listener_.changes(),
              ElementsAre("gpu 0 unhealthy 1g.5gb!(GPU unhealthy: GPU 0: xid 79)"));
  std::vector<GpuView> gpus = mgr_->Gpus();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_TRUE(gpus[0].unhealthy);
  EXPECT_EQ(gpus[0].health_reason, "GPU 0: xid 79");
  EXPECT_FALSE(gpus[1].unhealthy);
  EXPECT_TRUE(mgr_->List().instances[0].unhealthy);
}

TEST_F(HealthRulesTest, EveryHandledEventReachesOnGpuEventWithItsAction) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView v = One("r1");
  HealthOptions options;
  options.wait = std::chrono::milliseconds(20);
  MIGD_ASSERT_OK_AND_ASSIGN(auto monitor,
                            HealthMonitor::Start(*fake_, {GpuIndex(0)}, options, mgr_->health_sink()));
  ENGINE_ASSERT_OK(fake_->InjectEvents("xid=43@0,xid=94@0/" + std::to_string(v.gi_id.value())));
  monitor->WaitForEvents(2);
  monitor->Stop();
  ASSERT_EQ(listener_.gpu_events().size(), 2u);
  EXPECT_THAT(listener_.gpu_events()[0], HasSubstr("ignored"));
  EXPECT_THAT(listener_.gpu_events()[1], HasSubstr("instance-unhealthy"));
  EXPECT_THAT(listener_.changes(), ElementsAre("gpu 0 1g.5gb!(xid 94)"));
}

TEST_F(HealthRulesTest, AClearIsAnnouncedOnceWithTheGpuAndTheInstancesItCleared) {
  Machine("a100-40gb:2");
  Start();
  One("r1", 0);
  One("r2", 1);
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  MIGD_ASSERT_OK(mgr_->ClearGpuHealth(GpuIndex(0)).status());
  EXPECT_THAT(listener_.changes(),
              ElementsAre("gpu 0 unhealthy 1g.5gb!(GPU unhealthy: GPU 0: xid 79)",
                          "cleared gpu 0 unhealthy 1g.5gb?()"));
  // Watch and metrics hear one health-cleared event per cleared instance.
  EXPECT_THAT(listener_.marks(),
              ElementsAre("Active>Active:1g.5gb!", "cleared Active>Active:1g.5gb?"));
  EXPECT_FALSE(mgr_->Gpus()[0].unhealthy);
}

TEST_F(HealthRulesTest, ClearingAnInstanceMarkOnAHealthyGpuLeavesTheGpuUnchanged) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView v = One("r1");
  MarkInstance(v, 94);
  MIGD_ASSERT_OK(mgr_->ClearGpuHealth(GpuIndex(0)).status());
  EXPECT_THAT(listener_.changes(), ElementsAre("gpu 0 1g.5gb!(xid 94)", "cleared gpu 0 1g.5gb?()"));
}

TEST_F(HealthRulesTest, AClearThatChangesNothingAnnouncesNothing) {
  Machine("a100-40gb:1");
  Start();
  One("r1");
  MIGD_ASSERT_OK(mgr_->ClearGpuHealth(GpuIndex(0)).status());
  EXPECT_THAT(mgr_->ClearGpuHealth(GpuIndex(5)).status(),
              StatusIs(StatusCode::kNotFound, HasSubstr("GPU 5")));
  EXPECT_TRUE(listener_.changes().empty());
  EXPECT_TRUE(listener_.marks().empty());
}

}  // namespace
}  // namespace migd::engine
