// Durable health (engine/engine_health.h): an instance mark is written to the
// instance's record and restored by recovery, so a restarted Manager on the
// same state dir still never hands the instance out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/manager.h"
#include "engine/manager_testing.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::engine::testing::LiveLayout;
using ::migd::engine::testing::OpaqueReq;
using ::migd::engine::testing::Spec;

class HealthDurableTest : public testing::FakeHardwareTest {
 protected:
  InstanceView One(const std::string& id, std::optional<uint32_t> gpu = 0) {
    StatusOr<Allocation> a = mgr_->Allocate(OpaqueReq(id, {Spec("1g.5gb", gpu)}));
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? a->instances[0] : InstanceView{};
  }
  // The "unhealthy" field of the record of `mig_uuid` on disk.
  std::optional<std::string> RecordedHealth(const MigUuid& mig_uuid) {
    StatusOr<store::LoadResult> all = store_->LoadAll();
    EXPECT_TRUE(all.ok()) << all.status();
    if (!all.ok()) return std::nullopt;
    for (const store::Record& r : all->records) {
      if (r.mig_uuid == mig_uuid) return r.unhealthy;
    }
    ADD_FAILURE() << "no record of " << mig_uuid.value();
    return std::nullopt;
  }
};

TEST_F(HealthDurableTest, AnInstanceMarkIsWrittenToItsRecord) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView v = One("r1");
  EXPECT_EQ(RecordedHealth(v.mig_uuid), std::nullopt);
  mgr_->health_sink().MarkInstanceUnhealthy(v.gpu, v.gi_id, v.ci_id, 94);
  EXPECT_EQ(RecordedHealth(v.mig_uuid), "xid 94");
  Consistent();
}

TEST_F(HealthDurableTest, AnUnhealthyIdleInstanceIsStillNotReusedAfterARestart) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView first = One("r1");
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  mgr_->health_sink().MarkInstanceUnhealthy(first.gpu, first.gi_id, first.ci_id, 94);
  Restart();
  EXPECT_EQ(Get(first.mig_uuid).state, InstanceState::kIdle);  // recovered, until reclaimed
  const InstanceView second = One("r2");
  EXPECT_NE(second.mig_uuid, first.mig_uuid);
  ENGINE_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_EQ(Get(first.mig_uuid).state, InstanceState::kNone);
  Consistent();
}

TEST_F(HealthDurableTest, AnUnhealthyActiveInstanceIsDestroyedOnReleaseAfterARestart) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView v = One("r1");
  mgr_->health_sink().MarkInstanceUnhealthy(v.gpu, v.gi_id, v.ci_id, 94);
  Restart();
  EXPECT_EQ(Get(v.mig_uuid).state, InstanceState::kActive);
  EXPECT_EQ(RecordedHealth(v.mig_uuid), "xid 94");  // recovery's rewrite keeps it
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  EXPECT_EQ(Get(v.mig_uuid).state, InstanceState::kNone);
  EXPECT_TRUE(LiveLayout(*fake_).empty());
  Consistent();
}

TEST_F(HealthDurableTest, AGpuMarkIsWrittenToTheRecordsOfItsInstances) {
  Machine("a100-40gb:2");
  Start();
  const InstanceView on0 = One("a", 0);
  const InstanceView on1 = One("b", 1);
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: gpu-lost");
  Restart();
  EXPECT_EQ(RecordedHealth(on0.mig_uuid), "GPU unhealthy: GPU 0: gpu-lost");
  EXPECT_EQ(RecordedHealth(on1.mig_uuid), std::nullopt);
  ENGINE_ASSERT_OK(mgr_->Release("a"));
  EXPECT_EQ(Get(on0.mig_uuid).state, InstanceState::kNone);
  Consistent();
}

TEST_F(HealthDurableTest, ClearingAGpuClearsItsMarksDurably) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView v = One("r1");
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  MIGD_ASSERT_OK_AND_ASSIGN(HealthClearResult cleared, mgr_->ClearGpuHealth(GpuIndex(0)));
  EXPECT_EQ(cleared.instances_cleared, 1u);
  EXPECT_TRUE(cleared.gpu_was_unhealthy);
  EXPECT_EQ(RecordedHealth(v.mig_uuid), std::nullopt);
  Restart();
  // Healthy again: the Idle instance is reused, the GPU takes allocations.
  EXPECT_EQ(One("r2").mig_uuid, v.mig_uuid);
  Consistent();
}

TEST_F(HealthDurableTest, ClearingAHealthyGpuIsANoOp) {
  Machine("a100-40gb:1");
  Start();
  const InstanceView v = One("r1");
  MIGD_ASSERT_OK_AND_ASSIGN(HealthClearResult cleared, mgr_->ClearGpuHealth(GpuIndex(0)));
  EXPECT_EQ(cleared.instances_cleared, 0u);
  EXPECT_FALSE(cleared.gpu_was_unhealthy);
  EXPECT_EQ(Get(v.mig_uuid).state, InstanceState::kActive);
  Consistent();
}

TEST_F(HealthDurableTest, ClearingAnUnknownGpuIsNotFound) {
  Machine("a100-40gb:1");
  Start();
  EXPECT_THAT(mgr_->ClearGpuHealth(GpuIndex(7)).status(),
              ::migd::testing::StatusIs(StatusCode::kNotFound,
                                        ::testing::HasSubstr("GPU 7 is not on this node")));
}

}  // namespace
}  // namespace migd::engine
