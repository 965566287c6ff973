// SlicePublisher against the fake API server with the resource.k8s.io
// routes: generations, idempotence, recreation, layout choice, the
// partitionable-devices gate, stale pools, conflicts, the loop.
#include "k8s/dra/slice_publisher.h"

#include <gtest/gtest.h>

#include "k8s/apiserver/kube_client.h"
#include "k8s/apiserver/testing/fake_api_server.h"
#include "k8s/dra/testing/allocator_model.h"
#include "k8s/dra/testing/fake_resource_api.h"
#include "mig/catalog.h"
#include "testing/eventually.h"
#include "testing/status_matchers.h"

namespace migd::k8s::dra {
namespace {

using Json = nlohmann::json;
using ::migd::testing::StatusIs;

constexpr char kDriver[] = "mig.migd.io";
constexpr char kNode[] = "node-a";

class SlicePublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    server_.AddNode(kNode);
    KubeConfig c;
    c.server = server_.url();
    MIGD_ASSERT_OK_AND_ASSIGN(client_, KubeClient::Create(c));
    api_ = std::make_unique<ResourceApi>(client_.get());
    const mig::GpuModel* m = mig::Catalog::Default().FindModel("a100-40gb");
    MutexLock l(&mu_);
    for (int i = 0; i < 2; ++i) {
      node_.gpus.push_back(
          {GpuIndex(i), GpuUuid("GPU-" + std::to_string(i)), "NVIDIA A100", "", m, {}});
    }
  }
  std::unique_ptr<SlicePublisher> Publisher(std::optional<CounterLayout> layout = std::nullopt,
                                            std::string pool = "") {
    SlicePublisherOptions o;
    o.driver = kDriver;
    o.node_name = kNode;
    o.pool = std::move(pool);
    o.layout = layout;
    o.resync_period = std::chrono::milliseconds(50);
    o.retry_initial = std::chrono::milliseconds(10);
    return std::make_unique<SlicePublisher>(
        api_.get(),
        [this] {
          MutexLock l(&mu_);
          return node_;
        },
        o);
  }
  void SetNode(const std::function<void(NodeSnapshot&)>& fn) {
    MutexLock l(&mu_);
    fn(node_);
  }
  // The pool's generation; kMixed while its slices disagree (in the middle
  // of the publisher's slice-by-slice rewrite, as a consumer may see it).
  static constexpr int64_t kMixed = -2;
  int64_t PoolGeneration() {
    int64_t g = -1;
    for (const Json& s : resources_.Slices()) {
      const int64_t sg = s["spec"]["pool"]["generation"];
      if (g != -1 && g != sg) return kMixed;
      g = sg;
    }
    return g;
  }
  // As PoolGeneration, once the publisher is done: mixed is a failure.
  int64_t Generation() {
    const int64_t g = PoolGeneration();
    EXPECT_NE(g, kMixed) << "mixed generations";
    return g;
  }
  size_t Devices() {
    size_t n = 0;
    for (const Json& s : resources_.Slices()) n += s["spec"].value("devices", Json::array()).size();
    return n;
  }

  k8s::testing::FakeApiServer server_;
  testing::FakeResourceApi resources_{server_};
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<ResourceApi> api_;
  Mutex mu_;
  NodeSnapshot node_ ABSL_GUARDED_BY(mu_);
};

TEST_F(SlicePublisherTest, PublishesOnceAndIsIdempotent) {
  auto pub = Publisher();
  MIGD_ASSERT_OK(pub->SyncOnce());
  EXPECT_EQ(resources_.Slices().size(), 2u);  // one counter slice, one device slice (split)
  EXPECT_EQ(Generation(), 1);
  EXPECT_EQ(Devices(), 50u);
  EXPECT_EQ(resources_.count("create"), 2);
  for (const Json& s : resources_.Slices()) {
    EXPECT_EQ(s["metadata"]["ownerReferences"][0]["uid"], "node-uid-node-a");
  }
  MIGD_ASSERT_OK(pub->SyncOnce());
  EXPECT_EQ(resources_.count("create"), 2);
  EXPECT_EQ(resources_.count("update"), 0);
  EXPECT_EQ(resources_.count("version"), 1);
  EXPECT_EQ(pub->stats().generations, 1u);
  EXPECT_EQ(pub->stats().passes, 2u);
  EXPECT_TRUE(resources_.rejections().empty());
}

TEST_F(SlicePublisherTest, LayoutChangeIsANewGenerationOfThePool) {
  auto pub = Publisher();
  MIGD_ASSERT_OK(pub->SyncOnce());
  SetNode([](NodeSnapshot& n) {
    n.gpus[0].instances.push_back({"3g.20gb", {4, 4}, Occupancy::kOther, "MIG-api", 0});
  });
  MIGD_ASSERT_OK(pub->SyncOnce());
  EXPECT_EQ(Generation(), 2);
  EXPECT_LT(Devices(), 50u);
  // An Idle instance changes the order (it comes first), so the pool too.
  SetNode([](NodeSnapshot& n) {
    n.gpus[1].instances.push_back({"1g.5gb", {3, 1}, Occupancy::kIdle, "MIG-idle", 1});
  });
  MIGD_ASSERT_OK(pub->SyncOnce());
  EXPECT_EQ(Generation(), 3);
  EXPECT_EQ(pub->stats().generation, 3);
}

TEST_F(SlicePublisherTest, RecreatesSlicesKubeletDeleted) {
  auto pub = Publisher();
  MIGD_ASSERT_OK(pub->SyncOnce());
  EXPECT_EQ(resources_.DeleteNodeSlices(kNode), 2);
  MIGD_ASSERT_OK(pub->SyncOnce());
  EXPECT_EQ(resources_.Slices().size(), 2u);
  EXPECT_EQ(Generation(), 2);  // above every generation seen before
}

TEST_F(SlicePublisherTest, LayoutFollowsTheServerVersion) {
  resources_.SetVersion(1, 34);
  auto pub = Publisher();
  MIGD_ASSERT_OK(pub->SyncOnce());
  EXPECT_EQ(pub->stats().layout, CounterLayout::kCombined);
  ASSERT_EQ(resources_.Slices().size(), 2u);
  for (const Json& s : resources_.Slices()) {
    EXPECT_EQ(s["spec"]["sharedCounters"].size(), 1u);
    EXPECT_EQ(s["spec"]["devices"].size(), 25u);
  }
  EXPECT_TRUE(testing::AllocatorModel(34).Pools(resources_.Slices(), kNode)[0].valid);
}

TEST_F(SlicePublisherTest, ConfiguredLayoutSkipsTheVersionProbe) {
  auto pub = Publisher(CounterLayout::kSplit);
  MIGD_ASSERT_OK(pub->SyncOnce());
  EXPECT_EQ(resources_.count("version"), 0);
}

TEST_F(SlicePublisherTest, DroppedCountersPublishNothing) {
  resources_.SetPartitionableDevices(false);
  auto pub = Publisher();
  Status s = pub->SyncOnce();
  EXPECT_THAT(s, StatusIs(StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_NE(s.message().find("DRAPartitionableDevices"), std::string::npos) << s;
  EXPECT_TRUE(resources_.Slices().empty());
  // Once the gate is on, the next pass publishes.
  resources_.SetPartitionableDevices(true);
  MIGD_ASSERT_OK(pub->SyncOnce());
  EXPECT_EQ(resources_.Slices().size(), 2u);
}

TEST_F(SlicePublisherTest, SlicesOfAnotherPoolNameAreDeleted) {
  auto old = Publisher(std::nullopt, "old-pool");
  MIGD_ASSERT_OK(old->SyncOnce());
  auto pub = Publisher();
  MIGD_ASSERT_OK(pub->SyncOnce());
  for (const Json& s : resources_.Slices()) EXPECT_EQ(s["spec"]["pool"]["name"], kNode);
  EXPECT_EQ(resources_.Slices().size(), 2u);
}

TEST_F(SlicePublisherTest, FailedWriteFailsThePassAndTheNextOneRepairs) {
  auto pub = Publisher();
  MIGD_ASSERT_OK(pub->SyncOnce());
  SetNode([](NodeSnapshot& n) {
    n.gpus[0].instances.push_back({"7g.40gb", {0, 8}, Occupancy::kOther, "foreign", 0});
  });
  resources_.FailNextWrites(1, 409);
  EXPECT_THAT(pub->SyncOnce(), StatusIs(StatusCode::kAborted, ::testing::_));
  MIGD_ASSERT_OK(pub->SyncOnce());
  EXPECT_EQ(Devices(), 25u);
  EXPECT_GE(Generation(), 2);
  EXPECT_EQ(pub->stats().failed_passes, 1u);
}

TEST_F(SlicePublisherTest, NoNodeObjectMeansNoOwner) {
  SlicePublisherOptions o;
  o.driver = kDriver;
  o.node_name = "node-without-object";
  SlicePublisher pub(
      api_.get(),
      [this] {
        MutexLock l(&mu_);
        return node_;
      },
      o);
  MIGD_ASSERT_OK(pub.SyncOnce());
  for (const Json& s : resources_.Slices()) EXPECT_FALSE(s["metadata"].contains("ownerReferences"));
}

TEST_F(SlicePublisherTest, LoopRepublishesOnKickAndRecreatesOnResync) {
  auto pub = Publisher();
  pub->Start();
  // The loop runs on its own thread: polls may see a pool mid-rewrite.
  ASSERT_TRUE(migd::testing::Eventually([&] { return PoolGeneration() == 1; }));
  SetNode([](NodeSnapshot& n) {
    n.gpus[1].instances.push_back({"2g.10gb", {0, 2}, Occupancy::kOther, "MIG-x", 0});
  });
  pub->OnInstanceEvent(engine::InstanceEvent{});
  ASSERT_TRUE(migd::testing::Eventually([&] { return PoolGeneration() == 2; }));
  resources_.DeleteNodeSlices(kNode);
  ASSERT_TRUE(migd::testing::Eventually(
      [&] { return resources_.Slices().size() == 2u && PoolGeneration() >= 3; }));
  pub->Stop();
  EXPECT_GE(Generation(), 3);  // stopped: no rewrite in progress
}

}  // namespace
}  // namespace migd::k8s::dra
