#include "planner/demand_mix.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace migd::planner {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(DemandMixTest, EmptyUntilObserved) {
  DemandMix mix(10);
  EXPECT_TRUE(mix.empty());
  EXPECT_THAT(mix.Weights(), IsEmpty());
  EXPECT_EQ(mix.reference_tick(), std::nullopt);
  EXPECT_EQ(mix.Weight("1g.10gb"), 0.0);
  mix.Observe("", 5);  // ignored
  EXPECT_TRUE(mix.empty());
}

TEST(DemandMixTest, CountsWithoutDecay) {
  DemandMix mix(DemandMix::kNoDecay);
  mix.Observe("1g.10gb", 0);
  mix.Observe("1g.10gb", 1000000);
  mix.Observe("3g.40gb", 5);
  EXPECT_THAT(mix.Weights(), ElementsAre(Pair("1g.10gb", 2.0), Pair("3g.40gb", 1.0)));
  EXPECT_EQ(mix.reference_tick(), 1000000);
}

TEST(DemandMixTest, HalvesEveryHalfLife) {
  DemandMix mix(100);
  mix.Observe("1g.10gb", 0);
  mix.Observe("1g.10gb", 0);
  mix.Observe("3g.40gb", 100);
  EXPECT_THAT(mix.Weight("1g.10gb"), DoubleNear(1.0, 1e-12));  // 2 x 1/2
  EXPECT_THAT(mix.Weight("3g.40gb"), DoubleNear(1.0, 1e-12));
  mix.Observe("3g.40gb", 300);
  EXPECT_THAT(mix.Weight("1g.10gb"), DoubleNear(0.25, 1e-12));
  EXPECT_THAT(mix.Weight("3g.40gb"), DoubleNear(1.25, 1e-12));
}

TEST(DemandMixTest, LateObservationCountsWithItsAge) {
  DemandMix mix(100);
  mix.Observe("1g.10gb", 200);
  mix.Observe("2g.20gb", 100);  // older than the reference: counts 1/2
  EXPECT_THAT(mix.Weight("2g.20gb"), DoubleNear(0.5, 1e-12));
  EXPECT_EQ(mix.reference_tick(), 200);
}

TEST(DemandMixTest, ForgetsWhatDecayedAway) {
  DemandMix mix(1);
  mix.Observe("7g.80gb", 0);
  mix.Observe("1g.10gb", 100);  // 2^-100 < kForgetBelow
  EXPECT_THAT(mix.Weights(), ElementsAre(Pair("1g.10gb", 1.0)));
  mix.Observe("4g.40gb", 0);  // far too old to count
  EXPECT_EQ(mix.Weight("4g.40gb"), 0.0);
}

TEST(DemandMixTest, SameObservationsSameWeights) {
  DemandMix a(50);
  DemandMix b(50);
  for (int64_t t = 0; t < 500; t += 7) {
    a.Observe(t % 3 == 0 ? "1g.10gb" : "2g.20gb", t);
    b.Observe(t % 3 == 0 ? "1g.10gb" : "2g.20gb", t);
  }
  EXPECT_EQ(a.Weights(), b.Weights());
}

TEST(DemandMixTest, NegativeHalfLifeMeansNoDecay) {
  DemandMix mix(-5);
  EXPECT_EQ(mix.half_life_ticks(), DemandMix::kNoDecay);
}

}  // namespace
}  // namespace migd::planner
