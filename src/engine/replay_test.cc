#include "engine/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace migd::engine {
namespace {

using ::testing::ElementsAre;

TEST(MatchReplayTest, SameOrderMatchesEachToItsPosition) {
  auto any = [](size_t, size_t) { return true; };
  EXPECT_THAT(*MatchReplay(3, 3, any), ElementsAre(0, 1, 2));
}

TEST(MatchReplayTest, InstancesInAnotherOrderAreMatchedBySpec) {
  // Specs: 3g, 1g, 2g. Instances (record order): 1g, 2g, 3g.
  const std::vector<std::string> specs = {"3g", "1g", "2g"};
  const std::vector<std::string> insts = {"1g", "2g", "3g"};
  auto fits = [&](size_t s, size_t i) { return specs[s] == insts[i]; };
  EXPECT_THAT(*MatchReplay(3, 3, fits), ElementsAre(1, 2, 0));
}

TEST(MatchReplayTest, AugmentingPathsReseatEarlierSpecs) {
  // Spec 0 fits instances 0 and 1, spec 1 only instance 0: spec 0 must move.
  auto fits = [](size_t s, size_t i) { return s == 0 ? i <= 1 : i == 0; };
  EXPECT_THAT(*MatchReplay(2, 2, fits), ElementsAre(1, 0));
}

TEST(MatchReplayTest, NoPerfectMatchingOrOtherCountsIsNoReplay) {
  auto only_first = [](size_t, size_t i) { return i == 0; };
  EXPECT_EQ(MatchReplay(2, 2, only_first), std::nullopt);
  EXPECT_EQ(MatchReplay(2, 3, [](size_t, size_t) { return true; }), std::nullopt);
  EXPECT_THAT(*MatchReplay(0, 0, only_first), ElementsAre());
}

TEST(MatchReplayTest, SixtyFourDuplicatesInReverseOrderMatch) {
  std::vector<int> spec_kind(64);
  std::vector<int> inst_kind(64);
  for (int i = 0; i < 64; ++i) {
    spec_kind[i] = i % 4;
    inst_kind[63 - i] = i % 4;
  }
  auto fits = [&](size_t s, size_t i) { return spec_kind[s] == inst_kind[i]; };
  std::optional<std::vector<size_t>> m = MatchReplay(64, 64, fits);
  ASSERT_TRUE(m.has_value());
  std::vector<bool> used(64, false);
  for (size_t i = 0; i < 64; ++i) {
    EXPECT_EQ(spec_kind[(*m)[i]], inst_kind[i]);
    EXPECT_FALSE(used[(*m)[i]]);
    used[(*m)[i]] = true;
  }
}

}  // namespace
}  // namespace migd::engine
