// Typed Pod/Node views over the real JSON shapes (MakePod is the fake API
// server's Pod).
#include "k8s/apiserver/pod_object.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "k8s/apiserver/testing/fake_api_server.h"
#include "testing/status_matchers.h"

namespace migd::k8s {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

nlohmann::json Pod() {
  testing::PodSpec p;
  p.ns = "ml";
  p.name = "train";
  p.uid = "uid-1";
  p.node = "node-a";
  p.init_containers = {"setup"};
  p.containers = {"main", "side"};
  p.annotations = {{"a", "x"}};
  p.limits = {{"main", {{"nvidia.com/gpu", "2"}}}};
  return testing::MakePod(p);
}

TEST(PodObjectTest, ReadsTheFieldsMigdActsOn) {
  MIGD_ASSERT_OK_AND_ASSIGN(PodObject p, ParsePodObject(Pod(), "pod"));
  EXPECT_EQ(p.Key(), "ml/train");
  EXPECT_EQ(p.meta.uid, "uid-1");
  EXPECT_EQ(p.node_name, "node-a");
  EXPECT_EQ(p.phase, "Pending");
  EXPECT_EQ(p.meta.Annotation("a"), "x");
  EXPECT_EQ(p.meta.Annotation("b"), std::nullopt);
  ASSERT_EQ(p.containers.size(), 3u);  // init containers first
  EXPECT_EQ(p.containers[0].name, "setup");
  EXPECT_TRUE(p.containers[0].init);
  EXPECT_EQ(p.containers[1].name, "main");
  EXPECT_EQ(DeviceLimit(p.containers[1], "nvidia.com/gpu").value(), 2);
  EXPECT_EQ(DeviceLimit(p.containers[2], "nvidia.com/gpu").value(), 0);
  EXPECT_TRUE(p.Active());
}

TEST(PodObjectTest, EndedPodsAreInactive) {
  nlohmann::json pod = Pod();
  pod["status"]["phase"] = "Succeeded";
  EXPECT_FALSE(ParsePodObject(pod, "pod")->Active());
  pod["status"]["phase"] = "Failed";
  EXPECT_FALSE(ParsePodObject(pod, "pod")->Active());
  pod["status"]["phase"] = "Running";
  EXPECT_TRUE(ParsePodObject(pod, "pod")->Active());
  pod["metadata"]["deletionTimestamp"] = "2026-11-29T11:00:00Z";
  EXPECT_FALSE(ParsePodObject(pod, "pod")->Active());
}

TEST(PodObjectTest, MalformedFieldsAreNamed) {
  nlohmann::json pod = Pod();
  pod["metadata"]["annotations"]["n"] = 3;
  EXPECT_THAT(
      ParsePodObject(pod, "pod ml/train").status(),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("pod ml/train: /metadata/annotations/n: expected a string, got 3")));
  pod = Pod();
  pod["metadata"].erase("uid");
  EXPECT_THAT(ParsePodObject(pod, "p", StatusCode::kDataLoss).status(),
              StatusIs(StatusCode::kDataLoss, HasSubstr("/metadata/uid: expected the pod's uid")));
  pod = Pod();
  pod["spec"]["containers"][0].erase("name");
  EXPECT_THAT(ParsePodObject(pod, "p").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("/spec/containers/0/name")));
  pod = Pod();
  pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1.5";
  MIGD_ASSERT_OK_AND_ASSIGN(PodObject p, ParsePodObject(pod, "p"));
  EXPECT_THAT(DeviceLimit(p.containers[1], "nvidia.com/gpu"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a whole number")));
}

TEST(PodObjectTest, PodListNamesTheItem) {
  nlohmann::json list{{"kind", "PodList"}, {"items", {Pod(), Pod()}}};
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<PodObject> pods, ParsePodList(list, "list"));
  EXPECT_EQ(pods.size(), 2u);
  list["items"][1]["metadata"].erase("namespace");
  EXPECT_THAT(
      ParsePodList(list, "list").status(),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("list: /items/1/metadata/namespace")));
  EXPECT_THAT(ParsePodList(nlohmann::json::object(), "list").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("/items: expected an array")));
}

TEST(ObjectMetaTest, NodeMetadata) {
  const nlohmann::json node{
      {"metadata", {{"name", "n1"}, {"resourceVersion", "7"}, {"annotations", {{"k", "v"}}}}}};
  MIGD_ASSERT_OK_AND_ASSIGN(ObjectMeta m, ReadObjectMeta(JsonReader(node, "node")));
  EXPECT_EQ(m.name, "n1");
  EXPECT_EQ(m.ns, "");
  EXPECT_EQ(m.resource_version, "7");
  EXPECT_EQ(m.Annotation("k"), "v");
}

}  // namespace
}  // namespace migd::k8s
