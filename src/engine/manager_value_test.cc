// engine::Manager with the planner's value policy (ManagerOptions::values):
// the cost order before the first solve and the values after it, solves run
// only on the service's executor (a ManualExecutor here: the test runs them),
// and every Allocate that reaches the planner is one arrival.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "base/status_macros.h"
#include "engine/manager.h"
#include "engine/manager_testing.h"
#include "planner/solve_executor.h"
#include "planner/value_service.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::migd::engine::testing::OpaqueReq;
using ::migd::engine::testing::Spec;

class ManagerValuePolicyTest : public testing::FakeHardwareTest {
 protected:
  void StartWithValues(planner::ValueOptions o = {}, const char* machine = "h100-80gb:1") {
    auto e = std::make_unique<planner::ManualExecutor>();
    executor_ = e.get();
    values_ = std::make_shared<planner::ValueService>(o, std::move(e));
    opts_.values = values_;
    Machine(machine);
    Start();
  }
  // The plan for one more 1g after a 1g allocated at 6:1 of GPU 0 was
  // released, with the worked example's values solved.
  StatusOr<planner::Plan> PlanBesideAnIdle1gAt6(std::optional<double> reuse_margin,
                                                const char* machine = "h100-80gb:1") {
    opts_.reuse_margin = reuse_margin;
    StartWithValues({}, machine);
    StatusOr<Allocation> a =
        mgr_->Allocate(OpaqueReq("r1", {Spec("1g.10gb", 0, mig::Placement{6, 1})}));
    if (!a.ok()) return a.status();
    MIGD_RETURN_IF_ERROR(mgr_->Release("r1"));
    values_->Prime({{"1g.10gb", 4}, {"2g.20gb", 2}, {"3g.40gb", 1}}, 0.9,
                   {mgr_->ModelOf(GpuIndex(0))});
    executor_->RunPending();
    return mgr_->Plan({Spec("1g.10gb")});
  }
  planner::ManualExecutor* executor_ = nullptr;
  std::shared_ptr<planner::ValueService> values_;
};

// docs/planner.md's worked example: an empty H100-80GB, demand 1g:2g:3g =
// 4:2:1. The cost order end-packs a 1g at 6:1; the values put it at 0:1.
TEST_F(ManagerValuePolicyTest, CostOrderBeforeTheFirstSolveValueOrderAfter) {
  StartWithValues();
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan before, mgr_->Plan({Spec("1g.10gb")}));
  EXPECT_FALSE(before.stats.value_policy);
  EXPECT_EQ(before.instances[0].placement, (mig::Placement{6, 1}));

  values_->Prime({{"1g.10gb", 4}, {"2g.20gb", 2}, {"3g.40gb", 1}}, 0.9,
                 {mgr_->ModelOf(GpuIndex(0))});
  ASSERT_EQ(executor_->pending(), 1u);
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan queued, mgr_->Plan({Spec("1g.10gb")}));
  EXPECT_FALSE(queued.stats.value_policy) << "a solve not yet run must not decide";
  EXPECT_EQ(queued.instances[0].placement, (mig::Placement{6, 1}));

  ASSERT_EQ(executor_->RunPending(), 1u);
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan after, mgr_->Plan({Spec("1g.10gb")}));
  EXPECT_TRUE(after.stats.value_policy);
  EXPECT_EQ(after.stats.value_version, 1u);
  EXPECT_EQ(after.instances[0].placement, (mig::Placement{0, 1}));

  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("r1", {Spec("1g.10gb")})));
  ASSERT_EQ(a.instances.size(), 1u);
  EXPECT_EQ(a.instances[0].placement, (mig::Placement{0, 1}));
  Consistent();
}

// Exact counts: each Allocate is one arrival and hands at most one solve to
// the executor without running it; Plan, replays and malformed requests are
// not arrivals.
TEST_F(ManagerValuePolicyTest, AllocateObservesOneArrivalAndNeverRunsASolve) {
  planner::ValueOptions o;
  o.min_arrivals = 3;
  StartWithValues(o);
  for (int i = 0; i < 3; ++i) {
    ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("r" + std::to_string(i), {Spec("1g.10gb")})));
    EXPECT_EQ(values_->estimate().arrivals, i + 1);
    EXPECT_EQ(values_->counters().solves, 0u);
  }
  EXPECT_EQ(executor_->pending(), 1u) << "the third arrival starts the first solve";

  ENGINE_ASSERT_OK(mgr_->Plan({Spec("1g.10gb")}));
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("r0", {Spec("1g.10gb")})));  // a replay
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("bad", {Spec("no-such-profile")})).ok());
  EXPECT_EQ(values_->estimate().arrivals, 3);

  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("r3", {Spec("2g.20gb")})));
  EXPECT_EQ(values_->estimate().arrivals, 4);
  EXPECT_EQ(values_->counters().solves, 0u);
  EXPECT_EQ(executor_->pending(), 1u) << "one solve in flight per model";

  EXPECT_EQ(executor_->RunPending(), 1u);
  EXPECT_EQ(values_->counters().solves, 1u);
  Consistent();
}

// A request refused for want of space is an arrival too (not placed).
TEST_F(ManagerValuePolicyTest, ARefusedRequestIsAnArrival) {
  StartWithValues();
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("big", {Spec("7g.80gb")})));
  EXPECT_FALSE(mgr_->Allocate(OpaqueReq("more", {Spec("1g.10gb")})).ok());
  EXPECT_EQ(values_->estimate().arrivals, 2);
}

// After Stop() the service runs no solve again and the last values serve.
TEST_F(ManagerValuePolicyTest, AStoppedServiceKeepsServingItsLastValues) {
  StartWithValues();
  values_->Prime({{"1g.10gb", 4}, {"2g.20gb", 2}, {"3g.40gb", 1}}, 0.9,
                 {mgr_->ModelOf(GpuIndex(0))});
  ASSERT_EQ(executor_->RunPending(), 1u);
  values_->Stop();
  values_->Prime({{"1g.10gb", 1}}, 0.5, {mgr_->ModelOf(GpuIndex(0))});
  EXPECT_EQ(executor_->pending(), 0u);
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan p, mgr_->Plan({Spec("1g.10gb")}));
  EXPECT_TRUE(p.stats.value_policy);
}

// planner.reuseMargin reaches the planner: an Idle 1g at 6:1, where the
// worked example's values would not put one, is handed out under a margin
// and passed over for a create at 0:1 without one.
TEST_F(ManagerValuePolicyTest, WithoutAReuseMarginTheValuesPassOverAnIdleInstance) {
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan p, PlanBesideAnIdle1gAt6(std::nullopt));
  EXPECT_TRUE(p.stats.value_policy);
  EXPECT_EQ(p.instances[0].stage, planner::Stage::kFree);
  EXPECT_EQ(p.instances[0].placement, (mig::Placement{0, 1}));
  ENGINE_ASSERT_OK(mgr_->Allocate(OpaqueReq("r2", {Spec("1g.10gb")})));
  EXPECT_EQ(mgr_->counters().margin_reuses, 0u);
}

TEST_F(ManagerValuePolicyTest, AReuseMarginReachesThePlanner) {
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan p, PlanBesideAnIdle1gAt6(1000));
  EXPECT_TRUE(p.stats.value_policy);
  EXPECT_EQ(p.instances[0].stage, planner::Stage::kReuse);
  EXPECT_EQ(p.instances[0].placement, (mig::Placement{6, 1}));
  EXPECT_EQ(mgr_->counters().margin_reuses, 0u) << "a dry run counts nothing";
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(OpaqueReq("r2", {Spec("1g.10gb")})));
  EXPECT_EQ(a.instances[0].placement, (mig::Placement{6, 1}));
  EXPECT_EQ(mgr_->counters().margin_reuses, 1u);
}

TEST_F(ManagerValuePolicyTest, AReuseMarginOutOfRangeIsRefused) {
  Machine("h100-80gb:1");
  opts_.reuse_margin = -1;
  StatusOr<std::unique_ptr<Manager>> m = Make();
  EXPECT_FALSE(m.ok());
  EXPECT_TRUE(IsInvalidArgument(m.status()));
  EXPECT_NE(m.status().message().find("ManagerOptions.reuse_margin"), std::string::npos)
      << m.status();
  opts_.reuse_margin = 0;
  opts_.reuse_margin_several_gpus = std::nan("");
  m = Make();
  EXPECT_TRUE(IsInvalidArgument(m.status()));
  EXPECT_NE(m.status().message().find("ManagerOptions.reuse_margin_several_gpus"),
            std::string::npos)
      << m.status();
}

// ManagerOptions::reuse_margin_several_gpus reaches the planner and decides
// on a node of two GPUs, where reuse_margin (unset) does not.
TEST_F(ManagerValuePolicyTest, ASeveralGpuReuseMarginReachesThePlannerOnTwoGpus) {
  opts_.reuse_margin_several_gpus = 1000;
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan p, PlanBesideAnIdle1gAt6(std::nullopt, "h100-80gb:2"));
  EXPECT_TRUE(p.stats.value_policy);
  EXPECT_EQ(p.instances[0].stage, planner::Stage::kReuse);
  EXPECT_EQ(p.instances[0].gpu, GpuIndex(0));
  EXPECT_EQ(p.instances[0].placement, (mig::Placement{6, 1}));
}

TEST_F(ManagerValuePolicyTest, WithoutASeveralGpuMarginTwoGpusFollowTheCostOrder) {
  MIGD_ASSERT_OK_AND_ASSIGN(planner::Plan p, PlanBesideAnIdle1gAt6(std::nullopt, "h100-80gb:2"));
  EXPECT_TRUE(p.stats.value_policy);
  EXPECT_NE(p.instances[0].stage, planner::Stage::kReuse);
}

}  // namespace
}  // namespace migd::engine
