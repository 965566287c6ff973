// EngineListener events, allocation outcomes and reclaim reasons; the
// reloadable policy (SetPolicy), migProfileAllowlist and Gpus().
#include "engine/events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/mutex.h"
#include "engine/manager_testing.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::engine::testing::OpaqueReq;
using ::migd::engine::testing::Spec;
using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records everything it hears, as compact strings.
class RecordingListener final : public EngineListener {
 public:
  void OnInstanceEvent(const InstanceEvent& e) override {
    MutexLock lock(&mu_);
    sequences_.push_back(e.sequence);
    events_.push_back(std::string(InstanceStateName(e.from)) + ">" +
                      std::string(InstanceStateName(e.to)) + ":" +
                      std::string(EventReasonName(e.reason)));
    last_ = e;
  }
  void OnAllocation(const AllocationOutcome& o) override {
    MutexLock lock(&mu_);
    allocations_.push_back(o.request_id + ":" + std::string(StatusCodeName(o.code)) + ":" +
                           std::string(AllocationPathName(o.path)) +
                           (o.replayed ? ":replayed" : ""));
  }
  void OnReclaim(EventReason reason, const InstanceView& v) override {
    MutexLock lock(&mu_);
    reclaims_.push_back(std::string(EventReasonName(reason)) + ":" + v.profile);
  }
  std::vector<std::string> TakeEvents() {
    MutexLock lock(&mu_);
    return std::exchange(events_, {});
  }
  std::vector<std::string> allocations() {
    MutexLock lock(&mu_);
    return allocations_;
  }
  std::vector<std::string> reclaims() {
    MutexLock lock(&mu_);
    return reclaims_;
  }
  std::vector<uint64_t> sequences() {
    MutexLock lock(&mu_);
    return sequences_;
  }
  InstanceEvent last() {
    MutexLock lock(&mu_);
    return last_;
  }

 private:
  Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> allocations_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> reclaims_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> sequences_ ABSL_GUARDED_BY(mu_);
  InstanceEvent last_ ABSL_GUARDED_BY(mu_);
};

class EventsTest : public testing::FakeHardwareTest {
 protected:
  ~EventsTest() override { mgr_.reset(); }  // before listener_ goes
  void SetUp() override { opts_.listener = &listener_; }
  RecordingListener listener_;
};

TEST_F(EventsTest, CreateReleaseReuseEmitEveryTransitionInOrder) {
  Machine("a100-40gb:1");
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("3g.20gb")})));
  EXPECT_THAT(listener_.TakeEvents(),
              ElementsAre("None>Creating:allocate", "Creating>Active:allocate"));
  InstanceEvent last = listener_.last();
  EXPECT_EQ(last.instance.mig_uuid, a.instances[0].mig_uuid);
  EXPECT_EQ(last.instance.request_id, "r1");
  EXPECT_EQ(last.instance.owner, store::Owner::Opaque("owner-r1"));

  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  EXPECT_THAT(listener_.TakeEvents(), ElementsAre("Active>Idle:release"));
  // The event shows the instance after the change: no owner when Idle.
  EXPECT_TRUE(listener_.last().instance.owner.empty());
  EXPECT_TRUE(listener_.last().instance.request_id.empty());

  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(OpaqueReq("r2", {Spec("3g.20gb")})));
  EXPECT_THAT(listener_.TakeEvents(), ElementsAre("Idle>Active:allocate"));
  EXPECT_EQ(listener_.last().instance.request_id, "r2");
  EXPECT_EQ(b.instances[0].mig_uuid, a.instances[0].mig_uuid);

  MIGD_ASSERT_OK_AND_ASSIGN(Allocation c, mgr_->Allocate(OpaqueReq("r2", {Spec("3g.20gb")})));
  EXPECT_TRUE(c.replayed);
  EXPECT_THAT(listener_.allocations(),
              ElementsAre("r1:OK:create", "r2:OK:reuse", "r2:OK:none:replayed"));
  const std::vector<uint64_t> seq = listener_.sequences();
  for (size_t i = 0; i < seq.size(); ++i) EXPECT_EQ(seq[i], i + 1);
}

TEST_F(EventsTest, PressureReclaimIsReportedWithItsReason) {
  Machine("a100-40gb:1");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("a", {Spec("4g.20gb")})));
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  listener_.TakeEvents();
  // 7g needs the whole GPU: the Idle 4g is reclaimed first.
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("b", {Spec("7g.40gb")})));
  EXPECT_THAT(listener_.TakeEvents(),
              ElementsAre("Idle>Reclaiming:reclaim-pressure", "None>Creating:allocate",
                          "Reclaiming>Deleting:reclaim-pressure", "Deleting>None:destroy",
                          "Creating>Active:allocate"));
  EXPECT_THAT(listener_.reclaims(), ElementsAre("reclaim-pressure:4g.20gb"));
  EXPECT_THAT(listener_.allocations(), ElementsAre("a:OK:create", "b:OK:reclaim_create"));
}

TEST_F(EventsTest, OperatorTtlAndCapReclaimsCarryTheirReasons) {
  Machine("a100-40gb:1");
  Start();
  for (const char* id : {"a", "b", "c"}) {
    ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq(id, {Spec("1g.5gb")})));
    ENGINE_ASSERT_OK(mgr_->Release(id));
  }
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult r,
                            mgr_->Reclaim({.gpu = std::nullopt, .profile = std::nullopt}));
  // The second and third allocations reused the first one's Idle instance.
  ASSERT_EQ(r.destroyed.size(), 1u);
  EXPECT_THAT(listener_.reclaims(), ElementsAre("reclaim-operator:1g.5gb"));

  // Cap: two Idle instances, cap 1.
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("d", {Spec("1g.5gb"), Spec("1g.5gb")})));
  ENGINE_ASSERT_OK(mgr_->Release("d"));
  ManagerPolicy p = mgr_->policy();
  p.max_idle_per_gpu = 1;
  ENGINE_ASSERT_OK(mgr_->SetPolicy(p));
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce());
  EXPECT_THAT(listener_.reclaims(), ElementsAre("reclaim-operator:1g.5gb", "reclaim-cap:1g.5gb"));

  // TTL: the last Idle one, once it is old enough.
  p.max_idle_per_gpu.reset();
  p.idle_ttl = std::chrono::minutes(10);
  ENGINE_ASSERT_OK(mgr_->SetPolicy(p));
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce());
  EXPECT_EQ(listener_.reclaims().size(), 2u);  // not old enough yet
  clock_.Advance(std::chrono::minutes(11));
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce());
  EXPECT_THAT(listener_.reclaims(),
              ElementsAre("reclaim-operator:1g.5gb", "reclaim-cap:1g.5gb", "reclaim-ttl:1g.5gb"));
}

TEST_F(EventsTest, FailedAllocationIsReportedWithItsCode) {
  Machine("a100-40gb:1");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("big", {Spec("7g.40gb")})));
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("no", {Spec("1g.5gb")})),
              StatusIs(StatusCode::kResourceExhausted, ::testing::_));
  EXPECT_THAT(listener_.allocations(), ElementsAre("big:OK:create", "no:RESOURCE_EXHAUSTED:none"));
}

TEST_F(EventsTest, RecoveryAnnouncesEveryRestoredInstance) {
  Machine("a100-40gb:1");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("a", {Spec("3g.20gb")})));
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("b", {Spec("2g.10gb")})));
  ENGINE_ASSERT_OK(mgr_->Release("b"));
  listener_.TakeEvents();
  Restart();
  std::vector<std::string> ev = listener_.TakeEvents();
  std::sort(ev.begin(), ev.end());
  EXPECT_THAT(ev, ElementsAre("None>Active:recovery", "None>Idle:recovery"));
}

TEST_F(EventsTest, DestroyFailureEmitsErrorThenRetryCleansIt) {
  Machine("a100-40gb:1");
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("a", {Spec("3g.20gb")})));
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  listener_.TakeEvents();
  faults_->FailNthCall(driver::FaultInjectingDriver::Method::kDestroyGi, 1,
                       UnknownError("NVML_ERROR_UNKNOWN"));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult r, mgr_->Reclaim({}));
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_EQ(r.failed[0].state, InstanceState::kError);
  EXPECT_THAT(listener_.TakeEvents(),
              ElementsAre("Idle>Reclaiming:reclaim-operator",
                          "Reclaiming>Deleting:reclaim-operator", "Deleting>Error:destroy-failed"));
  EXPECT_TRUE(listener_.reclaims().empty());
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce());
  EXPECT_THAT(listener_.TakeEvents(), ElementsAre("Error>None:error-retry"));
}

TEST_F(EventsTest, AllowlistRefusesOtherProfilesAndAcceptsAliases) {
  Machine("a100-40gb:1");
  opts_.profile_allowlist = {"1g.5gb", "3g.20gb"};
  Start();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("a", {Spec("1g.5gb")})));
  EXPECT_THAT(
      mgr_->Allocate(OpaqueReq("b", {Spec("2g.10gb")})),
      StatusIs(StatusCode::kPermissionDenied,
               HasSubstr("profile 2g.10gb is not in migProfileAllowlist (1g.5gb, 3g.20gb)")));
  EXPECT_THAT(mgr_->Plan({Spec("2g.10gb")}), StatusIs(StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(listener_.allocations(), ElementsAre("a:OK:create", "b:PERMISSION_DENIED:none"));
  // Reload: the list can be widened without a restart.
  ManagerPolicy p = mgr_->policy();
  p.profile_allowlist.clear();
  ENGINE_ASSERT_OK(mgr_->SetPolicy(p));
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("b", {Spec("2g.10gb")})));
}

TEST_F(EventsTest, SetPolicyRejectsUnknownProfilesAndChangesNothing) {
  Machine("a100-40gb:1");
  Start();
  const ManagerPolicy before = mgr_->policy();
  ManagerPolicy p;
  p.warm_pool = {{"9g.1gb", 1}};
  EXPECT_THAT(mgr_->SetPolicy(p), StatusIs(StatusCode::kInvalidArgument,
                                           HasSubstr("lifecycle.warmPool: profile 9g.1gb")));
  p.warm_pool.clear();
  p.profile_allowlist = {"1g.5gb", "nope"};
  EXPECT_THAT(mgr_->SetPolicy(p), StatusIs(StatusCode::kInvalidArgument,
                                           HasSubstr("migProfileAllowlist: profile nope")));
  p.profile_allowlist.clear();
  p.idle_ttl = std::chrono::seconds(0);
  EXPECT_THAT(mgr_->SetPolicy(p), StatusIs(StatusCode::kInvalidArgument, HasSubstr("idleTTL")));
  EXPECT_EQ(mgr_->policy(), before);
}

TEST_F(EventsTest, CreateRejectsUnknownWarmPoolProfile) {
  Machine("a100-40gb:1");
  opts_.warm_pool = {{"1g.6gb", 1}};  // an A30 profile, not on this GPU
  EXPECT_THAT(Make(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("1g.6gb")));
}

TEST_F(EventsTest, GpusListsEveryGpuWithTablesOnlyForMigEnabledOnes) {
  Machine("a100-40gb:1,h100-80gb:1:mig-off");
  Start();
  std::vector<GpuView> gpus = mgr_->Gpus();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].info.index, GpuIndex(0));
  ASSERT_NE(gpus[0].model, nullptr);
  EXPECT_EQ(gpus[0].model->memory_slices, 8u);
  EXPECT_EQ(gpus[1].info.index, GpuIndex(1));
  EXPECT_EQ(gpus[1].model, nullptr);
  EXPECT_FALSE(gpus[1].info.mig.current == driver::MigMode::kEnabled);
}

TEST_F(EventsTest, ReconcileErrorsAreCounted) {
  Machine("a100-40gb:1");
  Start();
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce());
  faults_->FailNthCall(driver::FaultInjectingDriver::Method::kListGpuInstances, 1,
                       UnknownError("NVML_ERROR_UNKNOWN"));
  EXPECT_FALSE(mgr_->ReconcileOnce().ok());
  ManagerCounters c = mgr_->counters();
  EXPECT_EQ(c.reconcile_runs, 2u);
  EXPECT_EQ(c.reconcile_errors, 1u);
}

}  // namespace
}  // namespace migd::engine
