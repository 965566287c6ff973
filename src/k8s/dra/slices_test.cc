// RenderSlices: both counter-set layouts, checked against the API server's
// validation rules of their Kubernetes versions (fake_resource_api.h's
// ValidateSlice) and the allocator model; names, quantities, comparison.
#include "k8s/dra/slices.h"

#include <gtest/gtest.h>

#include <set>

#include "k8s/dra/testing/allocator_model.h"
#include "k8s/dra/testing/fake_resource_api.h"
#include "mig/catalog.h"
#include "planner/planner.h"

namespace migd::k8s::dra {
namespace {

using Json = nlohmann::json;

constexpr char kDriver[] = "mig.migd.io";

NodeSnapshot Node(const std::string& model, int gpus) {
  NodeSnapshot n;
  const mig::GpuModel* m = mig::Catalog::Default().FindModel(model);
  for (int i = 0; i < gpus; ++i) {
    n.gpus.push_back({GpuIndex(i),
                      GpuUuid("GPU-" + std::to_string(1000 + i) + "-aaaa"),
                      "NVIDIA A100-SXM4-40GB",
                      "00000000:8" + std::to_string(i) + ":00.0",
                      m,
                      {}});
  }
  return n;
}

SliceOptions Opts(CounterLayout layout) {
  SliceOptions o;
  o.driver = kDriver;
  o.pool = "node-a";
  o.node_name = "node-a";
  o.layout = layout;
  o.node_uid = "uid-node-a";
  if (layout == CounterLayout::kCombined) o.max_devices = 128;
  return o;
}

TEST(SlicesTest, SplitLayoutIsValidFor135And136AndComplete) {
  for (int gpus : {1, 2, 8, 9}) {
    planner::Planner planner;
    const Pool pool = BuildPool(Node("a100-40gb", gpus), planner);
    const SliceOptions o = Opts(CounterLayout::kSplit);
    const std::vector<DesiredSlice> slices = RenderSlices(pool, o);
    std::vector<Json> objs;
    size_t devices = 0, sets = 0;
    std::string last_name;
    for (const DesiredSlice& s : slices) {
      const Json obj = SliceObject(s, 7, o);
      for (int minor : {35, 36}) {
        EXPECT_EQ(testing::ValidateSlice(obj, minor), std::vector<std::string>{}) << s.name;
      }
      EXPECT_EQ(obj["spec"]["pool"]["resourceSliceCount"], static_cast<int64_t>(slices.size()));
      EXPECT_EQ(obj["spec"]["pool"]["generation"], 7);
      EXPECT_EQ(obj["metadata"]["ownerReferences"][0]["kind"], "Node");
      EXPECT_GT(s.name, last_name);  // name order is publishing order
      last_name = s.name;
      devices += obj["spec"].value("devices", Json::array()).size();
      sets += obj["spec"].value("sharedCounters", Json::array()).size();
      objs.push_back(obj);
    }
    EXPECT_EQ(devices, pool.devices.size());
    EXPECT_EQ(sets, static_cast<size_t>(gpus));
    for (int minor : {35, 36}) {
      const auto pools = testing::AllocatorModel(minor).Pools(objs, "node-a");
      ASSERT_EQ(pools.size(), 1u);
      EXPECT_TRUE(pools[0].complete);
      EXPECT_TRUE(pools[0].valid) << pools[0].invalid_reason;
      EXPECT_EQ(pools[0].devices, pool.devices.size());
    }
  }
}

TEST(SlicesTest, CombinedLayoutIsValidFor134OnlyAndOneSlicePerGpu) {
  planner::Planner planner;
  const Pool pool = BuildPool(Node("h100-80gb", 3), planner);
  const SliceOptions o = Opts(CounterLayout::kCombined);
  const std::vector<DesiredSlice> slices = RenderSlices(pool, o);
  ASSERT_EQ(slices.size(), 3u);
  std::vector<Json> objs;
  for (size_t i = 0; i < slices.size(); ++i) {
    const Json obj = SliceObject(slices[i], 1, o);
    EXPECT_EQ(testing::ValidateSlice(obj, 34), std::vector<std::string>{}) << slices[i].name;
    // 1.35 refuses devices and counter sets in one slice.
    EXPECT_FALSE(testing::ValidateSlice(obj, 35).empty());
    ASSERT_EQ(obj["spec"]["sharedCounters"].size(), 1u);
    EXPECT_EQ(obj["spec"]["sharedCounters"][0]["name"], "gpu-" + std::to_string(i));
    for (const Json& d : obj["spec"]["devices"]) {
      EXPECT_EQ(d["consumesCounters"][0]["counterSet"], "gpu-" + std::to_string(i));
    }
    objs.push_back(obj);
  }
  const auto pools = testing::AllocatorModel(34).Pools(objs, "node-a");
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_TRUE(pools[0].valid) << pools[0].invalid_reason;
  // The split-layout allocator finds no counter sets in device slices... as
  // a 1.35 server would have refused the objects in the first place.
}

TEST(SlicesTest, DeviceShape) {
  planner::Planner planner;
  const Pool pool = BuildPool(Node("a100-40gb", 1), planner);
  const std::vector<DesiredSlice> slices = RenderSlices(pool, Opts(CounterLayout::kSplit));
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].name, "node-a-mig-migd-io-000");
  EXPECT_TRUE(slices[0].spec.contains("sharedCounters"));
  const Json& dev = slices[1].spec["devices"][0];
  EXPECT_EQ(dev["attributes"]["type"]["string"], "mig");
  EXPECT_EQ(dev["attributes"]["profile"]["string"], pool.devices[0].profile->name);
  EXPECT_EQ(dev["attributes"]["parentUUID"]["string"], "GPU-1000-aaaa");
  EXPECT_EQ(dev["attributes"]["parentIndex"]["int"], 0);
  EXPECT_EQ(dev["attributes"]["productName"]["string"], "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(dev["attributes"]["resource.kubernetes.io/pciBusID"]["string"], "0000:80:00.0");
  EXPECT_EQ(dev["capacity"]["memory"]["value"],
            MebibyteQuantity(pool.devices[0].profile->memory_mib));
  EXPECT_EQ(dev["consumesCounters"][0]["counterSet"], "gpu-0");
}

TEST(SlicesTest, QuantitiesAndComparison) {
  EXPECT_EQ(MebibyteQuantity(9856), "9856Mi");
  EXPECT_EQ(MebibyteQuantity(20480), "20Gi");
  EXPECT_EQ(MebibyteQuantity(1024 * 1024), "1Ti");
  EXPECT_EQ(ParseIntegerQuantity("1"), 1);
  EXPECT_EQ(ParseIntegerQuantity("2Gi"), int64_t{2} << 30);
  EXPECT_EQ(ParseIntegerQuantity("3k"), 3000);
  EXPECT_EQ(ParseIntegerQuantity("1.5Gi"), std::nullopt);
  EXPECT_EQ(ParseIntegerQuantity("Mi"), std::nullopt);
  Json a = {{"pool", {{"name", "p"}, {"generation", 3}}},
            {"capacity", {{"memory", {{"value", "1Gi"}}}}}};
  Json b = {{"pool", {{"name", "p"}, {"generation", 9}}},
            {"capacity", {{"memory", {{"value", "1024Mi"}}}}}};
  EXPECT_EQ(ComparableSpec(a), ComparableSpec(b));
  b["capacity"]["memory"]["value"] = "1025Mi";
  EXPECT_NE(ComparableSpec(a), ComparableSpec(b));
}

TEST(SlicesTest, NamesStayValidForLongNodeNames) {
  SliceOptions o = Opts(CounterLayout::kSplit);
  o.node_name = std::string(240, 'n');
  const std::string n0 = SliceName(o, 0), n1 = SliceName(o, 1);
  EXPECT_LE(n0.size(), 253u);
  EXPECT_NE(n0, n1);
  EXPECT_EQ(n0, SliceName(o, 0));
  EXPECT_LT(n0, n1);
  o.node_name = std::string(239, 'n') + "x";
  EXPECT_NE(SliceName(o, 0), n0);  // the hash keeps long names apart
}

TEST(SlicesTest, BusIdsAndLayouts) {
  EXPECT_EQ(SysfsBusId("00000000:17:00.0"), "0000:17:00.0");
  EXPECT_EQ(SysfsBusId("0000:AB:00.0"), "0000:ab:00.0");
  EXPECT_EQ(LayoutForServer(1, 34), CounterLayout::kCombined);
  EXPECT_EQ(LayoutForServer(1, 35), CounterLayout::kSplit);
  EXPECT_EQ(LayoutForServer(1, 36), CounterLayout::kSplit);
  EXPECT_EQ(CounterLayoutName(CounterLayout::kCombined), "combined");
}

TEST(SlicesTest, NothingToPublishWithoutGpus) {
  EXPECT_TRUE(RenderSlices(Pool{}, Opts(CounterLayout::kSplit)).empty());
  EXPECT_TRUE(RenderSlices(Pool{}, Opts(CounterLayout::kCombined)).empty());
}

}  // namespace
}  // namespace migd::k8s::dra
