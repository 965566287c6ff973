// PlanContainer's cross-checks, each refusal naming its field.
#include "k8s/apiserver/container_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "k8s/apiserver/hami_annotations.h"
#include "k8s/apiserver/testing/fake_api_server.h"
#include "k8s/apiserver/testing/hami_scheduler.h"
#include "mig/catalog.h"
#include "testing/status_matchers.h"

namespace migd::k8s {
namespace {

using ::migd::k8s::testing::HamiReservation;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kGpuA[] = "GPU-aaaaaaaa-1111-2222-3333-444444444444";
constexpr char kGpuB[] = "GPU-bbbbbbbb-1111-2222-3333-444444444444";
constexpr char kNode[] = "node-1";

engine::GpuView Gpu(int index, const char* uuid) {
  engine::GpuView g;
  g.info.index = GpuIndex(index);
  g.info.uuid = GpuUuid(uuid);
  g.info.name = "NVIDIA A100-SXM4-40GB";
  g.model = mig::Catalog::Default().FindModel("a100-40gb");
  return g;
}

class ContainerPlanTest : public ::testing::Test {
 protected:
  // A pod as HAMi's scheduler annotates it (FilterAnnotations), with limits.
  void MakePod(const std::vector<HamiReservation>& res, std::vector<std::string> init = {},
               std::vector<std::string> ctrs = {"main"}) {
    testing::PodSpec spec;
    spec.name = "p";
    spec.uid = "uid-p";
    spec.node = kNode;
    spec.init_containers = std::move(init);
    spec.containers = std::move(ctrs);
    std::vector<std::string> names = spec.init_containers;
    names.insert(names.end(), spec.containers.begin(), spec.containers.end());
    std::map<int, int> n;
    for (const HamiReservation& r : res) ++n[r.container_index];
    for (const auto& [i, count] : n)
      spec.limits[names[i]]["nvidia.com/gpu"] = std::to_string(count);
    spec.annotations = scheduler_.FilterAnnotations(spec, res);
    pod_ = ParsePodObject(testing::MakePod(spec), "pod").value();
  }
  StatusOr<ContainerPlan> Plan(std::vector<std::string> ids, std::set<int> served = {}) {
    PlanInput in{.pod = &pod_,
                 .device_ids = std::move(ids),
                 .gpus = {Gpu(0, kGpuA), Gpu(1, kGpuB)},
                 .device_split_count = 10,
                 .profile_allowlist = allowlist_,
                 .resource_name = "nvidia.com/gpu",
                 .served = std::move(served)};
    return PlanContainer(in);
  }
  void SetAnnotation(const std::string& key, const std::string& value) {
    pod_.meta.annotations[key] = value;
  }

  FakeClock clock_;
  testing::FakeApiServer api_;  // not started: FilterAnnotations only
  testing::FakeHamiScheduler scheduler_{&api_, &clock_, kNode};
  PodObject pod_;
  std::set<std::string> allowlist_;
};

TEST_F(ContainerPlanTest, MatchingRequestIsPlannedOnTheReservedGpusAndPlacements) {
  MakePod({{0, kGpuB, "3g.20gb", {4, 4}}, {0, kGpuA, "2g.10gb", {0, 2}}});
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerPlan plan,
                            Plan({std::string(kGpuA) + "-7", std::string(kGpuB) + "-0"}));
  EXPECT_EQ(plan.container_index, 0);
  EXPECT_EQ(plan.container_name, "main");
  ASSERT_EQ(plan.instances.size(), 2u);
  EXPECT_EQ(plan.instances[0].gpu, GpuIndex(1));
  EXPECT_EQ(plan.instances[0].profile, "3g.20gb");
  EXPECT_EQ(plan.instances[0].placement, (mig::Placement{4, 4}));
  EXPECT_EQ(plan.instances[1].gpu, GpuIndex(0));
}

TEST_F(ContainerPlanTest, DeviceIdsMigdDoesNotAdvertiseAreRefused) {
  MakePod({{0, kGpuA, "2g.10gb", {0, 2}}});
  for (const std::string& bad : {std::string(kGpuA) + "-10", std::string("GPU-elsewhere-0"),
                                 std::string(kGpuA), std::string("MIG-x")}) {
    EXPECT_THAT(Plan({bad}), StatusIs(StatusCode::kInvalidArgument,
                                      HasSubstr("kubelet passed device id \"" + bad + "\"")))
        << bad;
  }
}

TEST_F(ContainerPlanTest, ReservationOnAGpuKubeletDidNotPassIsRefused) {
  MakePod({{0, kGpuA, "2g.10gb", {0, 2}}});
  EXPECT_THAT(Plan({std::string(kGpuB) + "-0"}),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr(std::string("reserves container main on [") + kGpuA +
                                 "] but kubelet's device ids")));
}

TEST_F(ContainerPlanTest, ReservationDisagreeingWithTheDeviceListIsRefused) {
  MakePod({{0, kGpuA, "2g.10gb", {0, 2}}});
  SetAnnotation(hami::kDevicesToAllocate, std::string(kGpuB) + ",NVIDIA,9856,29:;");
  EXPECT_THAT(Plan({std::string(kGpuA) + "-0"}),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("[containerIndex 0, deviceIndex 0].gpuUUID")));
}

TEST_F(ContainerPlanTest, ProfileAndPlacementAreChecked) {
  MakePod({{0, kGpuA, "5g.35gb", {0, 2}}});
  EXPECT_THAT(Plan({std::string(kGpuA) + "-0"}),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("].profile \"5g.35gb\" is not a MIG profile of NVIDIA A100")));
  MakePod({{0, kGpuA, "2g.10gb", {1, 2}}});
  EXPECT_THAT(Plan({std::string(kGpuA) + "-0"}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("].placement")));
  MakePod({{0, kGpuA, "2g.10gb", {0, 2}}});
  allowlist_ = {"1g.5gb", "3g.20gb"};
  EXPECT_THAT(Plan({std::string(kGpuA) + "-0"}),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("\"2g.10gb\" is not in migd's migProfileAllowlist")));
}

TEST_F(ContainerPlanTest, CountsMustAgree) {
  MakePod({{0, kGpuA, "2g.10gb", {0, 2}}, {0, kGpuA, "1g.5gb", {6, 1}}});
  EXPECT_THAT(Plan({std::string(kGpuA) + "-0"}),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("requests 2 nvidia.com/gpu but kubelet passed 1 device ids")));
  SetAnnotation(hami::kMigAllocations, "[]");
  EXPECT_THAT(Plan({std::string(kGpuA) + "-0", std::string(kGpuA) + "-1"}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("has 0 reservations")));
}

TEST_F(ContainerPlanTest, TheContainerMustBeTheOneKubeletIsAdmitting) {
  MakePod({{0, kGpuA, "1g.5gb", {6, 1}}, {1, kGpuA, "2g.10gb", {0, 2}}}, {"init"}, {"main"});
  // The device list skips the init container, which still requests a GPU.
  SetAnnotation(hami::kDevicesToAllocate, std::string(";") + kGpuA + ",NVIDIA,9856,29:;");
  EXPECT_THAT(Plan({std::string(kGpuA) + "-0"}),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("the next container to allocate is main (index 1) but kubelet "
                                 "is admitting init (index 0)")));
  // Once migd served the init container, the main container is next.
  MIGD_ASSERT_OK_AND_ASSIGN(ContainerPlan plan, Plan({std::string(kGpuA) + "-0"}, {0}));
  EXPECT_EQ(plan.container_name, "main");
}

TEST_F(ContainerPlanTest, NothingLeftOrOutOfRangeIsRefused) {
  MakePod({{0, kGpuA, "2g.10gb", {0, 2}}});
  SetAnnotation(hami::kDevicesToAllocate, ";");
  EXPECT_THAT(Plan({std::string(kGpuA) + "-0"}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("no container left")));
  SetAnnotation(hami::kDevicesToAllocate, std::string(";;") + kGpuA + ",NVIDIA,1,1:;");
  EXPECT_THAT(
      Plan({std::string(kGpuA) + "-0"}),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("container index 2 is out of range")));
  SetAnnotation(hami::kDevicesToAllocate, "garbage");
  EXPECT_THAT(Plan({std::string(kGpuA) + "-0"}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("fewer than 4 fields")));
}

}  // namespace
}  // namespace migd::k8s
