#include "engine/instance_state.h"

#include <set>
#include <utility>

#include <gtest/gtest.h>

namespace migd::engine {
namespace {

using S = InstanceState;

TEST(InstanceStateTest, TableAllowsExactlyTheDesignTransitions) {
  const std::set<std::pair<S, S>> allowed = {
      {S::kNone, S::kCreating},      {S::kCreating, S::kActive},   {S::kCreating, S::kNone},
      {S::kCreating, S::kError},     {S::kActive, S::kIdle},       {S::kIdle, S::kActive},
      {S::kIdle, S::kReclaiming},    {S::kReclaiming, S::kDeleting}, {S::kDeleting, S::kNone},
      {S::kDeleting, S::kError},     {S::kError, S::kNone},
  };
  int refused = 0;
  for (S from : kAllInstanceStates) {
    for (S to : kAllInstanceStates) {
      const bool expect = allowed.count({from, to}) != 0;
      EXPECT_EQ(CanTransition(from, to), expect)
          << InstanceStateName(from) << " -> " << InstanceStateName(to);
      if (!expect) ++refused;
    }
  }
  EXPECT_EQ(refused, 7 * 7 - 11);
}

TEST(InstanceStateTest, ActiveCanOnlyBecomeIdle) {
  for (S to : kAllInstanceStates) {
    EXPECT_EQ(CanTransition(S::kActive, to), to == S::kIdle) << InstanceStateName(to);
  }
}

TEST(InstanceStateTest, RecordStateRoundTrip) {
  for (S s : kAllInstanceStates) {
    if (s == S::kNone) continue;
    EXPECT_EQ(FromRecordState(ToRecordState(s)), s);
  }
}

}  // namespace
}  // namespace migd::engine
