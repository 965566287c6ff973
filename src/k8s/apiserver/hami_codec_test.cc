// HAMi annotation formats (reference/hami.md §2, §4).
#include "k8s/apiserver/hami_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mig/catalog.h"
#include "testing/status_matchers.h"

namespace migd::k8s::hami {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(MigAllocationsTest, DecodesHamiDocumentedExample) {
  const std::string text =
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-xxxxxxxx","profile":"2g.10gb",)"
      R"("placement":{"start":2,"size":2},)"
      R"("migUUID":"MIG-xxxxxxxx","gpuInstanceID":4,"computeInstanceID":0}])";
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<MigAllocation> a, DecodeMigAllocations(text));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].gpu_uuid, "GPU-xxxxxxxx");
  EXPECT_EQ(a[0].profile, "2g.10gb");
  EXPECT_EQ(a[0].placement.start, 2u);
  EXPECT_EQ(a[0].placement.size, 2u);
  EXPECT_EQ(a[0].mig_uuid, "MIG-xxxxxxxx");
  EXPECT_EQ(a[0].gpu_instance_id, 4u);
  EXPECT_EQ(a[0].compute_instance_id, 0u);  // zero id is a value, not absence
  EXPECT_TRUE(a[0].RuntimeReady());
  // Re-encoding gives HAMi's exact bytes (Go struct field order).
  EXPECT_EQ(EncodeMigAllocations(a), text);
}

TEST(MigAllocationsTest, ReservationWithoutIdentityOmitsRuntimeFields) {
  MigAllocation a;
  a.container_index = 1;
  a.device_index = 0;
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

TEST(MigAllocationsTest, RejectsWhatHamiRejects) {
  auto bad = [](const std::string& text) { return DecodeMigAllocations(text).status(); };
  EXPECT_THAT(bad(R"([{"profile":"1g.5gb","placement":{"start":0,"size":1}}])"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("gpuUUID is missing")));
  EXPECT_THAT(bad(R"([{"gpuUUID":"GPU-a","placement":{"start":0,"size":1}}])"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("profile is missing")));
  EXPECT_THAT(bad(R"([{"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":3,"size":0}}])"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("placement.size is 0")));
  EXPECT_THAT(bad(R"([{"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":0,"size":1},)"
                  R"("migUUID":"MIG-a","gpuInstanceID":3}])"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("partial runtime identity")));
  EXPECT_THAT(bad(R"([{"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":0,"size":1}},)"
                  R"({"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":1,"size":1}}])"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("[1]: duplicate containerIndex 0 deviceIndex 0")));
  EXPECT_THAT(bad("{}"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a JSON array")));
  EXPECT_THAT(bad("[{"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("not JSON")));
  EXPECT_THAT(bad(R"([{"gpuUUID":7,"profile":"1g.5gb","placement":{"start":0,"size":1}}])"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("wrong field type")));
  EXPECT_THAT(bad("[3]"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("not an object")));
}

// Regression for fuzz/corpus/hami_codec/regress-float-placement: numbers
// that are not integers of the field's range (a float far out of range was
// undefined behaviour, negative or huge integers wrapped) are refused, as Go's
// json.Unmarshal refuses them.
TEST(MigAllocationsTest, FuzzRegressionNonIntegerNumbersAreRefused) {
  const std::string head = R"([{"gpuUUID":"GPU-a","profile":"1g.10gb",)";
  for (const std::string bad : {R"("placement":{"start":4e24,"size":1})",
                                R"("placement":{"start":0,"size":1.5})",
                                R"("placement":{"start":-1,"size":1})",
                                R"("placement":{"start":0,"size":4294967296})",
                                R"("placement":{"start":0,"size":1},"containerIndex":2147483648)",
                                R"("placement":{"start":0,"size":1},"deviceIndex":"0")",
                                R"("placement":{"start":0,"size":1},"migUUID":"MIG-b",)"
                                R"("gpuInstanceID":-3,"computeInstanceID":0)"}) {
    EXPECT_THAT(DecodeMigAllocations(head + bad + "}]"),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("wrong field type")))
        << bad;
  }
  MIGD_ASSERT_OK_AND_ASSIGN(
      std::vector<MigAllocation> ok,
      DecodeMigAllocations(head + R"("placement":{"start":4,"size":4},"containerIndex":-1})" + "]"));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].placement.start, 4u);
  EXPECT_EQ(ok[0].container_index, -1);
}

TEST(PodDevicesTest, DecodesAndEncodesHamiFormat) {
  MIGD_ASSERT_OK_AND_ASSIGN(PodDevices d, DecodePodDevices("GPU-abc,NVIDIA,9984,29:;"));
  ASSERT_EQ(d.size(), 1u);
  ASSERT_EQ(d[0].size(), 1u);
  EXPECT_EQ(d[0][0], (ContainerDevice{"GPU-abc", "NVIDIA", 9984, 29}));
  EXPECT_EQ(EncodePodDevices(d), "GPU-abc,NVIDIA,9984,29:;");

  // Init container without devices, a container with two instances, and one
  // already erased: positions are kept.
  const std::string multi = ";GPU-a,NVIDIA,4864,15:GPU-a,NVIDIA,9856,29:;;";
  MIGD_ASSERT_OK_AND_ASSIGN(PodDevices m, DecodePodDevices(multi));
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(m[0].empty());
  EXPECT_EQ(m[1].size(), 2u);
  EXPECT_TRUE(m[2].empty());
  EXPECT_EQ(EncodePodDevices(m), multi);
  // Erasing a container leaves its ';'.
  m[1].clear();
  EXPECT_EQ(EncodePodDevices(m), ";;;");
  MIGD_ASSERT_OK_AND_ASSIGN(PodDevices e, DecodePodDevices(""));
  EXPECT_TRUE(e.empty());
}

TEST(PodDevicesTest, RejectsMalformedDevices) {
  EXPECT_THAT(DecodePodDevices("GPU-a,NVIDIA,9984:;").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("fewer than 4 fields")));
  EXPECT_THAT(DecodePodDevices("GPU-a,NVIDIA,lots,29:;").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("Usedmem")));
  EXPECT_THAT(DecodePodDevices("GPU-a,NVIDIA,1,x:;").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("Usedcores")));
}

TEST(NodeRegisterTest, PublishesMigProfilesInHamiShape) {
  const mig::GpuModel* a100 = mig::Catalog::Default().FindModel("a100-40gb");
  ASSERT_NE(a100, nullptr);
  engine::GpuView g;
  g.info.index = GpuIndex(0);
  g.info.uuid = GpuUuid("GPU-11111111-2222-3333-4444-555555555555");
  g.info.name = "NVIDIA A100-SXM4-40GB";
  g.info.memory_total_mib = 40960;
  g.model = a100;
  engine::GpuView off;  // MIG disabled: not registered, as HAMi
  off.info.index = GpuIndex(1);
  off.info.uuid = GpuUuid("GPU-other");
  const nlohmann::ordered_json v = NodeRegisterValue({g, off}, {});
  ASSERT_EQ(v.size(), 1u);
  const auto& d = v[0];
  EXPECT_EQ(d["id"], g.info.uuid.value());
  EXPECT_EQ(d["index"], 0);
  EXPECT_EQ(d["count"], 7);  // max InstanceCount (1g)
  EXPECT_EQ(d["devmem"], 40960);
  EXPECT_EQ(d["devcore"], 100);
  EXPECT_EQ(d["type"], "NVIDIA-NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(d["mode"], "mig");
  EXPECT_EQ(d["health"], true);
  // Base profiles only: 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb.
  std::vector<std::string> names;
  nlohmann::ordered_json two;
  for (const auto& p : d["migProfiles"]) {
    names.push_back(p["name"]);
    if (p["name"] == "2g.10gb") two = p;
  }
  EXPECT_THAT(names, ::testing::ElementsAre("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"));
  // hami.md §2 element shape: core = ceil(28*100/98) = 29.
  EXPECT_EQ(two.dump(),
            R"({"name":"2g.10gb","memoryMB":9856,"core":29,"sliceCount":2,)"
            R"("placements":[{"start":0,"size":2},{"start":2,"size":2},{"start":4,"size":2}]})");

  const nlohmann::ordered_json allowed = NodeRegisterValue({g}, {"1g.5gb", "3g.20gb"});
  ASSERT_EQ(allowed.size(), 1u);
  ASSERT_EQ(allowed[0]["migProfiles"].size(), 2u);
  EXPECT_EQ(allowed[0]["migProfiles"][1]["name"], "3g.20gb");
  // An allowlist naming nothing of this GPU: the GPU is not registered.
  EXPECT_TRUE(NodeRegisterValue({g}, {"1g.24gb"}).empty());
}

TEST(HandshakeTest, HamiFormat) { EXPECT_EQ(HandshakeValue(0), "Reported 1970-01-01 00:00:00"); }

TEST(PodIsActiveTest, EndedPodsAreInactive) {
  nlohmann::json pod = {{"metadata", {{"name", "p"}}}, {"status", {{"phase", "Running"}}}};
  EXPECT_TRUE(PodIsActive(pod));
  pod["status"]["phase"] = "Succeeded";
  EXPECT_FALSE(PodIsActive(pod));
  pod["status"]["phase"] = "Failed";
  EXPECT_FALSE(PodIsActive(pod));
  pod["status"]["phase"] = "Pending";
  pod["metadata"]["deletionTimestamp"] = "2026-11-29T11:00:00Z";
  EXPECT_FALSE(PodIsActive(pod));
}

TEST(AnnotationTest, ReadsStringAnnotationsOnly) {
  nlohmann::json pod = {{"metadata", {{"annotations", {{"a", "x"}, {"n", 3}}}}}};
  EXPECT_EQ(Annotation(pod, "a"), "x");
  EXPECT_EQ(Annotation(pod, "n"), std::nullopt);
  EXPECT_EQ(Annotation(pod, "missing"), std::nullopt);
  EXPECT_EQ(Annotation(nlohmann::json::object(), "a"), std::nullopt);
}

}  // namespace
}  // namespace migd::k8s::hami
