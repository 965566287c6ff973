// Durable health (engine/engine_health.h): an instance mark is written to the
// instance's record and a GPU's mark to the GpuMarkStore, both restored by
// recovery, so a restarted Manager on the same state dir still never hands
// the instance out nor allocates on the GPU; a mark it cannot read fails
// closed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/manager.h"
#include "engine/manager_testing.h"
#include "store/gpu_mark_store.h"
#include "testing/temp_dir.h"
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
  EXPECT_FALSE(mgr_->Gpus()[0].unhealthy);
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

// The GPU's own mark file, as GpuMarkStore names it.
std::string MarkFile(const std::string& state_dir, const GpuUuid& gpu) {
  return state_dir + "/" + std::string(store::kGpuMarkDirName) + "/" + gpu.value() + ".json";
}

TEST_F(HealthDurableTest, AnUnhealthyGpuStaysUnhealthyAfterARestart) {
  Machine("a100-40gb:2");
  Start();
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: gpu-lost");
  Restart();
  const std::vector<GpuView> gpus = mgr_->Gpus();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_TRUE(gpus[0].unhealthy);
  EXPECT_EQ(gpus[0].health_reason, "GPU 0: gpu-lost");
  EXPECT_FALSE(gpus[1].unhealthy);
  // No allocation lands there: pinned ones fail, the others go elsewhere.
  EXPECT_THAT(mgr_->Allocate(OpaqueReq("p", {Spec("1g.5gb", 0)})).status(),
              ::migd::testing::StatusIs(StatusCode::kFailedPrecondition,
                                        ::testing::HasSubstr("GPU 0")));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(One("r" + std::to_string(i), std::nullopt).gpu.value(), 1u);
  Consistent();
}

TEST_F(HealthDurableTest, ClearingAGpuRemovesItsMarkFileAndARestartKeepsItHealthy) {
  Machine("a100-40gb:1");
  Start();
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  const std::string file = MarkFile(StateDir(), mgr_->Gpus()[0].info.uuid);
  EXPECT_EQ(::access(file.c_str(), F_OK), 0);
  MIGD_ASSERT_OK(mgr_->ClearGpuHealth(GpuIndex(0)).status());
  EXPECT_NE(::access(file.c_str(), F_OK), 0);
  Restart();
  EXPECT_FALSE(mgr_->Gpus()[0].unhealthy);
  One("r1", 0);
}

TEST_F(HealthDurableTest, AGpuMarkOfAnotherBootIsDropped) {
  Machine("a100-40gb:1");
  Start();
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  const std::string file = MarkFile(StateDir(), mgr_->Gpus()[0].info.uuid);
  opts_.boot_id = "boot-after-reboot";
  Restart();
  EXPECT_FALSE(mgr_->Gpus()[0].unhealthy);
  EXPECT_NE(::access(file.c_str(), F_OK), 0);
}

TEST_F(HealthDurableTest, ACorruptGpuMarkFailsClosedUntilTheOperatorClearsIt) {
  Machine("a100-40gb:2");
  Start();
  const std::string file = MarkFile(StateDir(), mgr_->Gpus()[1].info.uuid);
  mgr_.reset();
  migd::testing::WriteFileOrDie(file, "{\"version\": 1, \"gpuUUID\": tru");
  Restart();
  GpuView g = mgr_->Gpus()[1];
  EXPECT_TRUE(g.unhealthy);
  EXPECT_THAT(g.health_reason, ::testing::HasSubstr("unreadable health mark (" + file));
  EXPECT_THAT(g.health_reason, ::testing::HasSubstr("migctl health clear --gpu 1"));
  EXPECT_FALSE(mgr_->Gpus()[0].unhealthy);
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("p", {Spec("1g.5gb", 1)})).ok());
  // A second restart still reads it unhealthy: the file is never dropped.
  Restart();
  EXPECT_TRUE(mgr_->Gpus()[1].unhealthy);
  MIGD_ASSERT_OK_AND_ASSIGN(HealthClearResult cleared, mgr_->ClearGpuHealth(GpuIndex(1)));
  EXPECT_TRUE(cleared.gpu_was_unhealthy);
  EXPECT_NE(::access(file.c_str(), F_OK), 0);
  Restart();
  EXPECT_FALSE(mgr_->Gpus()[1].unhealthy);
  One("r1", 1);
}

TEST_F(HealthDurableTest, AMarkThatCannotBeRemovedFailsTheClearAndKeepsTheGpuUnhealthy) {
  Machine("a100-40gb:1");
  Start();
  // A directory where the mark file goes: unreadable as a mark (fail
  // closed) and not removable by unlink.
  const std::string file = MarkFile(StateDir(), mgr_->Gpus()[0].info.uuid);
  mgr_.reset();
  migd::testing::WriteFileOrDie(file + "/x", "");
  Restart();
  EXPECT_TRUE(mgr_->Gpus()[0].unhealthy);
  EXPECT_THAT(mgr_->ClearGpuHealth(GpuIndex(0)).status(),
              ::migd::testing::StatusIs(
                  StatusCode::kFailedPrecondition,
                  ::testing::HasSubstr("GPU 0: cannot remove its health mark, nothing was cleared")));
  EXPECT_TRUE(mgr_->Gpus()[0].unhealthy);
}

TEST_F(HealthDurableTest, AMarkOfAGpuThisNodeDoesNotHaveChangesNothingAndStays) {
  Machine("a100-40gb:1");
  Start();
  mgr_.reset();
  const GpuUuid absent("GPU-00000000-1111-2222-3333-444444444444");
  {
    MIGD_ASSERT_OK_AND_ASSIGN(auto marks, store::GpuMarkStore::Open(StateDir(), opts_.boot_id,
                                                                    clock_));
    store::GpuMark mark;
    mark.gpu_uuid = absent;
    mark.gpu_index = 3;
    mark.reason = "GPU 3: lost";
    MIGD_ASSERT_OK(marks->Put(std::move(mark)));
  }
  Restart();
  EXPECT_FALSE(mgr_->Gpus()[0].unhealthy);
  EXPECT_EQ(::access(MarkFile(StateDir(), absent).c_str(), F_OK), 0);
  One("r1", 0);
}

}  // namespace
}  // namespace migd::engine
