#include "k8s/podresources/kube_pod_lister.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "k8s/apiserver/testing/fake_api_server.h"
#include "testing/status_matchers.h"

namespace migd::k8s {
namespace {

using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
constexpr char kMig[] = "MIG-11111111-2222-3333-4444-555555555555";

std::string Realised() {
  return std::string(R"([{"containerIndex":1,"deviceIndex":0,"gpuUUID":")") + kGpu +
         R"(","profile":"1g.10gb","placement":{"start":3,"size":1},"migUUID":")" + kMig +
         R"(","gpuInstanceID":9,"computeInstanceID":0}])";
}

testing::PodSpec Spec(std::string name, std::string uid, std::string node,
                      std::map<std::string, std::string> annotations = {}) {
  testing::PodSpec spec;
  spec.name = std::move(name);
  spec.uid = std::move(uid);
  spec.node = std::move(node);
  spec.annotations = std::move(annotations);
  return spec;
}

class KubeHamiPodListerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    KubeConfig config;
    config.server = server_.url();
    MIGD_ASSERT_OK_AND_ASSIGN(client_, KubeClient::Create(config));
  }
  testing::FakeApiServer server_;
  std::unique_ptr<KubeClient> client_;
};

TEST_F(KubeHamiPodListerTest, DecodesPodsOfThisNode) {
  testing::PodSpec train =
      Spec("train", "uid-1", "node-a", {{"hami.io/vgpu-mig-allocations", Realised()}});
  train.ns = "ml";
  train.init_containers = {"setup"};
  train.phase = "Running";
  server_.AddPod(testing::MakePod(train));
  server_.AddPod(testing::MakePod(Spec("elsewhere", "uid-2", "node-b")));
  KubeHamiPodLister lister(*client_, "node-a");
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<HamiNodePod> pods, lister.ListNodePods());
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].pod_namespace, "ml");
  EXPECT_EQ(pods[0].pod_name, "train");
  EXPECT_EQ(pods[0].uid, PodUid("uid-1"));
  EXPECT_EQ(pods[0].phase, "Running");
  EXPECT_FALSE(pods[0].deleting);
  EXPECT_THAT(pods[0].containers, ElementsAre("setup", "main"));
  ASSERT_EQ(pods[0].reservations.size(), 1u);
  const HamiMigReservation& r = pods[0].reservations[0];
  EXPECT_EQ(r.container_index, 1);
  EXPECT_EQ(r.gpu_uuid, GpuUuid(kGpu));
  EXPECT_EQ(r.placement, (mig::Placement{.start = 3, .size = 1}));
  EXPECT_EQ(r.mig_uuid, MigUuid(kMig));
  EXPECT_EQ(r.gi_id, NvmlGiId(9));
  EXPECT_EQ(r.ci_id, NvmlCiId(0));

  // The whole path: the hami owner source over the API server.
  HamiOwnerSource source(lister);
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<engine::OwnedInstance> owned, source.ActiveOwners({}));
  ASSERT_EQ(owned.size(), 1u);
  EXPECT_EQ(owned[0].owner, store::Owner::Pod("ml", "train", PodUid("uid-1"), "main"));
}

TEST_F(KubeHamiPodListerTest, DeletionTimestampMeansDeleting) {
  nlohmann::json pod = testing::MakePod(Spec("p", "u", "n"));
  pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  MIGD_ASSERT_OK_AND_ASSIGN(HamiNodePod decoded, HamiNodePodFromJson(pod));
  EXPECT_TRUE(decoded.deleting);
}

TEST_F(KubeHamiPodListerTest, UndecodableAnnotationIsDataLoss) {
  server_.AddPod(
      testing::MakePod(Spec("bad", "u", "n", {{"hami.io/vgpu-mig-allocations", "{not json"}})));
  KubeHamiPodLister lister(*client_, "n");
  EXPECT_THAT(lister.ListNodePods(),
              StatusIs(StatusCode::kDataLoss,
                       HasSubstr("pod default/bad: hami.io/vgpu-mig-allocations: not valid JSON")));
}

TEST_F(KubeHamiPodListerTest, PodWithoutUidIsDataLoss) {
  EXPECT_THAT(HamiNodePodFromJson(testing::MakePod(Spec("p", "", "n"))),
              StatusIs(StatusCode::kDataLoss, HasSubstr("/metadata/uid: expected the pod's uid")));
}

TEST_F(KubeHamiPodListerTest, ApiServerErrorsPassThrough) {
  KubeHamiPodLister lister(*client_, "n");
  server_.FailNext(1, 503);
  EXPECT_THAT(lister.ListNodePods(), StatusIs(StatusCode::kUnavailable, ::testing::_));
  server_.Stop();
  EXPECT_THAT(lister.ListNodePods(), StatusIs(StatusCode::kUnavailable, ::testing::_));
}

}  // namespace
}  // namespace migd::k8s
