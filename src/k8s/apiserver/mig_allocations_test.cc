// hami.io/vgpu-mig-allocations (HAMi pkg/device/nvidia/mig_allocations.go).
#include "k8s/apiserver/mig_allocations.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "testing/status_matchers.h"

namespace migd::k8s::hami {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
constexpr char kMig[] = "MIG-11111111-2222-3333-4444-555555555555";

std::string Element(const std::string& extra) {
  return std::string(R"({"gpuUUID":")") + kGpu + R"(","profile":"1g.5gb",)" +
         R"("placement":{"start":0,"size":1})" + extra + "}";
}

Status Bad(const std::string& text) { return DecodeMigAllocations(text).status(); }

TEST(MigAllocationsTest, DecodesHamisExampleAndReencodesItByteForByte) {
  const std::string text = std::string(R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")") +
                           kGpu + R"(","profile":"2g.10gb","placement":{"start":2,"size":2},)" +
                           R"("migUUID":")" + kMig +
                           R"(","gpuInstanceID":4,"computeInstanceID":0}])";
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<MigAllocation> a, DecodeMigAllocations(text));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].gpu_uuid, kGpu);
  EXPECT_EQ(a[0].profile, "2g.10gb");
  EXPECT_EQ(a[0].placement, (mig::Placement{2, 2}));
  EXPECT_EQ(a[0].mig_uuid, kMig);
  EXPECT_EQ(a[0].gpu_instance_id, 4u);
  EXPECT_EQ(a[0].compute_instance_id, 0u);  // zero id is a value, not absence
  EXPECT_TRUE(a[0].RuntimeReady());
  EXPECT_EQ(EncodeMigAllocations(a), text);  // Go struct field order
}

TEST(MigAllocationsTest, ReservationWithoutIdentityOmitsRuntimeFields) {
  MigAllocation a;
  a.container_index = 1;
  a.gpu_uuid = "GPU-abc";
  a.profile = "1g.5gb";
  a.placement = {6, 1};
  EXPECT_EQ(EncodeMigAllocations({a}),
            R"([{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-abc","profile":"1g.5gb",)"
            R"("placement":{"start":6,"size":1}}])");
  MIGD_ASSERT_OK_AND_ASSIGN(auto back, DecodeMigAllocations(EncodeMigAllocations({a})));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], a);
  EXPECT_FALSE(back[0].RuntimeReady());
  MIGD_ASSERT_OK_AND_ASSIGN(auto empty, DecodeMigAllocations(""));
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(EncodeMigAllocations({}), "[]");
}

TEST(MigAllocationsTest, RefusesWhatHamiRefusesNamingTheElement) {
  const std::string src = "hami.io/vgpu-mig-allocations: ";
  EXPECT_THAT(Bad(R"([{"profile":"1g.5gb","placement":{"start":0,"size":1}}])"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr(src + "/0/gpuUUID: expected the reserved GPU's UUID")));
  EXPECT_THAT(
      Bad(R"([{"gpuUUID":"GPU-a","profile":"","placement":{"start":0,"size":1}}])"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("/0/profile: expected a MIG profile")));
  EXPECT_THAT(
      Bad(R"([{"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":3,"size":0}}])"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("/0/placement: expected a placement")));
  EXPECT_THAT(Bad("[" + Element(R"(,"migUUID":"MIG-a","gpuInstanceID":3)") + "]"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("/0: partial runtime identity")));
  EXPECT_THAT(Bad("[" + Element("") + "," + Element("") + "]"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/1: duplicate containerIndex 0 deviceIndex 0")));
  // Negative indices (HAMi: "MIG allocation %d is incomplete").
  EXPECT_THAT(Bad("[" + Element(R"(,"containerIndex":-1)") + "]"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/0/containerIndex: expected an integer in [0, 2147483647]")));
  EXPECT_THAT(Bad("{}"), StatusIs(StatusCode::kInvalidArgument,
                                  HasSubstr(src + "the document: expected an array")));
  EXPECT_THAT(Bad("[{"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  EXPECT_THAT(
      Bad(R"([{"gpuUUID":7,"profile":"1g.5gb","placement":{"start":0,"size":1}}])"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("/0/gpuUUID: expected a string, got 7")));
  EXPECT_THAT(Bad("[3]"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("/0: expected an object")));
  // The caller's source names the pod.
  EXPECT_THAT(DecodeMigAllocations("[3]", "pod default/p hami.io/vgpu-mig-allocations").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("pod default/p hami.io/vgpu-mig")));
}

// A MIG UUID that is not one, or is its parent GPU's, is refused where it
// enters, naming both values.
TEST(MigAllocationsTest, RefusesAParentGpuUuidAsTheMigUuid) {
  const std::string parent =
      std::string(",\"migUUID\":\"") + kGpu + R"(","gpuInstanceID":1,"computeInstanceID":0)";
  const Status s = Bad("[" + Element(parent) + "]");
  EXPECT_THAT(s, StatusIs(StatusCode::kInvalidArgument, HasSubstr("/0/migUUID")));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(std::string("\"") + kGpu + "\" is not a MIG UUID"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(std::string("gpuUUID is \"") + kGpu + "\""));

  const std::string same_gpu = std::string(R"({"gpuUUID":"MIG-x","profile":"1g.5gb",)") +
                               R"("placement":{"start":0,"size":1},"migUUID":"MIG-x",)" +
                               R"("gpuInstanceID":1,"computeInstanceID":0})";
  const Status e = Bad("[" + same_gpu + "]");
  EXPECT_THAT(e, StatusIs(StatusCode::kInvalidArgument,
                          HasSubstr("\"MIG-x\" equals its parent GPU's UUID gpuUUID \"MIG-x\"")));
  // A real MIG UUID of another value passes.
  MIGD_EXPECT_OK(DecodeMigAllocations("[" +
                                      Element(std::string(",\"migUUID\":\"") + kMig +
                                              R"(","gpuInstanceID":1,"computeInstanceID":0)") +
                                      "]")
                     .status());
}

// Regression for fuzz/corpus/hami_codec/regress-float-placement: numbers that
// are not integers of the field's range are refused, as Go's json.Unmarshal
// refuses them.
TEST(MigAllocationsTest, FuzzRegressionNonIntegerNumbersAreRefused) {
  const std::string head = R"([{"gpuUUID":"GPU-a","profile":"1g.10gb",)";
  for (const std::string bad :
       {R"("placement":{"start":4e24,"size":1})", R"("placement":{"start":0,"size":1.5})",
        R"("placement":{"start":-1,"size":1})", R"("placement":{"start":0,"size":4294967296})",
        R"("placement":{"start":0,"size":1},"containerIndex":2147483648)",
        R"("placement":{"start":0,"size":1},"deviceIndex":"0")",
        R"("placement":{"start":0,"size":1},"migUUID":"MIG-b",)"
        R"("gpuInstanceID":-3,"computeInstanceID":0)"}) {
    EXPECT_THAT(DecodeMigAllocations(head + bad + "}]"),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("expected")))
        << bad;
  }
}

TEST(MigAllocationsTest, UnknownMembersAreIgnoredAndNullIsAbsence) {
  MIGD_ASSERT_OK_AND_ASSIGN(
      std::vector<MigAllocation> a,
      DecodeMigAllocations("[" + Element(R"(,"futureField":{"x":1},"migUUID":null)") + "]"));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_FALSE(a[0].mig_uuid.has_value());
}

TEST(MigAllocationsTest, ContainerAllocationsInDeviceOrder) {
  auto make = [](int container, int device, const char* gpu) {
    MigAllocation a;
    a.container_index = container;
    a.device_index = device;
    a.gpu_uuid = gpu;
    a.profile = "1g.5gb";
    return a;
  };
  const MigAllocation a = make(1, 1, "GPU-a"), b = make(0, 0, "GPU-b"), c = make(1, 0, "GPU-c");
  const std::vector<MigAllocation> mine = ContainerAllocations({a, b, c}, 1);
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_EQ(mine[0].gpu_uuid, "GPU-c");
  EXPECT_EQ(mine[1].gpu_uuid, "GPU-a");
}

TEST(SetRuntimeIdentityTest, WritesTheContainersEntriesAndKeepsEverythingElse) {
  const std::string text = "[" + Element(R"(,"containerIndex":1,"deviceIndex":1,"note":"keep")") +
                           "," + Element(R"(,"containerIndex":0)") + "," +
                           Element(R"(,"containerIndex":1,"deviceIndex":0)") + "]";
  MIGD_ASSERT_OK_AND_ASSIGN(std::string out,
                            SetRuntimeIdentity(text, 1, {{"MIG-aaaa", 3, 0}, {"MIG-bbbb", 5, 1}}));
  const nlohmann::json doc = nlohmann::json::parse(out);
  // deviceIndex 0 gets the first identity, deviceIndex 1 the second.
  EXPECT_EQ(doc[2]["migUUID"], "MIG-aaaa");
  EXPECT_EQ(doc[2]["gpuInstanceID"], 3);
  EXPECT_EQ(doc[0]["migUUID"], "MIG-bbbb");
  EXPECT_EQ(doc[0]["computeInstanceID"], 1);
  EXPECT_EQ(doc[0]["note"], "keep");  // a member a newer scheduler wrote survives
  EXPECT_FALSE(doc[1].contains("migUUID"));
  EXPECT_THAT(SetRuntimeIdentity(text, 1, {{"MIG-aaaa", 3, 0}}),
              StatusIs(StatusCode::kAborted, HasSubstr("has 2 entries, not 1")));
  // An identity that is not a MIG device's is never written.
  EXPECT_THAT(SetRuntimeIdentity(text, 0, {{kGpu, 3, 0}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("is not a MIG UUID")));
}

}  // namespace
}  // namespace migd::k8s::hami
