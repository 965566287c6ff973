#include "cli/requests.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace migd::cli {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(RequestsTest, Timeouts) {
  EXPECT_EQ(*ParseTimeout("30"), std::chrono::milliseconds(30000));
  EXPECT_EQ(*ParseTimeout("30s"), std::chrono::milliseconds(30000));
  EXPECT_EQ(*ParseTimeout("1.5s"), std::chrono::milliseconds(1500));
  EXPECT_EQ(*ParseTimeout("500ms"), std::chrono::milliseconds(500));
  EXPECT_EQ(*ParseTimeout("2m"), std::chrono::milliseconds(120000));
  for (const char* bad : {"", "0", "-1s", "s", "10h", "1e9", "nan", "0.1ms"}) {
    EXPECT_THAT(ParseTimeout(bad).status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("--timeout")))
        << bad;
  }
}

TEST(RequestsTest, PodOwners) {
  MIGD_ASSERT_OK_AND_ASSIGN(migd::v1::PodOwner pod, ParsePodOwner("ns/name/uid"));
  EXPECT_EQ(pod.namespace_(), "ns");
  EXPECT_EQ(pod.container(), "");
  EXPECT_THAT(ParsePodOwner("ns/name/uid/c/x").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("NAMESPACE/NAME/UID")));
  EXPECT_THAT(ParsePodOwner("ns/name/uid/").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("the container is empty")));
  EXPECT_THAT(ParsePodOwner("/name/uid").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("the namespace is empty")));
}

TEST(RequestsTest, States) {
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<migd::v1::InstanceState> states,
                            ParseStates({"Creating, reclaiming", "DELETING"}));
  EXPECT_EQ(states, (std::vector<migd::v1::InstanceState>{migd::v1::INSTANCE_STATE_CREATING,
                                                          migd::v1::INSTANCE_STATE_RECLAIMING,
                                                          migd::v1::INSTANCE_STATE_DELETING}));
  MIGD_ASSERT_OK_AND_ASSIGN(states, ParseStates({}));
  EXPECT_TRUE(states.empty());
  EXPECT_THAT(ParseStates({"active,"}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown state ''")));
}

TEST(RequestsTest, InstanceSpecs) {
  EXPECT_THAT(ParseInstanceSpecs({}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no instances")));
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<migd::v1::InstanceSpec> specs,
                            ParseInstanceSpecs({"gpu0/2g.20gb", "1g.10gb+me"}));
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].gpu(), 0u);
  EXPECT_FALSE(specs[0].has_placement());
  EXPECT_EQ(specs[1].profile(), "1g.10gb+me");
}

TEST(RequestsTest, AllocateRequests) {
  AllocateOptions o;
  o.owner = "team-x";
  o.items = {"3g.20gb"};
  EXPECT_THAT(BuildAllocateRequest(o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--id: required")));
  o.request_id = "job-1";
  o.pod = "ns/p/u";
  EXPECT_THAT(BuildAllocateRequest(o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("exactly one owner")));
  o.owner.clear();
  MIGD_ASSERT_OK_AND_ASSIGN(migd::v1::AllocateRequest r, BuildAllocateRequest(o));
  EXPECT_EQ(r.request_id(), "job-1");
  EXPECT_EQ(r.owner().pod().uid(), "u");
  ASSERT_EQ(r.instances_size(), 1);
  EXPECT_EQ(r.instances(0).profile(), "3g.20gb");
}

TEST(RequestsTest, ReleaseRequests) {
  ReleaseOptions o;
  EXPECT_THAT(BuildReleaseRequest(o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("exactly one of --id")));
  o.mig_uuid = "MIG-1";
  MIGD_ASSERT_OK_AND_ASSIGN(migd::v1::ReleaseRequest r, BuildReleaseRequest(o));
  EXPECT_EQ(r.mig_uuid(), "MIG-1");
  EXPECT_EQ(r.request_id(), "");
}

}  // namespace
}  // namespace migd::cli
