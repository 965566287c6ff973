#include "mig/layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace migd::mig {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::vector<Variant> kAllVariants = {Variant::kBase, Variant::kMe,  Variant::kMeAll,
                                           Variant::kNoMe, Variant::kGfx, Variant::kDoubleMemory};

const GpuModel& Model(std::string_view key) {
  const GpuModel* m = Catalog::Default().FindModel(key);
  if (m == nullptr) {
    ADD_FAILURE() << "model " << key << " not in the catalogue";
    static const GpuModel kEmpty;
    return kEmpty;
  }
  return *m;
}

const GiProfile& Profile(const GpuModel& model, std::string_view name) {
  const GiProfile* p = model.FindProfileByName(name);
  if (p == nullptr) {
    ADD_FAILURE() << "profile " << name << " not in " << model.key;
    static const GiProfile kEmpty;
    return kEmpty;
  }
  return *p;
}

// The "profile@start" items of a layout, from its ToString().
std::set<std::string> Items(const Layout& l) {
  std::set<std::string> out;
  std::istringstream in(l.ToString());
  for (std::string item; in >> item;) out.insert(item);
  return out;
}

// "1g@0,1,2,3 + 2g@4 + 1g@6" (starts grouped per profile) -> items.
std::set<std::string> ItemsFromTable(const std::string& row) {
  std::set<std::string> out;
  std::istringstream in(row);
  for (std::string group; in >> group;) {
    if (group == "+") continue;
    const size_t at = group.find('@');
    std::istringstream starts(group.substr(at + 1));
    for (std::string start; std::getline(starts, start, ',');) {
      out.insert(group.substr(0, at + 1) + start);
    }
  }
  return out;
}

struct Structure {
  size_t layouts = 0;
  size_t maximal = 0;
  size_t multisets = 0;
  size_t masks = 0;
  std::set<std::set<std::string>> maximal_items;
};

Structure Analyse(const GpuModel& model, const std::vector<const GiProfile*>& profiles) {
  Structure s;
  std::set<std::vector<std::string>> multisets;
  std::set<uint32_t> masks;
  const std::vector<Layout> layouts = EnumerateLayouts(model, profiles);
  s.layouts = layouts.size();
  for (const Layout& l : layouts) {
    masks.insert(l.occupied_mask());
    if (!l.IsMaximal(profiles)) continue;
    ++s.maximal;
    std::vector<std::string> names;
    for (const PlacedGi& gi : l.instances()) names.push_back(gi.profile->name);
    std::sort(names.begin(), names.end());
    multisets.insert(names);
    s.maximal_items.insert(Items(l));
  }
  s.multisets = multisets.size();
  s.masks = masks.size();
  return s;
}

// The same GPU with an unlimited engine budget: shows what the budget alone excludes.
GpuModel WithoutEngineLimits(const GpuModel& model) {
  GpuModel loose = model;
  loose.engine_totals = Engines{1000, 1000, 1000, 1000, 1000};
  return loose;
}

bool Holds(const Layout& l, const GiProfile& profile) { return l.CountOf(profile.id) > 0; }

// The 19 maximal layouts of the base profiles on an 8-unit GPU.
const char* const kNineteenMaximal[] = {
    "1g@0,1,2,3,4,5,6",
    "1g@0,1,2,3 + 2g@4 + 1g@6",
    "1g@0,1,2,3 + 3g@4",
    "1g@0,1 + 2g@2 + 1g@4,5,6",
    "1g@0,1 + 2g@2,4 + 1g@6",
    "1g@0,1 + 2g@2 + 3g@4",
    "2g@0 + 1g@2,3,4,5,6",
    "2g@0 + 1g@2,3 + 2g@4 + 1g@6",
    "2g@0 + 1g@2,3 + 3g@4",
    "2g@0,2 + 1g@4,5,6",
    "3g@0 + 1g@4,5,6",
    "4g@0 + 1g@4,5,6",
    "2g@0,2,4 + 1g@6",
    "3g@0 + 2g@4 + 1g@6",
    "4g@0 + 2g@4 + 1g@6",
    "2g@0,2 + 3g@4",
    "3g@0 + 3g@4",
    "4g@0 + 3g@4",
    "7g@0",
};

void ExpectEightUnitStructure(const GpuModel& model) {
  const std::vector<const GiProfile*> base = ProfilesOfVariants(model, {Variant::kBase});
  ASSERT_EQ(base.size(), 5u);
  const Structure s = Analyse(model, base);
  EXPECT_EQ(s.layouts, 298u);
  EXPECT_EQ(s.maximal, 19u);
  EXPECT_EQ(s.multisets, 14u);
  EXPECT_EQ(s.masks, 144u);
  std::set<std::set<std::string>> expected;
  for (const char* row : kNineteenMaximal) expected.insert(ItemsFromTable(row));
  ASSERT_EQ(expected.size(), 19u);
  EXPECT_EQ(s.maximal_items, expected);

  const std::vector<const GiProfile*> with_double =
      ProfilesOfVariants(model, {Variant::kBase, Variant::kDoubleMemory});
  ASSERT_EQ(with_double.size(), 6u);
  const Structure d = Analyse(model, with_double);
  EXPECT_EQ(d.layouts, 723u);
  EXPECT_EQ(d.maximal, 78u);
  EXPECT_EQ(d.multisets, 38u);
  EXPECT_EQ(d.masks, 192u);

  // Engine budgets never forbid a base or double-memory layout.
  const GpuModel loose = WithoutEngineLimits(model);
  EXPECT_EQ(EnumerateLayouts(loose, ProfilesOfVariants(loose, {Variant::kBase})).size(), 298u);
  EXPECT_EQ(
      EnumerateLayouts(loose, ProfilesOfVariants(loose, {Variant::kBase, Variant::kDoubleMemory}))
          .size(),
      723u);
}

TEST(LayoutStructureTest, A100FortyGbMatchesReference) {
  ExpectEightUnitStructure(Model("a100-40gb"));
}

const char* const kEightUnitModels[] = {"a100-40gb",  "a100-80gb",  "h100-80gb",   "h100-nvl-94gb",
                                        "h200-141gb", "gh200-96gb", "gh200-144gb", "h20-96gb",
                                        "b200-180gb", "gb200-186gb"};

TEST(LayoutStructureTest, EightUnitModelListIsComplete) {
  std::vector<std::string> from_catalogue;
  for (const GpuModel& m : Catalog::Default().models()) {
    if (m.memory_slices == 8) from_catalogue.push_back(m.key);
  }
  EXPECT_EQ(from_catalogue,
            std::vector<std::string>(std::begin(kEightUnitModels), std::end(kEightUnitModels)));
}

class EightUnitStructureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(EightUnitStructureTest, MatchesReference) { ExpectEightUnitStructure(Model(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Models, EightUnitStructureTest, ::testing::ValuesIn(kEightUnitModels),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(LayoutStructureTest, FourComputeSliceModelsBaseOnly) {
  for (const char* key : {"a30-24gb", "rtx-pro-6000-blackwell"}) {
    SCOPED_TRACE(key);
    const GpuModel& model = Model(key);
    const Structure s = Analyse(model, ProfilesOfVariants(model, {Variant::kBase}));
    EXPECT_EQ(s.layouts, 26u);
    EXPECT_EQ(s.maximal, 5u);
    EXPECT_EQ(s.multisets, 4u);
  }
}

TEST(LayoutStructureTest, A30NeverHoldsBothMeProfiles) {
  const GpuModel& a30 = Model("a30-24gb");
  const GiProfile& one_g_me = Profile(a30, "1g.6gb+me");
  const GiProfile& two_g_me = Profile(a30, "2g.12gb+me");
  const std::vector<Layout> layouts = EnumerateLayouts(a30, ProfilesOfVariants(a30, kAllVariants));
  EXPECT_EQ(layouts.size(), 76u);
  size_t with_one_g_me = 0;
  size_t with_two_g_me = 0;
  for (const Layout& l : layouts) {
    EXPECT_FALSE(Holds(l, one_g_me) && Holds(l, two_g_me)) << l.ToString();
    with_one_g_me += Holds(l, one_g_me);
    with_two_g_me += Holds(l, two_g_me);
  }
  EXPECT_GT(with_one_g_me, 0u);
  EXPECT_GT(with_two_g_me, 0u);

  // Without the engine budget, exactly 8 more states would hold both.
  const GpuModel loose = WithoutEngineLimits(a30);
  const GiProfile& loose_one = Profile(loose, "1g.6gb+me");
  const GiProfile& loose_two = Profile(loose, "2g.12gb+me");
  size_t both = 0;
  const std::vector<Layout> loose_layouts =
      EnumerateLayouts(loose, ProfilesOfVariants(loose, kAllVariants));
  for (const Layout& l : loose_layouts) both += Holds(l, loose_one) && Holds(l, loose_two);
  EXPECT_EQ(both, 8u);
  EXPECT_EQ(loose_layouts.size(), layouts.size() + 8);
}

TEST(LayoutStructureTest, RtxProMeAllCoexistsOnlyWithNoMeProfiles) {
  const GpuModel& rtx = Model("rtx-pro-6000-blackwell");
  const std::vector<Layout> layouts = EnumerateLayouts(rtx, ProfilesOfVariants(rtx, kAllVariants));
  size_t me_all_with_company = 0;
  for (const Layout& l : layouts) {
    size_t me_all = 0;
    size_t media = 0;
    bool only_no_me_besides = true;
    for (const PlacedGi& gi : l.instances()) {
      const Variant v = gi.profile->variant;
      me_all += v == Variant::kMeAll;
      media += v == Variant::kMeAll || v == Variant::kMe;
      if (v != Variant::kMeAll && v != Variant::kNoMe) only_no_me_besides = false;
    }
    EXPECT_LE(media, 1u) << l.ToString();
    if (me_all > 0) {
      EXPECT_TRUE(only_no_me_besides) << l.ToString();
      if (l.instances().size() > 1) ++me_all_with_company;
    }
  }
  EXPECT_GT(me_all_with_company, 0u);
}

TEST(LayoutStructureTest, OneMePerGpu) {
  for (const GpuModel& m : Catalog::Default().models()) {
    SCOPED_TRACE(m.key);
    std::vector<const GiProfile*> me = ProfilesOfVariants(m, {Variant::kMe, Variant::kMeAll});
    ASSERT_FALSE(me.empty());
    for (const GiProfile* first : me) {
      for (const GiProfile* second : me) {
        Layout l(m);
        ASSERT_THAT(l.Add(*first, first->placements.front()), IsOk());
        for (const Placement& p : second->placements) {
          EXPECT_THAT(l.CanAdd(*second, p), StatusIs(StatusCode::kResourceExhausted, ::testing::_))
              << first->name << " then " << second->name << " at " << p;
        }
      }
    }
  }
}

TEST(LayoutTest, AddRecordsTheInstance) {
  const GpuModel& h100 = Model("h100-80gb");
  const GiProfile& three_g = Profile(h100, "3g.40gb");
  const GiProfile& one_g = Profile(h100, "1g.10gb");
  Layout l(h100);
  EXPECT_EQ(&l.model(), &h100);
  EXPECT_TRUE(l.instances().empty());
  ASSERT_THAT(l.Add(three_g, {4, 4}), IsOk());
  ASSERT_THAT(l.Add(one_g, {1, 1}), IsOk());
  ASSERT_THAT(l.Add(one_g, {0, 1}), IsOk());
  EXPECT_EQ(l.occupied_mask(), 0xF3u);
  EXPECT_EQ(l.CountOf(one_g.id), 2u);
  EXPECT_EQ(l.CountOf(three_g.id), 1u);
  EXPECT_EQ(l.CountOf(GiProfileId(0)), 0u);
  EXPECT_EQ(l.engines_used(), (Engines{5, 5, 0, 5, 0}));
  EXPECT_EQ(l.instances().size(), 3u);
  EXPECT_EQ((l.instances()[0]), (PlacedGi{&three_g, {4, 4}}));
  EXPECT_EQ(l.ToString(), "1g@0 1g@1 3g@4");
}

TEST(LayoutTest, RemoveRestoresTheState) {
  const GpuModel& h100 = Model("h100-80gb");
  const GiProfile& three_g = Profile(h100, "3g.40gb");
  const GiProfile& one_g = Profile(h100, "1g.10gb");
  Layout l(h100);
  ASSERT_THAT(l.Add(three_g, {0, 4}), IsOk());
  ASSERT_THAT(l.Add(one_g, {5, 1}), IsOk());
  ASSERT_THAT(l.Remove(three_g, {0, 4}), IsOk());
  EXPECT_EQ(l.occupied_mask(), 0x20u);
  EXPECT_EQ(l.engines_used(), one_g.engines);
  EXPECT_EQ(l.CountOf(three_g.id), 0u);
  EXPECT_EQ(l.ToString(), "1g@5");
  EXPECT_THAT(l.Add(three_g, {0, 4}), IsOk());
}

TEST(LayoutTest, RemoveOfAnAbsentInstanceIsNotFound) {
  const GpuModel& h100 = Model("h100-80gb");
  const GiProfile& three_g = Profile(h100, "3g.40gb");
  const GiProfile& four_g = Profile(h100, "4g.40gb");
  Layout l(h100);
  EXPECT_THAT(l.Remove(three_g, {0, 4}),
              StatusIs(StatusCode::kNotFound, AllOf(HasSubstr("3g.40gb"), HasSubstr("0:4"))));
  ASSERT_THAT(l.Add(three_g, {0, 4}), IsOk());
  // Same range, other profile; same profile, other placement.
  EXPECT_THAT(l.Remove(four_g, {0, 4}), StatusIs(StatusCode::kNotFound, HasSubstr("4g.40gb")));
  EXPECT_THAT(l.Remove(three_g, {4, 4}), StatusIs(StatusCode::kNotFound, HasSubstr("4:4")));
  EXPECT_EQ(l.instances().size(), 1u);
}

TEST(LayoutTest, UnlistedPlacementIsInvalidArgument) {
  const GpuModel& h100 = Model("h100-80gb");
  Layout l(h100);
  EXPECT_THAT(l.Add(Profile(h100, "3g.40gb"), {2, 4}),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("2:4"), HasSubstr("not listed"), HasSubstr("0:4 4:4"))));
  // Right start, wrong size.
  EXPECT_THAT(l.Add(Profile(h100, "1g.20gb"), {0, 1}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not listed")));
  EXPECT_THAT(l.Add(Profile(h100, "7g.80gb"), {0, 7}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("0:7")));
  EXPECT_TRUE(l.instances().empty());
}

TEST(LayoutTest, ProfileOfAnotherModelIsInvalidArgument) {
  Layout l(Model("h100-80gb"));
  EXPECT_THAT(l.CanAdd(Profile(Model("a100-40gb"), "3g.20gb"), {0, 4}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a profile of h100-80gb")));
}

TEST(LayoutTest, OverlapIsResourceExhausted) {
  const GpuModel& h100 = Model("h100-80gb");
  Layout l(h100);
  ASSERT_THAT(l.Add(Profile(h100, "3g.40gb"), {4, 4}), IsOk());
  EXPECT_THAT(l.Add(Profile(h100, "1g.10gb"), {6, 1}),
              StatusIs(StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("overlaps"), HasSubstr("3g.40gb at 4:4"))));
  EXPECT_THAT(l.Add(Profile(h100, "7g.80gb"), {0, 8}),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("overlaps")));
  EXPECT_EQ(l.instances().size(), 1u);
  EXPECT_EQ(l.occupied_mask(), 0xF0u);
}

TEST(LayoutTest, InstanceCapIsResourceExhausted) {
  const GpuModel& h100 = Model("h100-80gb");
  const GiProfile& me = Profile(h100, "1g.10gb+me");
  Layout l(h100);
  ASSERT_THAT(l.Add(me, {0, 1}), IsOk());
  EXPECT_THAT(l.Add(me, {1, 1}), StatusIs(StatusCode::kResourceExhausted,
                                          AllOf(HasSubstr("instanceCount"), HasSubstr("1g.10gb+me"),
                                                HasSubstr("1 of 1"))));
}

TEST(LayoutTest, EngineBudgetIsResourceExhausted) {
  const GpuModel& rtx = Model("rtx-pro-6000-blackwell");
  Layout l(rtx);
  ASSERT_THAT(l.Add(Profile(rtx, "1g.24gb"), {3, 3}), IsOk());
  EXPECT_THAT(l.Add(Profile(rtx, "1g.24gb+me.all"), {0, 3}),
              StatusIs(StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("engine budget"), HasSubstr("1g.24gb+me.all"))));
  EXPECT_THAT(l.Add(Profile(rtx, "1g.24gb-me"), {0, 3}), IsOk());

  Layout me_all_first(rtx);
  ASSERT_THAT(me_all_first.Add(Profile(rtx, "1g.24gb+me.all"), {0, 3}), IsOk());
  EXPECT_THAT(me_all_first.Add(Profile(rtx, "2g.48gb"), {6, 6}),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("engine budget")));
  EXPECT_THAT(me_all_first.Add(Profile(rtx, "1g.24gb+gfx"), {3, 3}),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("engine budget")));
  EXPECT_THAT(me_all_first.Add(Profile(rtx, "2g.48gb-me"), {6, 6}), IsOk());
  EXPECT_EQ(me_all_first.ToString(), "1g+me.all@0 2g-me@6");

  const GpuModel& a30 = Model("a30-24gb");
  Layout a30_layout(a30);
  ASSERT_THAT(a30_layout.Add(Profile(a30, "1g.6gb+me"), {0, 1}), IsOk());
  EXPECT_THAT(a30_layout.Add(Profile(a30, "2g.12gb+me"), {2, 2}),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("engine budget")));
  EXPECT_THAT(a30_layout.Add(Profile(a30, "2g.12gb"), {2, 2}), IsOk());
}

TEST(LayoutTest, RemainingCapacityOnAnEmptyGpu) {
  const GpuModel& h100 = Model("h100-80gb");
  Layout l(h100);
  EXPECT_EQ(l.RemainingCapacity(Profile(h100, "1g.10gb")), 7u);
  EXPECT_EQ(l.RemainingCapacity(Profile(h100, "1g.10gb+me")), 1u);
  EXPECT_EQ(l.RemainingCapacity(Profile(h100, "1g.20gb")), 4u);
  EXPECT_EQ(l.RemainingCapacity(Profile(h100, "2g.20gb")), 3u);
  EXPECT_EQ(l.RemainingCapacity(Profile(h100, "3g.40gb")), 2u);
  EXPECT_EQ(l.RemainingCapacity(Profile(h100, "4g.40gb")), 1u);
  EXPECT_EQ(l.RemainingCapacity(Profile(h100, "7g.80gb")), 1u);
  EXPECT_EQ(l.RemainingCapacity(Profile(Model("a100-40gb"), "1g.5gb")), 0u);
}

// One 3g makes the 1g capacity 3 at 0, 4 at 4.
TEST(LayoutTest, RemainingCapacityDependsOnWhereThe3gSits) {
  const GpuModel& h100 = Model("h100-80gb");
  const GiProfile& three_g = Profile(h100, "3g.40gb");
  const GiProfile& one_g = Profile(h100, "1g.10gb");
  Layout at_zero(h100);
  ASSERT_THAT(at_zero.Add(three_g, {0, 4}), IsOk());
  EXPECT_EQ(at_zero.RemainingCapacity(one_g), 3u);
  Layout at_four(h100);
  ASSERT_THAT(at_four.Add(three_g, {4, 4}), IsOk());
  EXPECT_EQ(at_four.RemainingCapacity(one_g), 4u);
  EXPECT_EQ(at_four.RemainingCapacity(Profile(h100, "1g.20gb")), 2u);
  EXPECT_EQ(at_four.RemainingCapacity(three_g), 1u);
  EXPECT_EQ(at_four.RemainingCapacity(Profile(h100, "4g.40gb")), 1u);  // 4g@0 + 3g@4, R510+
  EXPECT_EQ(at_four.RemainingCapacity(Profile(h100, "7g.80gb")), 0u);
}

TEST(LayoutTest, RemainingCapacityCountsCapAndEngines) {
  const GpuModel& h100 = Model("h100-80gb");
  const GiProfile& me = Profile(h100, "1g.10gb+me");
  Layout l(h100);
  ASSERT_THAT(l.Add(me, {0, 1}), IsOk());
  EXPECT_EQ(l.RemainingCapacity(me), 0u);
  EXPECT_EQ(l.RemainingCapacity(Profile(h100, "1g.10gb")), 6u);

  // Engine-limited: every placement free and the cap not reached, but no decoder left.
  const GpuModel& rtx = Model("rtx-pro-6000-blackwell");
  Layout r(rtx);
  ASSERT_THAT(r.Add(Profile(rtx, "1g.24gb"), {0, 3}), IsOk());
  EXPECT_EQ(r.RemainingCapacity(Profile(rtx, "1g.24gb+me.all")), 0u);
  EXPECT_EQ(r.RemainingCapacity(Profile(rtx, "1g.24gb")), 3u);
  EXPECT_EQ(r.RemainingCapacity(Profile(rtx, "2g.48gb")), 1u);
}

// A toy catalogue whose caps and placements are not those of any real GPU, to
// reach the cases real tables never produce.
constexpr const char* kToyCatalog = R"({
  "schemaVersion": 1,
  "models": [{
    "key": "toy", "names": ["Toy GPU"], "pciDeviceIds": ["0x000110DE"],
    "computeSlices": 4, "memorySlices": 4, "memoryMiB": 4096, "smCount": 8,
    "engineTotals": {"copyEngines": 4, "decoders": 3, "encoders": 0, "jpeg": 0, "ofa": 0},
    "giIdRangesBySize": {"1": [3, 6], "2": [1, 2]},
    "giProfiles": [
      {"name": "1g.1gb", "index": 0, "id": 1, "variant": "base", "sliceCount": 1,
       "instanceCount": 2, "memoryMiB": 1024, "smCount": 2,
       "engines": {"copyEngines": 1, "decoders": 0, "encoders": 0, "jpeg": 0, "ofa": 0},
       "placements": [{"start": 0, "size": 1}, {"start": 1, "size": 1},
                      {"start": 2, "size": 1}, {"start": 3, "size": 1}],
       "ciProfiles": [{"index": 0, "id": 0, "sliceCount": 1, "instanceCount": 1,
                       "default": true, "placements": [{"start": 0, "size": 1}],
                       "confidence": "inferred"}],
       "confidence": "inferred"},
      {"name": "2g.2gb", "index": 1, "id": 2, "variant": "base", "sliceCount": 2,
       "instanceCount": 3, "memoryMiB": 2048, "smCount": 4,
       "engines": {"copyEngines": 1, "decoders": 2, "encoders": 0, "jpeg": 0, "ofa": 0},
       "placements": [{"start": 2, "size": 2}, {"start": 0, "size": 2}, {"start": 1, "size": 2}],
       "ciProfiles": [{"index": 1, "id": 1, "sliceCount": 2, "instanceCount": 1,
                       "default": true, "placements": [{"start": 0, "size": 2}],
                       "confidence": "inferred"}],
       "confidence": "inferred"}
    ]
  }]
})";

class ToyLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<Catalog> parsed = Catalog::FromJson(kToyCatalog);
    ASSERT_THAT(parsed, IsOk());
    catalog_ = std::move(parsed).value();
    model_ = catalog_.FindModel("toy");
    ASSERT_NE(model_, nullptr);
    one_g_ = model_->FindProfileByName("1g.1gb");
    two_g_ = model_->FindProfileByName("2g.2gb");
    ASSERT_NE(one_g_, nullptr);
    ASSERT_NE(two_g_, nullptr);
  }

  Catalog catalog_;
  const GpuModel* model_ = nullptr;
  const GiProfile* one_g_ = nullptr;
  const GiProfile* two_g_ = nullptr;
};

TEST_F(ToyLayoutTest, PlacementsAreSortedByStart) {
  EXPECT_EQ(two_g_->placements, (std::vector<Placement>{{0, 2}, {1, 2}, {2, 2}}));
}

TEST_F(ToyLayoutTest, CapReachedWithFreePlacementsLeft) {
  Layout l(*model_);
  ASSERT_THAT(l.Add(*one_g_, {0, 1}), IsOk());
  EXPECT_EQ(l.RemainingCapacity(*one_g_), 1u);
  ASSERT_THAT(l.Add(*one_g_, {1, 1}), IsOk());
  EXPECT_EQ(l.RemainingCapacity(*one_g_), 0u);
  EXPECT_THAT(l.Add(*one_g_, {2, 1}),
              StatusIs(StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("instanceCount"), HasSubstr("2 of 2"))));
}

TEST_F(ToyLayoutTest, CapacityCountsDisjointPlacementsOnly) {
  Layout l(*model_);
  // Three free 2g placements, at most two of them disjoint (0:2 and 2:2); the
  // engine budget (3 decoders, 2 per 2g) allows only one.
  EXPECT_EQ(l.RemainingCapacity(*two_g_), 1u);
  GpuModel loose = *model_;
  loose.engine_totals.decoders = 100;
  Layout unlimited(loose);
  EXPECT_EQ(unlimited.RemainingCapacity(*loose.FindProfileByName("2g.2gb")), 2u);
  ASSERT_THAT(unlimited.Add(*loose.FindProfileByName("1g.1gb"), {3, 1}), IsOk());
  EXPECT_EQ(unlimited.RemainingCapacity(*loose.FindProfileByName("2g.2gb")), 1u);
}

TEST(LayoutTest, IsMaximal) {
  const GpuModel& h100 = Model("h100-80gb");
  const std::vector<const GiProfile*> base = ProfilesOfVariants(h100, {Variant::kBase});
  Layout l(h100);
  EXPECT_FALSE(l.IsMaximal(base));
  EXPECT_TRUE(l.IsMaximal({}));
  ASSERT_THAT(l.Add(Profile(h100, "7g.80gb"), {0, 8}), IsOk());
  EXPECT_TRUE(l.IsMaximal(base));

  Layout partial(h100);
  for (uint32_t start = 0; start < 7; ++start) {
    ASSERT_THAT(partial.Add(Profile(h100, "1g.10gb"), {start, 1}), IsOk());
  }
  // Seven 1g leave slice 7 idle, yet nothing of the base set fits.
  EXPECT_EQ(partial.occupied_mask(), 0x7Fu);
  EXPECT_TRUE(partial.IsMaximal(base));
}

TEST(LayoutTest, ToStringKeepsVariantSuffixes) {
  const GpuModel& h100 = Model("h100-80gb");
  Layout l(h100);
  EXPECT_EQ(l.ToString(), "");
  ASSERT_THAT(l.Add(Profile(h100, "1g.20gb"), {6, 2}), IsOk());
  ASSERT_THAT(l.Add(Profile(h100, "1g.10gb+me"), {0, 1}), IsOk());
  ASSERT_THAT(l.Add(Profile(h100, "2g.20gb"), {2, 2}), IsOk());
  EXPECT_EQ(l.ToString(), "1g+me@0 2g@2 1g.20gb@6");
}

TEST(EnumerateLayoutsTest, EachSetOnceIncludingEmpty) {
  const GpuModel& h100 = Model("h100-80gb");
  const std::vector<const GiProfile*> profiles =
      ProfilesOfVariants(h100, {Variant::kBase, Variant::kDoubleMemory});
  const std::vector<Layout> layouts = EnumerateLayouts(h100, profiles);
  std::set<std::string> seen;
  for (const Layout& l : layouts) {
    EXPECT_TRUE(seen.insert(l.ToString()).second) << "twice: " << l.ToString();
  }
  EXPECT_EQ(seen.count(""), 1u);

  // A profile listed twice changes nothing.
  std::vector<const GiProfile*> doubled = profiles;
  doubled.push_back(profiles.front());
  EXPECT_EQ(EnumerateLayouts(h100, doubled).size(), layouts.size());
  EXPECT_EQ(EnumerateLayouts(h100, {}).size(), 1u);
}

TEST(EnumerateLayoutsTest, AllVariantsOnEveryModel) {
  for (const GpuModel& m : Catalog::Default().models()) {
    SCOPED_TRACE(m.key);
    const std::vector<Layout> layouts = EnumerateLayouts(m, ProfilesOfVariants(m, kAllVariants));
    // Not reference figures: computed here and by an independent script when
    // written; they change only if the catalogue or the legality rules do.
    const size_t expected = m.memory_slices == 8 ? 2319 : m.memory_slices == 4 ? 76 : 717;
    EXPECT_EQ(layouts.size(), expected);
    for (const Layout& l : layouts) {
      // Every enumerated layout is legal: re-adding its GIs one by one succeeds.
      Layout rebuilt(m);
      for (const PlacedGi& gi : l.instances()) {
        EXPECT_THAT(rebuilt.Add(*gi.profile, gi.placement), IsOk()) << l.ToString();
      }
    }
  }
}

TEST(ProfilesOfVariantsTest, SelectsInCatalogueOrder) {
  const GpuModel& rtx = Model("rtx-pro-6000-blackwell");
  std::vector<std::string> names;
  for (const GiProfile* p : ProfilesOfVariants(rtx, {Variant::kNoMe, Variant::kMeAll})) {
    names.push_back(p->name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"1g.24gb+me.all", "1g.24gb-me", "2g.48gb+me.all",
                                             "2g.48gb-me"}));
  EXPECT_TRUE(ProfilesOfVariants(Model("a30-24gb"), {Variant::kGfx}).empty());
}

}  // namespace
}  // namespace migd::mig
