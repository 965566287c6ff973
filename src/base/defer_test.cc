#include "base/defer.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace migd {
namespace {

static_assert(!std::is_copy_constructible_v<Defer<void (*)()>>);
static_assert(!std::is_copy_assignable_v<Defer<void (*)()>>);

TEST(DeferTest, RunsAtScopeExit) {
  int runs = 0;
  {
    Defer d([&runs] { ++runs; });
    EXPECT_TRUE(d.armed());
    EXPECT_EQ(runs, 0);
  }
  EXPECT_EQ(runs, 1);
}

TEST(DeferTest, DisarmedDoesNotRun) {
  int runs = 0;
  {
    Defer d([&runs] { ++runs; });
    d.Disarm();
    EXPECT_FALSE(d.armed());
    d.Disarm();  // idempotent
  }
  EXPECT_EQ(runs, 0);
}

TEST(DeferTest, RunsInReverseOrderOfCreation) {
  std::vector<std::string> undone;
  {
    Defer destroy_gi([&undone] { undone.push_back("gi"); });
    Defer destroy_ci([&undone] { undone.push_back("ci"); });
  }
  EXPECT_EQ(undone, (std::vector<std::string>{"ci", "gi"}));
}

TEST(DeferTest, RunsWhenAnExceptionUnwinds) {
  int runs = 0;
  try {
    Defer d([&runs] { ++runs; });
    throw std::runtime_error("step 2 failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(runs, 1);
}

TEST(DeferTest, RollbackOnlyWhenTheSecondStepFails) {
  // The pattern of defer.h: undo step 1 unless step 2 succeeded.
  auto transaction = [](bool step2_ok, int* undos) {
    Defer undo([undos] { ++*undos; });
    if (!step2_ok) return false;
    undo.Disarm();
    return true;
  };
  int undos = 0;
  EXPECT_TRUE(transaction(true, &undos));
  EXPECT_EQ(undos, 0);
  EXPECT_FALSE(transaction(false, &undos));
  EXPECT_EQ(undos, 1);
}

TEST(DeferTest, AcceptsMoveOnlyCallables) {
  auto flag = std::make_shared<int>(0);
  {
    auto owned = std::make_unique<int>(7);
    Defer d([owned = std::move(owned), flag] { *flag = *owned; });
  }
  EXPECT_EQ(*flag, 7);
}

}  // namespace
}  // namespace migd
