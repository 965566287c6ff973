#include "mig/legality.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "mig/layout.h"
#include "testing/status_matchers.h"

namespace migd::mig {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

const GpuModel& Model(std::string_view key) {
  const GpuModel* m = Catalog::Default().FindModel(key);
  EXPECT_NE(m, nullptr) << key;
  return *m;
}

size_t IndexOf(const GpuModel& m, std::string_view name) {
  const GiProfile* p = m.FindProfileByName(name);
  EXPECT_NE(p, nullptr) << name;
  return static_cast<size_t>(p - m.gi_profiles.data());
}

TEST(PlacementRulesTest, SlotsListEveryPlacementInProfileOrder) {
  const GpuModel& m = Model("h100-80gb");
  StatusOr<PlacementRules> rules = PlacementRules::Build(m);
  ASSERT_THAT(rules, IsOk());
  size_t expected = 0;
  for (const GiProfile& p : m.gi_profiles) expected += p.placements.size();
  ASSERT_EQ(rules->slots().size(), expected);
  for (size_t i = 1; i < rules->slots().size(); ++i) {
    const Slot& a = rules->slots()[i - 1];
    const Slot& b = rules->slots()[i];
    EXPECT_TRUE(a.profile < b.profile ||
                (a.profile == b.profile && a.placement.start < b.placement.start));
  }
  for (const Slot& s : rules->slots()) EXPECT_EQ(s.mask, s.placement.Mask());
  EXPECT_EQ(rules->memory_slices(), 8u);
  EXPECT_EQ(rules->totals(), ToEngineVector(m.engine_totals));
}

TEST(PlacementRulesTest, RejectsTablesOutsideTheCompactForm) {
  GpuModel wide = Model("h100-80gb");
  wide.memory_slices = 33;
  EXPECT_THAT(PlacementRules::Build(wide),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("33 memory units")));
  GpuModel big_cap = Model("h100-80gb");
  big_cap.gi_profiles[0].instance_count = 256;
  EXPECT_THAT(PlacementRules::Build(big_cap),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("instanceCount 256")));
  GpuModel outside = Model("h100-80gb");
  outside.gi_profiles[0].placements.push_back(Placement{7, 2});
  EXPECT_THAT(PlacementRules::Build(outside),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("outside the 8 memory units")));
  GpuModel many = Model("h100-80gb");
  while (many.gi_profiles.size() <= kMaxRuleProfiles) many.gi_profiles.push_back({});
  EXPECT_THAT(PlacementRules::Build(many),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("more than 32 GI profiles")));
}

TEST(CheckAddTest, NamesTheFirstRuleBroken) {
  const GpuModel& m = Model("h100-80gb");
  StatusOr<PlacementRules> rules = PlacementRules::Build(m);
  ASSERT_THAT(rules, IsOk());
  const size_t three_g = IndexOf(m, "3g.40gb");
  const size_t seven_g = IndexOf(m, "7g.80gb");
  Occupancy occ;
  EXPECT_EQ(CheckAdd(*rules, occ, three_g, {1, 4}), Verdict::kNotListed);
  EXPECT_EQ(CheckAdd(*rules, occ, three_g, {4, 4}), Verdict::kOk);
  occ.Add(*rules, three_g, Placement{4, 4}.Mask());
  EXPECT_EQ(CheckAdd(*rules, occ, seven_g, {0, 8}), Verdict::kOverlap);
  EXPECT_EQ(CheckAdd(*rules, occ, three_g, {0, 4}), Verdict::kOk);
  occ.Remove(*rules, three_g, Placement{4, 4}.Mask());
  EXPECT_EQ(occ, Occupancy{});
}

TEST(CheckAddTest, InstanceCountAndEnginesAreRulesThreeAndFour) {
  const GpuModel& m = Model("h100-80gb");
  StatusOr<PlacementRules> rules = PlacementRules::Build(m);
  ASSERT_THAT(rules, IsOk());
  // 1g.10gb+me holds the GPU's only OFA/JPEG set: a second one is refused
  // by the engine budget while instanceCount would allow it.
  const size_t me = IndexOf(m, "1g.10gb+me");
  ASSERT_GT(rules->cap(me), 0u);
  Occupancy occ;
  const Placement first = m.gi_profiles[me].placements[0];
  const Placement second = m.gi_profiles[me].placements[1];
  ASSERT_EQ(CheckAdd(*rules, occ, me, first), Verdict::kOk);
  occ.Add(*rules, me, first.Mask());
  if (rules->cap(me) == 1) {
    EXPECT_EQ(CheckAdd(*rules, occ, me, second), Verdict::kInstanceCount);
  } else {
    EXPECT_EQ(CheckAdd(*rules, occ, me, second), Verdict::kEngines);
  }
  EXPECT_EQ((CountAndEnginesAllowed(*rules, occ) >> me) & 1u, 0u);
  EXPECT_FALSE(CountAndEnginesAllow(*rules, occ, me));
  EXPECT_TRUE(WithinLimits(*rules, occ, 1u << me));
  // Added unchecked (a joint plan being costed): the limits report it.
  occ.Add(*rules, me, second.Mask());
  EXPECT_FALSE(WithinLimits(*rules, occ, 1u << me));
}

TEST(CheckAddTest, AgreesWithLayoutOnEveryModelAndSlot) {
  // Layout's messages sit on CheckAdd; both must accept the same additions
  // from every reachable one-GI layout of every catalogue model.
  for (const GpuModel& m : Catalog::Default().models()) {
    StatusOr<PlacementRules> rules = PlacementRules::Build(m);
    ASSERT_THAT(rules, IsOk()) << m.key;
    for (const Slot& first : rules->slots()) {
      Layout layout(m);
      ASSERT_THAT(layout.Add(m.gi_profiles[first.profile], first.placement), IsOk());
      for (const Slot& next : rules->slots()) {
        const bool by_rules =
            CheckAdd(*rules, layout.occupancy(), next.profile, next.placement) == Verdict::kOk;
        EXPECT_EQ(by_rules, layout.CanAdd(m.gi_profiles[next.profile], next.placement).ok())
            << m.key << " " << layout.ToString() << " + " << m.gi_profiles[next.profile].name << "@"
            << next.placement.ToString();
      }
    }
  }
}

TEST(VerdictTest, Names) {
  EXPECT_EQ(VerdictName(Verdict::kOk), "ok");
  EXPECT_EQ(VerdictName(Verdict::kNotListed), "not listed");
  EXPECT_EQ(VerdictName(Verdict::kOverlap), "overlap");
  EXPECT_EQ(VerdictName(Verdict::kInstanceCount), "instanceCount reached");
  EXPECT_EQ(VerdictName(Verdict::kEngines), "engine budget exhausted");
}

}  // namespace
}  // namespace migd::mig
