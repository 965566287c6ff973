// hami.io/node-nvidia-register in HAMi's DeviceInfo shape (plugin/register.go).
#include "k8s/apiserver/node_register.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mig/catalog.h"

namespace migd::k8s::hami {
namespace {

engine::GpuView A100(int index, std::string uuid) {
  engine::GpuView g;
  g.info.index = GpuIndex(index);
  g.info.uuid = GpuUuid(std::move(uuid));
  g.info.name = "NVIDIA A100-SXM4-40GB";
  g.info.memory_total_mib = 40960;
  g.model = mig::Catalog::Default().FindModel("a100-40gb");
  return g;
}

TEST(NodeRegisterTest, PublishesMigProfilesInHamiShape) {
  const engine::GpuView g = A100(0, "GPU-11111111-2222-3333-4444-555555555555");
  ASSERT_NE(g.model, nullptr);
  engine::GpuView off;  // MIG disabled: not registered, as HAMi
  off.info.index = GpuIndex(1);
  off.info.uuid = GpuUuid("GPU-other");
  const nlohmann::ordered_json v = NodeRegisterValue({g, off}, {});
  ASSERT_EQ(v.size(), 1u);
  const auto& d = v[0];
  EXPECT_EQ(d["id"], g.info.uuid.value());
  EXPECT_FALSE(d.contains("index"));  // Go's omitempty drops index 0
  EXPECT_EQ(d["count"], 7);           // max InstanceCount (1g)
  EXPECT_EQ(d["devmem"], 40960);
  EXPECT_EQ(d["devcore"], 100);
  // v2.10 prefixes "NVIDIA-" only to names that do not start with NVIDIA.
  EXPECT_EQ(d["type"], "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(d["mode"], "mig");
  EXPECT_EQ(d["health"], true);
  std::vector<std::string> names;
  nlohmann::ordered_json two;
  for (const auto& p : d["migProfiles"]) {
    names.push_back(p["name"]);
    if (p["name"] == "2g.10gb") two = p;
  }
  // Base profiles only.
  EXPECT_THAT(names, ::testing::ElementsAre("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"));
  // core = ceil(28*100/98) = 29.
  EXPECT_EQ(two.dump(),
            R"({"name":"2g.10gb","memoryMB":9856,"core":29,"sliceCount":2,)"
            R"("placements":[{"start":0,"size":2},{"start":2,"size":2},{"start":4,"size":2}]})");
  EXPECT_EQ(NodeRegisterValue({A100(3, "GPU-x")}, {})[0]["index"], 3);
}

TEST(NodeRegisterTest, AllowlistRestrictsProfilesAndDropsGpusWithoutAny) {
  const engine::GpuView g = A100(0, "GPU-a");
  const nlohmann::ordered_json allowed = NodeRegisterValue({g}, {"1g.5gb", "3g.20gb"});
  ASSERT_EQ(allowed.size(), 1u);
  ASSERT_EQ(allowed[0]["migProfiles"].size(), 2u);
  EXPECT_EQ(allowed[0]["migProfiles"][1]["name"], "3g.20gb");
  EXPECT_TRUE(NodeRegisterValue({g}, {"1g.24gb"}).empty());
}

TEST(NodeRegisterTest, DeviceTypeAsHamiWritesIt) {
  EXPECT_EQ(DeviceType("NVIDIA H100 80GB HBM3"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(DeviceType("A100-SXM4-40GB"), "NVIDIA-A100-SXM4-40GB");
}

}  // namespace
}  // namespace migd::k8s::hami
