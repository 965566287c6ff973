#include "engine/plan_input.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mig/catalog.h"

namespace migd::engine {
namespace {

constexpr char kGpu0[] = "GPU-00000000-0000-0000-0000-000000000000";
constexpr char kGpu1[] = "GPU-11111111-1111-1111-1111-111111111111";

class PlanInputTest : public ::testing::Test {
 protected:
  // GPU 0 managed (A100-40GB); GPU 1 not.
  void SetUp() override {
    std::vector<driver::GpuInfo> infos(2);
    infos[0].index = GpuIndex(0);
    infos[0].uuid = GpuUuid(kGpu0);
    infos[1].index = GpuIndex(1);
    infos[1].uuid = GpuUuid(kGpu1);
    gpus_.Init(infos, {});
    gpus_.Manage(0, infos[0], *mig::Catalog::Default().FindModel("a100-40gb"));
  }
  void Add(uint32_t gpu, uint32_t start, uint32_t size, InstanceState state,
           const std::string& mig = "", bool busy = false) {
    TrackedInstance t;
    t.id.gpu_uuid = GpuUuid(gpu == 0 ? kGpu0 : kGpu1);
    t.id.profile_id = GiProfileId(size == 1 ? 19 : 9);
    t.id.placement = {.start = start, .size = size};
    t.id.mig_uuid = MigUuid(mig);
    t.gpu = GpuIndex(gpu);
    t.profile = size == 1 ? "1g.5gb" : "3g.20gb";
    t.state = state;
    t.busy = busy;
    t.last_used = Clock::TimePoint(std::chrono::seconds(42));
    instances_[t.key()] = t;
  }
  static store::RecordKey KeyAt(uint32_t start, uint32_t size) {
    return {GpuUuid(kGpu0), GiProfileId(size == 1 ? 19 : 9), {.start = start, .size = size}};
  }
  std::vector<std::string> Occupants(const planner::PlanInput& in) {
    std::vector<std::string> out;
    for (const auto& g : in.gpus) {
      for (const auto& o : g.occupants) {
        out.push_back(std::to_string(g.index.value()) + "@" + o.placement.ToString() + ":" +
                      std::to_string(static_cast<int>(o.state)) + ":" + o.key);
      }
    }
    return out;
  }
  GpuTable gpus_;
  Registry::Instances instances_;
  Registry::Foreign foreign_;
};

TEST_F(PlanInputTest, OnlyManagedGpusAndTheRequestAreIn) {
  Add(1, 0, 1, InstanceState::kActive, "MIG-other-gpu");
  InstanceSpec spec;
  spec.profile = "1g.5gb";
  spec.gpu = GpuIndex(0);
  const planner::PlanInput in =
      BuildPlanInput(instances_, foreign_, gpus_, {spec}, {{"1g.5gb", 2}});
  ASSERT_EQ(in.gpus.size(), 1u);
  EXPECT_EQ(in.gpus[0].index, GpuIndex(0));
  EXPECT_EQ(in.gpus[0].model, gpus_.Model(0));
  EXPECT_TRUE(in.gpus[0].occupants.empty()) << "GPU 1's instance is not planned on";
  ASSERT_EQ(in.request.size(), 1u);
  EXPECT_EQ(in.request[0].profile, "1g.5gb");
  EXPECT_EQ(in.demand.at("1g.5gb"), 2.0);
}

TEST_F(PlanInputTest, EveryStateMapsToItsOccupant) {
  Add(0, 0, 1, InstanceState::kActive, "MIG-a");
  Add(0, 1, 1, InstanceState::kIdle, "MIG-i");
  Add(0, 2, 1, InstanceState::kIdle, "MIG-b", /*busy=*/true);  // a release writes its record
  Add(0, 3, 1, InstanceState::kError, "MIG-e");
  driver::GpuInstanceInfo gi;
  gi.id = NvmlGiId(7);
  gi.profile_id = GiProfileId(9);
  gi.placement = {.start = 4, .size = 4};
  foreign_[0].push_back(gi);
  const std::string active = std::to_string(static_cast<int>(planner::OccupantState::kActive));
  const std::string idle = std::to_string(static_cast<int>(planner::OccupantState::kIdle));
  const std::string error = std::to_string(static_cast<int>(planner::OccupantState::kError));
  const std::string foreign = std::to_string(static_cast<int>(planner::OccupantState::kForeign));
  const planner::PlanInput in = BuildPlanInput(instances_, foreign_, gpus_, {}, {});
  EXPECT_THAT(Occupants(in),
              ::testing::ElementsAre("0@0:1:" + active + ":MIG-a", "0@1:1:" + idle + ":MIG-i",
                                     "0@2:1:" + active + ":MIG-b",
                                     "0@3:1:" + error + ":busy:" + KeyAt(3, 1).ToString(),
                                     "0@4:4:" + foreign + ":foreign:0:7"));
  EXPECT_EQ(in.gpus[0].occupants[1].last_used, 42);
}

TEST_F(PlanInputTest, AReservedReclaimIsHiddenUnderItsCreatingPlaceholder) {
  Add(0, 4, 1, InstanceState::kReclaiming, "MIG-r");  // reserved by a request...
  Add(0, 4, 4, InstanceState::kCreating);             // ...whose placeholder replaces it
  Add(0, 0, 1, InstanceState::kDeleting, "MIG-d");    // no placeholder over it: visible
  const planner::PlanInput in = BuildPlanInput(instances_, foreign_, gpus_, {}, {});
  std::vector<std::string> keys;
  for (const auto& o : in.gpus[0].occupants) keys.push_back(o.key);
  EXPECT_THAT(keys, ::testing::ElementsAre("creating:" + KeyAt(4, 4).ToString(),
                                           "busy:" + KeyAt(0, 1).ToString()));
}

}  // namespace
}  // namespace migd::engine
