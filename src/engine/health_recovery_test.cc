// The recovery policy of a lost GPU (health.clearRecoveredGpus;
// engine/engine_health.h): a GPU whose only mark is a loss is listed by
// LostGpus and cleared by ClearRecoveredGpu, durably; a fault's mark never
// is; the marks of its instances stay.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "base/file_util.h"
#include "engine/manager.h"
#include "engine/manager_testing.h"
#include "store/gpu_mark_store.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::engine::testing::OpaqueReq;
using ::migd::engine::testing::Spec;

class HealthRecoveryPolicyTest : public testing::FakeHardwareTest {
 protected:
  InstanceView One(const std::string& id, std::optional<uint32_t> gpu = 0) {
    StatusOr<Allocation> a = mgr_->Allocate(OpaqueReq(id, {Spec("1g.5gb", gpu)}));
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? a->instances[0] : InstanceView{};
  }
  std::string MarkFile(uint32_t gpu) {
    return StateDir() + "/" + std::string(store::kGpuMarkDirName) + "/" +
           mgr_->Gpus()[gpu].info.uuid.value() + ".json";
  }
  // The cause recorded in GPU `gpu`'s mark file.
  std::string RecordedCause(uint32_t gpu) {
    StatusOr<std::string> text = ReadFileToString(MarkFile(gpu));
    if (!text.ok()) return "no file: " + text.status().ToString();
    StatusOr<store::GpuMark> mark = store::DecodeGpuMark(*text, MarkFile(gpu));
    if (!mark.ok()) return mark.status().ToString();
    return std::string(store::GpuMarkCauseName(mark->cause));
  }
  std::vector<uint32_t> Lost() {
    std::vector<uint32_t> out;
    for (const LostGpu& l : mgr_->health_sink().LostGpus()) out.push_back(l.gpu.value());
    return out;
  }
};

TEST_F(HealthRecoveryPolicyTest, ALostGpuIsClearedByPolicyAndItsInstancesStayUnhealthy) {
  Machine("a100-40gb:2");
  Start();
  const InstanceView active = One("r1", 0);
  mgr_->health_sink().MarkGpuLost(GpuIndex(0), "GPU 0: gpu-lost");
  EXPECT_EQ(RecordedCause(0), "lost");
  const std::vector<LostGpu> lost = mgr_->health_sink().LostGpus();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].gpu.value(), 0u);
  EXPECT_EQ(lost[0].uuid, mgr_->Gpus()[0].info.uuid);

  mgr_->health_sink().ClearRecoveredGpu(GpuIndex(0));
  EXPECT_FALSE(mgr_->Gpus()[0].unhealthy);
  EXPECT_TRUE(Lost().empty());
  EXPECT_NE(::access(MarkFile(0).c_str(), F_OK), 0);
  // The instance that lived through the loss stays unhealthy: destroyed on
  // release, never reused; the GPU takes new allocations again.
  EXPECT_TRUE(Get(active.mig_uuid).unhealthy);
  const InstanceView fresh = One("r2", 0);
  EXPECT_NE(fresh.mig_uuid, active.mig_uuid);
  ENGINE_ASSERT_OK(mgr_->Release("r1"));
  EXPECT_EQ(Get(active.mig_uuid).state, InstanceState::kNone);
  Restart();
  EXPECT_FALSE(mgr_->Gpus()[0].unhealthy);
  Consistent();
}

TEST_F(HealthRecoveryPolicyTest, AFaultMarkIsNeverClearedByPolicy) {
  Machine("a100-40gb:1");
  Start();
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  EXPECT_EQ(RecordedCause(0), "fault");
  EXPECT_TRUE(Lost().empty());
  mgr_->health_sink().ClearRecoveredGpu(GpuIndex(0));
  EXPECT_TRUE(mgr_->Gpus()[0].unhealthy);
  EXPECT_EQ(::access(MarkFile(0).c_str(), F_OK), 0);
}

TEST_F(HealthRecoveryPolicyTest, AFaultAfterALossMakesTheMarkAFaultsOnDiskToo) {
  Machine("a100-40gb:1");
  Start();
  mgr_->health_sink().MarkGpuLost(GpuIndex(0), "GPU 0: gpu-lost");
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  EXPECT_TRUE(Lost().empty());
  EXPECT_EQ(RecordedCause(0), "fault");
  EXPECT_EQ(mgr_->Gpus()[0].health_reason, "GPU 0: gpu-lost");  // the first reason stays
  Restart();
  EXPECT_TRUE(Lost().empty());
  mgr_->health_sink().ClearRecoveredGpu(GpuIndex(0));
  EXPECT_TRUE(mgr_->Gpus()[0].unhealthy);
}

TEST_F(HealthRecoveryPolicyTest, ALossMarkIsStillALossAfterARestart) {
  Machine("a100-40gb:2");
  Start();
  mgr_->health_sink().MarkGpuLost(GpuIndex(1), "GPU 1: gpu-lost");
  Restart();
  EXPECT_TRUE(mgr_->Gpus()[1].unhealthy);
  EXPECT_THAT(Lost(), ::testing::ElementsAre(1u));
  mgr_->health_sink().ClearRecoveredGpu(GpuIndex(1));
  EXPECT_FALSE(mgr_->Gpus()[1].unhealthy);
  Restart();
  EXPECT_FALSE(mgr_->Gpus()[1].unhealthy);
  EXPECT_TRUE(Lost().empty());
}

TEST_F(HealthRecoveryPolicyTest, TheOperatorsClearEndsTheLossToo) {
  Machine("a100-40gb:1");
  Start();
  mgr_->health_sink().MarkGpuLost(GpuIndex(0), "GPU 0: gpu-lost");
  MIGD_ASSERT_OK(mgr_->ClearGpuHealth(GpuIndex(0)).status());
  EXPECT_TRUE(Lost().empty());
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  EXPECT_TRUE(Lost().empty());  // a fault now; the earlier loss is gone
  EXPECT_EQ(RecordedCause(0), "fault");
}

}  // namespace
}  // namespace migd::engine
