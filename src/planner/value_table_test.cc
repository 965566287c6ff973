#include "planner/value_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "mig/layout.h"
#include "planner/planner_test_util.h"
#include "testing/status_matchers.h"

namespace migd::planner {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using test::Model;
using ::testing::HasSubstr;

DemandWeights Base() {
  return {{"1g.10gb", 1}, {"2g.20gb", 1}, {"3g.40gb", 1}, {"4g.40gb", 1}, {"7g.80gb", 1}};
}

std::shared_ptr<const ValueTable> Solved(const DemandWeights& mix, double load,
                                         Objective objective = Objective::kCount) {
  ValueSpec spec;
  spec.objective = objective;
  spec.rates = PerGpuRates(Model("h100-80gb"), mix, load);
  StatusOr<std::shared_ptr<const ValueTable>> t = ValueTable::Solve(Model("h100-80gb"), spec);
  EXPECT_THAT(t, IsOk());
  return t.ok() ? *t : nullptr;
}

size_t Index(const char* name) {
  const mig::GpuModel& m = Model("h100-80gb");
  return static_cast<size_t>(m.FindProfileByName(name) - m.gi_profiles.data());
}

// The layout counts of an 8-unit GPU: 298 with the base profiles, 723 with
// the double-memory 1g as well (the same counts the benchmark's tables check).
TEST(ValueTableTest, StatesAreTheLegalLayoutsOfTheDemandedProfiles) {
  std::shared_ptr<const ValueTable> base = Solved(Base(), 0.9);
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(base->num_states(), 298u);
  DemandWeights dm = Base();
  dm["1g.20gb"] = 1;
  std::shared_ptr<const ValueTable> with_dm = Solved(dm, 0.9);
  ASSERT_NE(with_dm, nullptr);
  EXPECT_EQ(with_dm->num_states(), 723u);
  EXPECT_EQ(with_dm->stats().states, 723u);
  EXPECT_GT(with_dm->stats().bytes, 723u * sizeof(double));
  EXPECT_GT(with_dm->stats().solve_ns, 0);
  EXPECT_GT(with_dm->stats().serial, base->stats().serial);
  EXPECT_EQ(base->profiles(), (1u << Index("1g.10gb")) | (1u << Index("2g.20gb")) |
                                  (1u << Index("3g.40gb")) | (1u << Index("4g.40gb")) |
                                  (1u << Index("7g.80gb")));
}

TEST(ValueTableTest, TransitionsFollowMigLegality) {
  std::shared_ptr<const ValueTable> t = Solved(Base(), 0.9);
  ASSERT_NE(t, nullptr);
  const mig::GpuModel& m = Model("h100-80gb");
  const int three_at_4 = t->SlotOf(Index("3g.40gb"), 4);
  const int one_at_6 = t->SlotOf(Index("1g.10gb"), 6);
  const int seven = t->SlotOf(Index("7g.80gb"), 0);
  ASSERT_GE(three_at_4, 0);
  EXPECT_EQ(t->SlotOf(Index("3g.40gb"), 1), -1);     // not a listed start
  EXPECT_EQ(t->SlotOf(Index("1g.10gb+me"), 0), -1);  // no demand: not in the table
  const int s = t->Add(t->empty_state(), three_at_4);
  ASSERT_GE(s, 0);
  EXPECT_EQ(t->Add(s, one_at_6), -1);  // 1g@6 overlaps 3g@4
  EXPECT_EQ(t->Add(s, seven), -1);
  EXPECT_EQ(t->StateOf(uint64_t{1} << three_at_4), s);
  EXPECT_EQ(t->StateOf((uint64_t{1} << three_at_4) | (uint64_t{1} << one_at_6)), -1);
  // The states are exactly mig's legal layouts of those profiles.
  const std::vector<mig::Layout> layouts =
      mig::EnumerateLayouts(m, {&m.gi_profiles[Index("1g.10gb")], &m.gi_profiles[Index("2g.20gb")],
                                &m.gi_profiles[Index("3g.40gb")], &m.gi_profiles[Index("4g.40gb")],
                                &m.gi_profiles[Index("7g.80gb")]});
  ASSERT_EQ(layouts.size(), t->num_states());
  for (const mig::Layout& l : layouts) {
    uint64_t set = 0;
    for (const mig::PlacedGi& gi : l.instances()) {
      set |= uint64_t{1} << t->SlotOf(static_cast<size_t>(gi.profile - m.gi_profiles.data()),
                                      gi.placement.start);
    }
    EXPECT_GE(t->StateOf(set), 0) << l.ToString();
  }
}

TEST(ValueTableTest, ConvergesWithTheEmptyLayoutAtZero) {
  std::shared_ptr<const ValueTable> t = Solved(Base(), 1.1);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->stats().converged);
  EXPECT_GT(t->stats().iterations, 10);
  EXPECT_EQ(t->Value(t->empty_state()), 0.0);
  // The gain is what is accepted per mean lifetime: below what is offered.
  double offered = 0;
  for (double r : t->spec().rates) offered += r;
  EXPECT_GT(t->stats().gain, 0.5 * offered);
  EXPECT_LT(t->stats().gain, offered);
  // A full GPU (7g) is worth less than an empty one: it blocks everything.
  const int full = t->Add(t->empty_state(), t->SlotOf(Index("7g.80gb"), 0));
  EXPECT_LT(t->Value(full), t->Value(t->empty_state()));
}

// On an empty H100 under the uniform mix, the best 1g placement keeps both
// 3g slots' worth: it lands at the end (start 6) rather than in the middle.
TEST(ValueTableTest, TheBestOneGigOnAnEmptyGpuIsAtTheEnd) {
  std::shared_ptr<const ValueTable> t = Solved(Base(), 0.9);
  ASSERT_NE(t, nullptr);
  int best = -1;
  double best_h = -1e300;
  for (uint32_t start = 0; start < 7; ++start) {
    const int s = t->Add(t->empty_state(), t->SlotOf(Index("1g.10gb"), start));
    if (t->Value(s) > best_h + 1e-12) {
      best_h = t->Value(s);
      best = static_cast<int>(start);
    }
  }
  EXPECT_EQ(best, 6);
}

TEST(ValueTableTest, SliceObjectiveWeighsByComputeSlices) {
  std::shared_ptr<const ValueTable> count = Solved(Base(), 0.9, Objective::kCount);
  std::shared_ptr<const ValueTable> slice = Solved(Base(), 0.9, Objective::kSliceWeighted);
  ASSERT_NE(count, nullptr);
  ASSERT_NE(slice, nullptr);
  // Slice rewards are ≥ 1 per acceptance (1g = 1 ... 7g = 7): a larger gain.
  EXPECT_GT(slice->stats().gain, count->stats().gain);
}

TEST(ValueTableTest, PerGpuRatesOfferTheLoad) {
  const mig::GpuModel& m = Model("h100-80gb");
  const std::vector<double> r = PerGpuRates(m, {{"1g.10gb", 3}, {"3g.40gb", 1}, {"9g", 5}}, 0.8);
  // E[c] = 0.75·1 + 0.25·3 = 1.5; λ = 0.8·7/1.5; shares 3:1; unknown names ignored.
  EXPECT_NEAR(r[Index("1g.10gb")], 0.75 * 0.8 * 7 / 1.5, 1e-12);
  EXPECT_NEAR(r[Index("3g.40gb")], 0.25 * 0.8 * 7 / 1.5, 1e-12);
  double offered_compute = 0;
  for (size_t p = 0; p < r.size(); ++p) offered_compute += r[p] * m.gi_profiles[p].slice_count;
  EXPECT_NEAR(offered_compute, 0.8 * m.compute_slices, 1e-9);
  EXPECT_EQ(PerGpuRates(m, {}, 0.8), std::vector<double>(m.gi_profiles.size(), 0.0));
}

TEST(ValueTableTest, ExtraProfilesStayWithoutDemand) {
  ValueSpec spec;
  spec.rates = PerGpuRates(Model("h100-80gb"), Base(), 0.9);
  spec.extra_profiles = 1u << Index("1g.10gb+me");
  MIGD_ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ValueTable> t,
                            ValueTable::Solve(Model("h100-80gb"), spec));
  EXPECT_GE(t->SlotOf(Index("1g.10gb+me"), 0), 0);
  EXPECT_GT(t->num_states(), 298u);
}

TEST(ValueTableTest, Errors) {
  const mig::GpuModel& m = Model("h100-80gb");
  ValueSpec none;
  none.rates.assign(m.gi_profiles.size(), 0.0);
  EXPECT_THAT(ValueTable::Solve(m, none),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no demand")));
  ValueSpec wrong;
  wrong.rates = {1.0};
  EXPECT_THAT(ValueTable::Solve(m, wrong),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("1 rates for")));
  ValueSpec negative;
  negative.rates.assign(m.gi_profiles.size(), 0.0);
  negative.rates[0] = -1;
  EXPECT_THAT(ValueTable::Solve(m, negative),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("finite and >= 0")));
  ValueSpec big;
  big.rates = PerGpuRates(m, Base(), 0.9);
  SolveOptions small;
  small.max_states = 100;
  EXPECT_THAT(ValueTable::Solve(m, big, small),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("more than 100 legal layouts")));
  mig::GpuModel wide = m;
  wide.memory_slices = 40;
  EXPECT_THAT(ValueTable::Solve(wide, big),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("40 memory units")));
}

TEST(ObjectiveTest, NamesRoundTrip) {
  EXPECT_EQ(ObjectiveName(Objective::kCount), "count");
  EXPECT_EQ(ObjectiveName(Objective::kSliceWeighted), "slices");
  EXPECT_EQ(*ParseObjective("slices"), Objective::kSliceWeighted);
  EXPECT_THAT(ParseObjective("area"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("want count or slice")));
}

}  // namespace
}  // namespace migd::planner
