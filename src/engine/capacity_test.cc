// ComputeCapacity: slice accounting by state and the fragmentation score.
#include "engine/capacity.h"

#include <gtest/gtest.h>

#include "mig/catalog.h"

namespace migd::engine {
namespace {

class CapacityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = mig::Catalog::Default().FindModel("a100-40gb");
    ASSERT_NE(model_, nullptr);
    gpu_.info.index = GpuIndex(0);
    gpu_.model = model_;
  }
  void Add(const std::string& profile, uint32_t start, InstanceState state) {
    const mig::GiProfile* p = model_->FindProfileByName(profile);
    ASSERT_NE(p, nullptr) << profile;
    InstanceView v;
    v.gpu = GpuIndex(0);
    v.profile = p->name;
    v.profile_id = p->id;
    v.placement = {start, p->placement_size()};
    v.state = state;
    snap_.instances.push_back(v);
  }
  void AddForeign(const std::string& profile, uint32_t start) {
    const mig::GiProfile* p = model_->FindProfileByName(profile);
    ASSERT_NE(p, nullptr) << profile;
    ForeignInstance f;
    f.gpu = GpuIndex(0);
    f.profile_id = p->id;
    f.profile = p->name;
    f.placement = {start, p->placement_size()};
    snap_.foreign.push_back(f);
  }
  const mig::GpuModel* model_ = nullptr;
  GpuView gpu_;
  ManagerSnapshot snap_;
};

TEST_F(CapacityTest, EmptyGpuIsAllFreeAndUnfragmented) {
  GpuCapacity c = ComputeCapacity(gpu_, snap_);
  EXPECT_EQ(c.memory_slices, 8u);
  EXPECT_EQ(c.free_slices, 8u);
  EXPECT_EQ(c.fragmentation, 0.0);
  EXPECT_EQ(c.largest_free_profile, "7g.40gb");
}

TEST_F(CapacityTest, SlicesAreCountedByState) {
  Add("3g.20gb", 4, InstanceState::kActive);
  Add("1g.5gb", 0, InstanceState::kIdle);
  Add("1g.5gb", 1, InstanceState::kError);
  AddForeign("1g.5gb", 2);
  GpuCapacity c = ComputeCapacity(gpu_, snap_);
  EXPECT_EQ(c.active_slices, 5u);  // 3g spans 4 memory slices, + the Error 1g
  EXPECT_EQ(c.idle_slices, 1u);
  EXPECT_EQ(c.foreign_slices, 1u);
  EXPECT_EQ(c.free_slices, 1u);
}

TEST_F(CapacityTest, InstancesOfOtherGpusAreIgnored) {
  Add("7g.40gb", 0, InstanceState::kActive);
  snap_.instances.back().gpu = GpuIndex(1);
  EXPECT_EQ(ComputeCapacity(gpu_, snap_).free_slices, 8u);
}

TEST_F(CapacityTest, FragmentedFreeSpaceScoresAboveZero) {
  // 1g at 0, 1g at 4 and 2g at 6 leave slices 1, 2, 3 and 5 free: four
  // slices, but a 3g/4g needs 0-3 or 4-7; a 2g fits at 2. P* spans 4 slices,
  // the best creatable 2: 1 - 2/4 = 0.5.
  Add("1g.5gb", 0, InstanceState::kActive);
  Add("1g.5gb", 4, InstanceState::kActive);
  Add("2g.10gb", 6, InstanceState::kActive);
  GpuCapacity c = ComputeCapacity(gpu_, snap_);
  EXPECT_EQ(c.free_slices, 4u);
  EXPECT_EQ(c.largest_free_profile, "2g.10gb");
  EXPECT_DOUBLE_EQ(c.fragmentation, 0.5);
}

TEST_F(CapacityTest, AlignedFreeSpaceScoresZero) {
  Add("4g.20gb", 0, InstanceState::kActive);
  GpuCapacity c = ComputeCapacity(gpu_, snap_);
  EXPECT_EQ(c.free_slices, 4u);
  EXPECT_DOUBLE_EQ(c.fragmentation, 0.0);
}

TEST_F(CapacityTest, FullGpuScoresZeroAndNoModelGivesZeros) {
  Add("7g.40gb", 0, InstanceState::kIdle);
  GpuCapacity c = ComputeCapacity(gpu_, snap_);
  EXPECT_EQ(c.free_slices, 0u);
  EXPECT_EQ(c.fragmentation, 0.0);
  EXPECT_EQ(c.largest_free_profile, "");
  GpuView off;
  off.info.index = GpuIndex(0);
  GpuCapacity none = ComputeCapacity(off, snap_);
  EXPECT_EQ(none.memory_slices, 0u);
  EXPECT_EQ(none.free_slices, 0u);
}

}  // namespace
}  // namespace migd::engine
