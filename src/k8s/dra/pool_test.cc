// BuildPool: which devices, which counters, which order; and that the
// allocator model's first fit over the rendered slices is migd's choice.
#include "k8s/dra/pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "k8s/dra/slices.h"
#include "k8s/dra/testing/allocator_model.h"
#include "mig/catalog.h"
#include "mig/layout.h"
#include "planner/planner.h"

namespace migd::k8s::dra {
namespace {

using testing::AllocatorModel;
using testing::DeviceRef;
using testing::ModelRequest;
using testing::StringAttributeIs;

constexpr char kDriver[] = "mig.migd.io";
constexpr char kNode[] = "node-a";

const mig::GpuModel& Model(const std::string& key) {
  const mig::GpuModel* m = mig::Catalog::Default().FindModel(key);
  EXPECT_NE(m, nullptr) << key;
  return *m;
}

NodeSnapshot Node(const std::string& model, int gpus) {
  NodeSnapshot n;
  for (int i = 0; i < gpus; ++i) {
    n.gpus.push_back({GpuIndex(i),
                      GpuUuid("GPU-0000000" + std::to_string(i) + "-aaaa-bbbb-cccc-dddddddddddd"),
                      "NVIDIA H100 80GB HBM3",
                      "00000000:1" + std::to_string(i) + ":00.0",
                      &Model(model),
                      {}});
  }
  return n;
}

const PoolDevice* FirstOf(const Pool& pool, const std::string& profile) {
  for (const PoolDevice& d : pool.devices) {
    if (d.profile->name == profile) return &d;
  }
  return nullptr;
}

std::vector<nlohmann::json> Objects(const Pool& pool, CounterLayout layout, int64_t gen = 1) {
  SliceOptions o;
  o.driver = kDriver;
  o.pool = kNode;
  o.node_name = kNode;
  o.layout = layout;
  if (layout == CounterLayout::kCombined) o.max_devices = 128;
  std::vector<nlohmann::json> out;
  for (const DesiredSlice& s : RenderSlices(pool, o)) out.push_back(SliceObject(s, gen, o));
  return out;
}

TEST(PoolTest, EmptyGpuPublishesEveryDeviceSmallestProfileFirst) {
  planner::Planner planner;
  const Pool pool = BuildPool(Node("h100-80gb", 1), planner);
  size_t expected = 0;
  for (const mig::GiProfile& p : Model("h100-80gb").gi_profiles) expected += p.placements.size();
  EXPECT_EQ(pool.devices.size(), expected);
  ASSERT_EQ(pool.counter_sets.size(), 1u);
  EXPECT_EQ(pool.counter_sets[0].name, "gpu-0");
  // Profiles are contiguous runs, ordered by placement size.
  std::vector<std::string> runs;
  uint32_t last_size = 0;
  for (const PoolDevice& d : pool.devices) {
    if (runs.empty() || runs.back() != d.profile->name) {
      EXPECT_TRUE(std::find(runs.begin(), runs.end(), d.profile->name) == runs.end())
          << d.profile->name << " appears twice";
      runs.push_back(d.profile->name);
      EXPECT_GE(d.profile->placement_size(), last_size);
      last_size = d.profile->placement_size();
    }
    ASSERT_TRUE(d.stage.has_value()) << d.name;
    EXPECT_EQ(*d.stage, planner::Stage::kFree) << d.name;
  }
  EXPECT_EQ(runs.front().substr(0, 2), "1g");
  EXPECT_EQ(runs.back(), "7g.80gb");
}

// The first device of each profile is the placement the planner itself
// picks for that profile on the node (the unpinned plan).
TEST(PoolTest, FirstDeviceOfEachProfileIsThePlannersChoice) {
  std::mt19937 rng(5);
  const mig::GpuModel& h100 = Model("h100-80gb");
  const std::vector<const mig::GiProfile*> base =
      mig::ProfilesOfVariants(h100, {mig::Variant::kBase});
  for (int round = 0; round < 40; ++round) {
    NodeSnapshot node = Node("h100-80gb", 2);
    // Random Idle and claimed instances.
    for (SnapshotGpu& g : node.gpus) {
      mig::Layout layout(h100);
      for (int k = 0; k < 4; ++k) {
        const mig::GiProfile* p = base[rng() % base.size()];
        const mig::Placement pl = p->placements[rng() % p->placements.size()];
        if (!layout.Add(*p, pl).ok()) continue;
        const Occupancy occ = rng() % 2 ? Occupancy::kIdle : Occupancy::kClaimed;
        g.instances.push_back({p->name, pl, occ,
                               "MIG-" + std::to_string(g.index.value()) + "-" + std::to_string(k),
                               100 + k});
      }
    }
    planner::Planner planner;
    const Pool pool = BuildPool(node, planner);
    for (const mig::GiProfile* p : base) {
      planner::PlanInput in = PlannerView(node);
      in.request = {planner::InstanceRequest{p->name, std::nullopt, std::nullopt}};
      StatusOr<planner::Plan> plan = planner::MakePlan(in);
      const PoolDevice* first = FirstOf(pool, p->name);
      ASSERT_NE(first, nullptr) << p->name;
      if (!plan.ok()) {
        EXPECT_FALSE(first->stage.has_value()) << p->name << " " << first->name;
        continue;
      }
      const planner::InstancePlan& ip = plan->instances[0];
      ASSERT_TRUE(first->stage.has_value()) << p->name;
      // Reuse before free before reclaim (an Idle instance of the profile
      // first, then the planner-preferred free placement); within the
      // planner's own stage, its very choice.
      if (*first->stage == ip.stage) {
        EXPECT_EQ(first->gpu, ip.gpu) << p->name;
        EXPECT_EQ(first->placement, ip.placement) << p->name;
      } else {
        EXPECT_LT(static_cast<int>(*first->stage), static_cast<int>(ip.stage)) << p->name;
      }
    }
  }
}

TEST(PoolTest, IdleInstanceOfTheProfileComesFirst) {
  NodeSnapshot node = Node("h100-80gb", 1);
  node.gpus[0].instances.push_back({"1g.10gb", {2, 1}, Occupancy::kIdle, "MIG-idle", 50});
  planner::Planner planner;
  const Pool pool = BuildPool(node, planner);
  const PoolDevice* first = FirstOf(pool, "1g.10gb");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->name, "gpu-0-1g10gb-19-2");
  EXPECT_EQ(first->stage, planner::Stage::kReuse);
  // Idle instances stay reclaimable: the 7g over it is still published.
  EXPECT_NE(FirstOf(pool, "7g.80gb"), nullptr);
  EXPECT_EQ(FirstOf(pool, "7g.80gb")->stage, planner::Stage::kReclaim);
}

TEST(PoolTest, ClaimedInstanceKeepsItsDeviceAndTheCounters) {
  NodeSnapshot node = Node("h100-80gb", 1);
  node.gpus[0].instances.push_back({"3g.40gb", {4, 4}, Occupancy::kClaimed, "MIG-c", 0});
  planner::Planner planner;
  const Pool pool = BuildPool(node, planner);
  const Pool empty = BuildPool(Node("h100-80gb", 1), planner);
  EXPECT_EQ(pool.counter_sets[0].counters, empty.counter_sets[0].counters);
  EXPECT_EQ(pool.devices.size(), empty.devices.size());
  bool found = false;
  for (const PoolDevice& d : pool.devices) {
    if (d.name != "gpu-0-3g40gb-9-4") continue;
    found = true;
    EXPECT_FALSE(d.stage.has_value());  // blocked by the claim's own instance
  }
  EXPECT_TRUE(found);
}

TEST(PoolTest, InstancesNotTheSchedulersArePublishedLess) {
  NodeSnapshot node = Node("h100-80gb", 1);
  node.gpus[0].instances.push_back({"3g.40gb", {4, 4}, Occupancy::kOther, "foreign", 0});
  node.gpus[0].instances.push_back({"1g.10gb+me", {0, 1}, Occupancy::kOther, "MIG-api", 0});
  planner::Planner planner;
  const Pool pool = BuildPool(node, planner);
  const Counters& c = pool.counter_sets[0].counters;
  for (int i : {0, 4, 5, 6, 7}) EXPECT_EQ(c.count("memory-slice-" + std::to_string(i)), 0u) << i;
  for (int i : {1, 2, 3}) EXPECT_EQ(c.at("memory-slice-" + std::to_string(i)), 1) << i;
  EXPECT_EQ(c.at("ofa-engines"), 0);  // the +me instance holds the OFA
  for (const PoolDevice& d : pool.devices) {
    EXPECT_FALSE(d.placement.Overlaps({4, 4})) << d.name;
    EXPECT_FALSE(d.placement.Overlaps({0, 1})) << d.name;
    EXPECT_NE(d.profile->variant, mig::Variant::kMe) << d.name;
    EXPECT_TRUE(Fits(c, d.consumes)) << d.name;
  }
  EXPECT_NE(FirstOf(pool, "2g.20gb"), nullptr);  // 2g at 2:2 still fits
  EXPECT_EQ(FirstOf(pool, "7g.80gb"), nullptr);
  EXPECT_EQ(FirstOf(pool, "4g.40gb"), nullptr);
}

TEST(PoolTest, AllowlistLimitsProfiles) {
  NodeSnapshot node = Node("h100-80gb", 1);
  node.profile_allowlist = {"1g.10gb", "3g.40gb"};
  planner::Planner planner;
  const Pool pool = BuildPool(node, planner);
  std::set<std::string> profiles;
  for (const PoolDevice& d : pool.devices) profiles.insert(d.profile->name);
  EXPECT_EQ(profiles, (std::set<std::string>{"1g.10gb", "3g.40gb"}));
}

TEST(PoolTest, GpusWithoutPlacementTableAreSkipped) {
  NodeSnapshot node = Node("h100-80gb", 2);
  node.gpus[1].model = nullptr;
  planner::Planner planner;
  const Pool pool = BuildPool(node, planner);
  ASSERT_EQ(pool.counter_sets.size(), 1u);
  for (const PoolDevice& d : pool.devices) EXPECT_EQ(d.gpu, GpuIndex(0));
}

// The allocator model, fed the rendered slices, takes for each profile the
// device migd lists first: 1.36 (slices sorted by name) on 1-4 GPUs, and
// 1.35 (slice order unspecified: shuffled here) because each profile's
// devices share one slice. 1.34 (combined, one slice per GPU) keeps the
// order within a GPU.
TEST(PoolTest, AllocatorFirstFitIsMigdsFirstDevice) {
  std::mt19937 rng(11);
  for (int gpus : {1, 2, 4}) {
    NodeSnapshot node = Node("h100-80gb", gpus);
    node.gpus[0].instances.push_back({"1g.10gb", {6, 1}, Occupancy::kIdle, "MIG-i", 10});
    node.gpus[gpus - 1].instances.push_back({"2g.20gb", {0, 2}, Occupancy::kClaimed, "MIG-c", 0});
    planner::Planner planner;
    const Pool pool = BuildPool(node, planner);
    // The claimed instance's device is allocated.
    std::set<DeviceRef> allocated;
    for (const PoolDevice& d : pool.devices) {
      if (d.gpu == GpuIndex(gpus - 1) && d.profile->name == "2g.20gb" && d.placement.start == 0) {
        allocated.insert({kDriver, kNode, d.name});
      }
    }
    ASSERT_EQ(allocated.size(), 1u);
    for (int minor : {35, 36}) {
      std::vector<nlohmann::json> objs = Objects(pool, CounterLayout::kSplit);
      if (minor == 35) std::shuffle(objs.begin(), objs.end(), rng);
      const AllocatorModel model(minor);
      for (const char* profile :
           {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}) {
        std::optional<std::vector<DeviceRef>> got = model.Allocate(
            objs, allocated, {ModelRequest{kDriver, StringAttributeIs("profile", profile), 1}},
            kNode);
        // The first published device of the profile that is not blocked by
        // the allocated one.
        std::string want;
        for (const PoolDevice& d : pool.devices) {
          if (d.profile->name != profile) continue;
          if (d.gpu == GpuIndex(gpus - 1) && d.placement.Overlaps({0, 2})) continue;
          want = d.name;
          break;
        }
        if (want.empty()) {  // e.g. the only 4g overlaps the allocated 2g
          EXPECT_FALSE(got.has_value()) << profile;
          continue;
        }
        ASSERT_TRUE(got.has_value()) << profile << " gpus " << gpus << " minor " << minor;
        EXPECT_EQ((*got)[0].device, want) << profile << " gpus " << gpus << " minor " << minor;
      }
    }
    if (gpus == 1) {
      const AllocatorModel model34(34);
      std::optional<std::vector<DeviceRef>> got = model34.Allocate(
          Objects(pool, CounterLayout::kCombined), allocated,
          {ModelRequest{kDriver, StringAttributeIs("profile", "1g.10gb"), 1}}, kNode);
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ((*got)[0].device, "gpu-0-1g10gb-19-6");  // the Idle one
    }
  }
}

}  // namespace
}  // namespace migd::k8s::dra
